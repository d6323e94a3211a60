"""The spool: runs the store could not take, kept in local files until it can.

A CI run whose database server is down, unreachable or refusing writes must not lose its
results. :func:`spool_run` writes the whole run (its uid, times, git state, environment,
records and profiles) to one JSON file, atomically, under the spool directory; the next
``--ortperf`` run against the same store, or ``ortperf sync``, writes it with
:func:`sync` and removes the file. Every run carries the uid made when it started
(``runs.uid``): a run that reached the store before a failure, or that two syncs write at
once, is stored once.

A spooled run names the store it was meant for by its label (credentials masked): a
sync writes only the runs meant for the store it writes to (an SQLite file by its real
path: through a symlink it is the same store).

A sync claims each file before writing its run (a rename to a name only it uses), so two
syncs at once never write, count or report the same file; the claim of a sync that died
is taken over by the next one. A file that cannot be read as a run (not a regular file,
over :data:`MAX_BYTES`, not UTF-8, not JSON, nested too deep, not a run) or whose run the
store cannot take (:class:`~pytest_ortperf.store.errors.UnstorableRun`) is moved to
:data:`SET_ASIDE` beside the spool and named, and the sync goes on with the next file.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ortperf.files import write_atomic
from pytest_ortperf.results import Record, record_from_dict
from pytest_ortperf.store import write as results_store
from pytest_ortperf.store.connection import same_store, store_label
from pytest_ortperf.store.errors import StoreError, StorePath, UnstorableRun
from pytest_ortperf.store.secrets import redact_url
from pytest_ortperf.store.write import UID

SPOOL_ENV = "ORTPERF_SPOOL"
"""Environment variable naming the spool directory."""

DEFAULT_SPOOL = ".ortperf/spool"
"""The spool directory relative to the rootdir, when ``$ORTPERF_SPOOL`` is not set."""

FORMAT = 1
"""Version of the spool file's format (its ``format`` key)."""

MAX_BYTES = 256 << 20
"""The largest spool file read (256 MiB): a larger one is set aside, not loaded."""

SET_ASIDE = "set-aside"
"""The directory, in the spool directory, where files a sync cannot write are moved."""

_PREFIX, _SUFFIX = "run-", ".json"
_CLAIM = ".claimed-"
"""A file a sync is writing: ``run-<uid>.json.claimed-<pid>`` (not pending for others)."""


class SpoolError(Exception):
    """A spool file that cannot be read or written (the message names it)."""


