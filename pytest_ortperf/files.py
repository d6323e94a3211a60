"""Atomic file writes: a reader never sees half a file, a failure leaves the old one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory, fsync and a
    rename, creating missing directories. ``mode`` defaults to the usual file mode
    (0o666 less the umask); on any failure the temp file is removed and ``path`` is as
    it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600
        os.chmod(tmp, 0o666 & ~_umask() if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (created with its directories when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
