"""Scratch space that a killed run cannot leave behind for good.

Every temporary directory of a run (remote sessions' model copies, feeds sent to workers,
cold-start launches) lives in one directory per process, ``run-<pid>-<start>`` under one
root (:func:`root`: ``$ORTPERF_SCRATCH``, else ``ortperf-scratch-<uid>`` in the system's
temporary directory). The process removes its own at exit; a process killed by SIGKILL or
SIGTERM cannot, so the next run that asks for scratch space removes every run directory
whose owner is gone (no process with that PID, or one that started at another time: a
reused PID). Nothing else is ever removed from the root.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

SCRATCH_ENV_VAR = "ORTPERF_SCRATCH"
"""Environment variable naming the root of the runs' scratch directories."""

_PREFIX = "run-"
_LOCK = threading.Lock()
_MINE: dict[int, Path] = {}
"""This process's run directory, by PID (a forked child makes its own)."""


def root() -> Path:
    """The root of every run's scratch directory (see the module's docstring)."""
    given = os.environ.get(SCRATCH_ENV_VAR)
    if given:
        return Path(given).expanduser()
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"ortperf-scratch-{uid}"


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from ``/proc``); None
    where there is no such process, ``"?"`` where it lives but the platform cannot say."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
    except OSError:
        pass
    else:
        fields = text.rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else fields[19]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass
    return "?"


def _owner_alive(name: str) -> bool:
    """Whether the run directory ``name`` (``run-<pid>-<start>``) has a live owner."""
    try:
        pid_text, start = name[len(_PREFIX) :].split("-", 1)
        pid = int(pid_text)
    except ValueError:
        return True  # not ours to judge: leave it
    now = _start_time(pid)
    return now is not None and (now == "?" or start in ("?", now))


def _check_root(path: Path) -> None:
    """The root is a directory of this user, not writable by others (a shared /tmp)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(f"scratch root {path} is not a directory (set ${SCRATCH_ENV_VAR})")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise OSError(f"scratch root {path} belongs to another user (set ${SCRATCH_ENV_VAR})")


def reap(base: Path | None = None) -> list[Path]:
    """Remove the run directories under ``base`` (default :func:`root`) whose owner is
    gone; the directories removed."""
    base = root() if base is None else base
    removed = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.name.startswith(_PREFIX) and not _owner_alive(entry.name):
            shutil.rmtree(entry, ignore_errors=True)
            if not entry.exists():
                removed.append(entry)
    return removed


def run_dir() -> Path:
    """This process's run directory, made (after reaping the dead runs' ones) on first
    use and removed at exit."""
    pid = os.getpid()
    with _LOCK:
        mine = _MINE.get(pid)
        if mine is not None and mine.is_dir():
            return mine
        base = root()
        _check_root(base)
        reap(base)
        mine = base / f"{_PREFIX}{pid}-{_start_time(pid) or '?'}"
        mine.mkdir(mode=0o700, exist_ok=True)
        _MINE[pid] = mine
        return mine


def mkdtemp(prefix: str) -> Path:
    """A new temporary directory in this run's directory (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=run_dir()))


@atexit.register
def _remove_mine() -> None:
    mine = _MINE.get(os.getpid())
    if mine is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(mine, ignore_errors=True)
