"""Atomic file writes: a reader never sees half a file, a failure leaves the old one.

What a path to write names decides how it is written (:func:`replacing`,
:func:`write_atomic`): a regular file, or none, is replaced atomically (a temp file and a
rename); a symlink is followed, so the file it points to is replaced and the link stays;
a character device (``/dev/null``, a terminal, ``/dev/stdout``) or a FIFO is written
through, in place, never replaced (a FIFO needs a reader: without one the write fails at
once rather than wait); anything else (a directory, a block device, a socket) is refused
with an OSError naming it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Collection, Iterator
from pathlib import Path


def _through(path: Path) -> int | None:
    """For a path that names a character device or a FIFO (through symlinks): a
    descriptor open for writing to it; None for a regular file or no file. Raises
    OSError for the kinds that are refused, and for a FIFO without a reader."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        try:  # O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of waiting
            fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            if exc.errno == errno.ENXIO and stat.S_ISFIFO(mode):
                raise OSError(
                    errno.ENXIO, "a FIFO with no reader: not written", str(path)
                ) from None
            raise
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return fd
    kind = "a directory" if stat.S_ISDIR(mode) else (
        "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
        else "not a regular file"
    )  # fmt: skip
    raise OSError(
        errno.EINVAL, f"{kind}: not written (give a file, a character device or a FIFO)", str(path)
    )


def _followed(path: Path) -> Path:
    """The file a symlink points to (the path itself when it is none): replaced in its
    place, so the link stays a link."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def replacing(path: Path, *, mode: int | None = None) -> Iterator[Path]:
    """A temp file in ``path``'s directory (created with its missing directories) for the
    block to write; renamed over ``path`` when the block ends, removed when it raises, so
    ``path`` is the old file or the whole new one. ``mode`` defaults to the usual file
    mode (0o666 less the umask). A symlink is followed, a character device or a FIFO is
    yielded itself to write through, other kinds raise OSError (see the module)."""
    fd = _through(path)
    if fd is not None:
        try:  # held open: a FIFO keeps a writer while the block opens it again
            yield path
        finally:
            os.close(fd)
        return
    path = _followed(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        # mkstemp makes 0600
        os.chmod(tmp, 0o666 & ~_umask() if mode is None else mode)
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory, fsync and a
    rename (:func:`replacing`): a reader sees the old file or the new one. A character
    device or a FIFO is written through (see the module)."""
    fd = _through(path)
    if fd is not None:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return
    with (
        replacing(path, mode=mode) as tmp,
        os.fdopen(os.open(tmp, os.O_WRONLY), "w", encoding="utf-8", newline="\n") as fh,
    ):
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (created with its directories when missing), whole or
    not at all: its UTF-8 bytes go in one ``os.write`` on an ``O_APPEND`` descriptor, and
    a write that fails or comes up short (a full disk) truncates the file back to its size
    before (removes it, when this call created it) and raises OSError. The file never ends
    with part of ``text`` or half a UTF-8 character. A character device or a FIFO is
    written through (see the module)."""
    data = text.encode("utf-8")
    through = _through(path)  # a character device or a FIFO: written through, as is
    if through is not None:
        with os.fdopen(through, "wb") as fh:
            fh.write(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o666)  # less the umask
    try:
        before = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(f"short write: {written} of {len(data)} bytes (disk full?)")
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
                if not existed and before == 0:
                    os.unlink(path)
            raise
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------- leftovers

STALE_TEMP_S = 600.0
"""A temp file of :func:`write_atomic` this old was left by a writer that died."""

_TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp$")
"""The names :func:`write_atomic` gives its temp files: ``.<name>.<8 random chars>.tmp``
(``tempfile.mkstemp`` with its prefix and suffix)."""


def remove_stale_temps(
    directory: Path, *, owned: Collection[str] = (), older_than: float = STALE_TEMP_S
) -> list[Path]:
    """Remove the temp files that :func:`write_atomic` left in ``directory`` when its
    process was killed between creating and renaming them: those of the files named in
    ``owned`` whatever their age (the caller holds their lock, so no one is writing them),
    the others once older than ``older_than`` seconds. Returns the paths removed; what
    cannot be removed is left alone."""
    removed: list[Path] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        match = _TEMP_NAME.match(name)
        if match is None:
            continue
        path = directory / name
        try:
            if match["target"] not in owned and now - path.stat().st_mtime < older_than:
                continue
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


# --------------------------------------------------------------------------- locks

LOCK_POLL_S = 0.01


class LockTimeout(TimeoutError):
    """A lock held by another process for longer than the caller would wait."""


@contextlib.contextmanager
def file_lock(lock: Path, *, timeout: float, what: object = None) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock`` (created, with its directories, when
    missing) for the ``with`` block; raises :class:`LockTimeout` after ``timeout`` seconds,
    naming ``lock`` and ``what`` it guards.

    POSIX: ``fcntl.flock``. The kernel drops the lock when its holder dies, however it
    dies, so a lock file left by a killed process never blocks anyone. The holder removes
    the file before releasing the lock, so none is left behind: a waiter that then gets the
    lock of the removed file sees that the path names another file, or none, and starts
    over, so two processes never both hold it. Windows: ``msvcrt.locking`` on the file's
    first byte, and the file stays (an open file cannot be removed there).
    """
    deadline = time.monotonic() + timeout
    while True:
        fd = _open_locked(lock)
        if fd is not None:
            break
        if time.monotonic() >= deadline:
            guarded = f" on {what}" if what is not None else ""
            raise LockTimeout(
                f"{lock}: gave up waiting for the lock{guarded} after {timeout:g} s: another "
                "process holds it (a second pytest --ortperf-update?)"
            )
        time.sleep(LOCK_POLL_S)
    try:
        yield
    finally:
        if sys.platform == "win32":
            import msvcrt

            with contextlib.suppress(OSError):
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            with contextlib.suppress(OSError):
                os.unlink(lock)  # still holding it: no one else can be using this file
        os.close(fd)


def _open_locked(lock: Path) -> int | None:
    """A descriptor of ``lock``, locked by this process; None when someone else holds it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:  # its directory was removed in between
        return None
    try:
        if sys.platform == "win32":
            import msvcrt

            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            except OSError:  # held by another process
                os.close(fd)
                return None
        else:
            import fcntl

            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                mine, there = os.fstat(fd), os.stat(lock)
            except (BlockingIOError, FileNotFoundError):  # held, or removed by its holder
                os.close(fd)
                return None
            if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
                os.close(fd)  # we locked the file its previous holder removed
                return None
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd
