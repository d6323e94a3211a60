"""Peak memory of this process while a function runs (Linux: the kernel's high-water mark,
reset before each call where permitted, else a sampling thread)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf.results import MemoryResult

if TYPE_CHECKING:
    from pytest_ortperf.profiling.parse import Profile

__all__ = ["MemoryResult", "peak_memory"]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(key: str) -> int | None:
    try:
        text = _STATUS.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where not permitted."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _can_use_hwm() -> bool:
    if not sys.platform.startswith("linux") or _status_kib("VmHWM") is None:
        return False
    return _reset_hwm()


def peak_memory(
    fn: Callable[[], Any],
    runs: int = 5,
    *,
    profile: Profile | None = None,
    interval: float = 0.001,
) -> MemoryResult:
    """Peak RSS of the process during each of ``runs`` calls of ``fn`` (Linux only)."""
    if _status_kib("VmRSS") is None:
        raise RuntimeError("peak_memory needs /proc/self/status (Linux)")
    arena = profile.memory() if profile is not None else {}
    baseline = (_status_kib("VmRSS") or 0) * 1024
    peaks: list[int] = []
    if _can_use_hwm():
        for _ in range(runs):
            _reset_hwm()
            fn()
            peaks.append((_status_kib("VmHWM") or 0) * 1024)
        return MemoryResult(tuple(peaks), baseline, "vmhwm", arena)
    for _ in range(runs):
        peaks.append(_sampled_peak(fn, interval))
    return MemoryResult(tuple(peaks), baseline, "sampling", arena)


def _sampled_peak(fn: Callable[[], Any], interval: float) -> int:
    peak = (_status_kib("VmRSS") or 0) * 1024
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, (_status_kib("VmRSS") or 0) * 1024)
            time.sleep(interval)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        fn()
    finally:
        done.set()
        thread.join()
    return max(peak, (_status_kib("VmRSS") or 0) * 1024)