@dataclass(frozen=True)
class SpooledRun:
    """One run as :func:`~pytest_ortperf.store.write.save_run` takes it, and the store it was
    meant for (its label, credentials masked)."""

    uid: str
    store: str
    started: float
    finished: float
    command_line: str
    git: Mapping[str, Any]
    environment: Mapping[str, Any]
    records: Sequence[Record]
    profiles: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "uid": self.uid,
            "store": self.store,
            "started": self.started,
            "finished": self.finished,
            "command_line": self.command_line,
            "git": dict(self.git),
            "environment": dict(self.environment),
            "interrupted": self.interrupted,
            "records": [record.to_dict() for record in self.records],
            "profiles": [
                {"test": test, "name": name, "by_op": [dict(row) for row in rows]}
                for (test, name), rows in self.profiles.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpooledRun:
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, this version reads {FORMAT}")
        uid = data["uid"]
        if not isinstance(uid, str) or not UID.fullmatch(uid):
            raise ValueError(f"uid {str(uid)[:40]!r}: 1 to 36 letters, digits and '-' expected")
        return cls(
            uid=uid,
            store=str(data["store"]),
            started=float(data["started"]),
            finished=float(data["finished"]),
            command_line=str(data["command_line"]),
            git=dict(data["git"]),
            environment=dict(data["environment"]),
            records=[record_from_dict(record) for record in data["records"]],
            profiles={(str(p["test"]), str(p["name"])): list(p["by_op"]) for p in data["profiles"]},
            interrupted=bool(data.get("interrupted", False)),
        )

    def save(self, store: StorePath) -> int:
        """Write this run to ``store`` (once: see ``save_run``'s uid); its run id there."""
        return results_store.save_run(
            store,
            started=self.started,
            finished=self.finished,
            command_line=self.command_line,
            git=self.git,
            environment=self.environment,
            records=self.records,
            profiles=self.profiles,
            interrupted=self.interrupted,
            uid=self.uid,
        )


def resolve_spool(value: str | None, rootdir: Path) -> Path:
    """The spool directory: ``value``, else ``$ORTPERF_SPOOL``, else ``DEFAULT_SPOOL``
    under ``rootdir`` (relative paths taken from ``rootdir``)."""
    text = (value or os.environ.get(SPOOL_ENV, "")).strip() or DEFAULT_SPOOL
    path = Path(text).expanduser()
    return path if path.is_absolute() else rootdir / path


def spool_path(directory: Path, uid: str) -> Path:
    return directory / f"{_PREFIX}{uid}{_SUFFIX}"


def spool_run(directory: Path, run: SpooledRun) -> Path:
    """Write ``run`` to its file in ``directory`` atomically; raises SpoolError."""
    path = spool_path(directory, run.uid)
    try:
        text = json.dumps(run.to_dict(), sort_keys=True)
        write_atomic(path, text + "\n")
    except (OSError, TypeError, ValueError) as exc:
        raise SpoolError(f"{path}: cannot spool the run ({exc})") from None
    return path


def pending(directory: Path) -> list[Path]:
    """The spool files in ``directory``, oldest first (none when it does not exist)."""
    try:
        found = [p for p in directory.iterdir() if p.name.startswith(_PREFIX)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise SpoolError(f"{directory}: cannot list the spool ({exc.strerror or exc})") from None
    files = [p for p in found if p.name.endswith(_SUFFIX)]

    def age(path: Path) -> tuple[float, str]:
        try:
            return path.stat().st_mtime, path.name
        except OSError:
            return 0.0, path.name

    return sorted(files, key=age)


def _read(path: Path) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_BYTES`, opened without following
    a symlink or waiting on a FIFO; raises SpoolError naming it."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            raise SpoolError(f"{path}: not a spooled run: not a regular file ({_kind(info)})")
        fd = os.open(path, flags)
    except SpoolError:
        raise
    except OSError as exc:
        raise SpoolError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced since the lstat
            raise SpoolError(f"{path}: not a spooled run: not a regular file ({_kind(info)})")
        if info.st_size > MAX_BYTES:
            raise SpoolError(
                f"{path}: not a spooled run: {info.st_size} bytes, over the limit of "
                f"{MAX_BYTES >> 20} MiB"
            )
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SpoolError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise SpoolError(f"{path}: not a spooled run: over the limit of {MAX_BYTES >> 20} MiB")
    return data


def _kind(info: os.stat_result) -> str:
    kinds = [
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((what for test, what in kinds if test(info.st_mode)), "not a file")


def load(path: Path, *, name: Path | None = None) -> SpooledRun:
    """The run of a spool file; a damaged file is a SpoolError naming it (and the line).
    ``name``: the file as messages name it (a claimed file by its spool name)."""
    shown = path if name is None else name
    try:
        raw = _read(path)
    except SpoolError as exc:
        raise SpoolError(str(exc).replace(str(path), str(shown), 1)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpoolError(
            f"{shown}: not a spooled run: not UTF-8 (byte {exc.start}: {exc.reason})"
        ) from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise SpoolError(f"{shown}: not a spooled run: JSON nested too deep") from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        where = f"{shown}:{line}" if line else str(shown)
        raise SpoolError(f"{where}: not a spooled run: invalid JSON ({exc})") from None
    try:
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object expected, found {type(data).__name__}")
        return SpooledRun.from_dict(data)
    except RecursionError:
        raise SpoolError(f"{shown}: not a spooled run: nested too deep") from None
    except Exception as exc:  # any field of any type: a hand-edited or damaged file
        raise SpoolError(f"{shown}: not a spooled run ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class SyncResult:
    """What :func:`sync` did: runs written (spool file, run id), files left for another
    store (file, that store), files set aside (file, why: damaged, or a run the store
    cannot take; the why names where the file went), and the store's error that stopped
    it (None when every run meant for the store was written or set aside)."""

    written: list[tuple[Path, int]]
    other_store: list[tuple[Path, str]]
    damaged: list[tuple[Path, str]]
    error: str | None = None


def _claim(path: Path) -> Path | None:
    """Take ``path`` for this process (a rename, atomic): the claimed file, or None when
    another sync took it first."""
    claimed = path.with_name(f"{path.name}{_CLAIM}{os.getpid()}")
    try:
        os.rename(path, claimed)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SpoolError(f"{path}: cannot claim it ({exc.strerror or exc})") from None
    return claimed


def _orphans(directory: Path) -> list[Path]:
    """Files claimed by syncs whose process is gone (killed mid-way): renamed back to their
    spool name, so that this sync writes them (their run's uid keeps it stored once)."""
    back: list[Path] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return back
    for name in names:
        base, sep, pid = name.rpartition(_CLAIM)
        if not sep or not base.startswith(_PREFIX) or not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.rename(directory / name, directory / base)
            back.append(directory / base)
    return back


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def set_aside(path: Path, *, name: Path | None = None) -> str:
    """Move a spool file to :data:`SET_ASIDE`; where it went, in words."""
    shown = path if name is None else name
    target_dir = shown.parent / SET_ASIDE
    target = target_dir / shown.name
    try:
        target_dir.mkdir(exist_ok=True)
        if target.exists() or target.is_symlink():
            target = target_dir / f"{shown.stem}.{os.getpid()}{shown.suffix}"
        os.rename(path, target)
    except OSError as exc:
        if name is not None:  # give the claimed file its name back
            with contextlib.suppress(OSError):
                os.rename(path, shown)
        return f"left as it was (cannot move it to {target_dir}: {exc.strerror or exc})"
    return f"set aside as {target}"


def sync(store: StorePath, directory: Path, *, any_store: bool = False) -> SyncResult:
    """Write every spooled run meant for ``store`` (every one, with ``any_store``) to it,
    oldest first, removing each file once its run is stored. A file that cannot be read
    as a run, or whose run the store cannot take, is set aside (:func:`set_aside`) and the
    sync goes on; any other store error stops it (the files stay for the next try). Only
    the files this process claimed are counted."""
    label = store_label(store)
    written: list[tuple[Path, int]] = []
    other: list[tuple[Path, str]] = []
    damaged: list[tuple[Path, str]] = []
    _orphans(directory)
    for path in pending(directory):
        claimed = _claim(path)
        if claimed is None:
            continue  # another sync has it
        try:
            run = load(claimed, name=path)
        except SpoolError as exc:
            damaged.append((path, f"{exc}; {set_aside(claimed, name=path)}"))
            continue
        if not any_store and not same_store(run.store, label):
            _release(claimed, path)
            other.append((path, run.store))
            continue
        try:
            run_id = run.save(store)
        except UnstorableRun as exc:
            why = f"{path}: the store cannot take this run: {redact_url(str(exc), store)}"
            damaged.append((path, f"{why}; {set_aside(claimed, name=path)}"))
            continue
        except StoreError as exc:
            _release(claimed, path)
            return SyncResult(written, other, damaged, redact_url(str(exc), store))
        except BaseException:
            _release(claimed, path)
            raise
        claimed.unlink(missing_ok=True)
        written.append((path, run_id))
    return SyncResult(written, other, damaged)


def _release(claimed: Path, path: Path) -> None:
    """Give a claimed file its spool name back (left for another store or another try)."""
    with contextlib.suppress(OSError):
        os.rename(claimed, path)
