"""Run a session with ORT's profiler on, and measure a process's peak memory.

Profiling always happens on a session of its own, derived from the measured one: profiled
runs are slower and must never be mixed into latency samples. The profile file is written in
a private temporary directory that is removed before returning, even on failure.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf.profiling.parse import Profile, read_profile

if TYPE_CHECKING:
    from pytest_ortperf.ort_session import ModelLike, OrtSession

__all__ = ["MemoryResult", "peak_memory", "profile_session"]


def profile_session(
    session: OrtSession | ModelLike,
    feeds: Mapping[str, Any],
    *,
    runs: int = 10,
    warmup: int = 3,
) -> Profile:
    """Profile ``runs`` calls of a session (after ``warmup`` calls left out of the profile).

    ``session`` is an :class:`~pytest_ortperf.session.OrtSession` (its settings are reused on
    a new, profiling session) or a model (path, bytes, ``onnx.ModelProto``) run with default
    settings.
    """
    from pytest_ortperf.ort_session import OrtSession

    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0, got runs={runs}, warmup={warmup}")
    base = session if isinstance(session, OrtSession) else OrtSession.create(session)
    inputs = dict(feeds)
    with tempfile.TemporaryDirectory(prefix="ortperf-profile-") as tmp:
        # A unique prefix inside a private directory: ORT names files by the second only.
        prefix = os.path.join(tmp, "ort")
        profiling = base.derive(options={"enable_profiling": True, "profile_file_prefix": prefix})
        try:
            for _ in range(warmup + runs):
                profiling.sess.run(None, inputs)
        finally:
            # end_profiling() writes the file now; without it the session would write one
            # when destroyed, possibly after the directory is gone.
            written = profiling.sess.end_profiling()
            del profiling
        path = Path(written) if written else None
        if path is None or not path.is_file():
            found = sorted(Path(tmp).glob("*.json"))
            if not found:
                raise RuntimeError(f"onnxruntime wrote no profile file under {tmp}")
            path = found[-1]
        profile = read_profile(path, keep_events=True)
    # Keep the profile independent of the deleted file.
    profile.source = None
    if profile.n_runs != warmup + runs:
        raise RuntimeError(
            f"expected {warmup + runs} model_run events in the profile, found {profile.n_runs}"
        )
    return profile.select_runs(warmup)


@dataclass(frozen=True)
class MemoryResult:
    """Peak resident memory (RSS) of this process while calling a function.

    ``peak_bytes[i]`` is the highest RSS reached during call ``i``, ``baseline_bytes`` the RSS
    before the first call. This is process-wide memory: it includes Python, other threads and
    every allocator; memory ORT keeps in its arena after the first call is not freed, so later
    calls usually show no growth. ``method`` is ``"vmhwm"`` (kernel high-water mark, exact) or
    ``"sampling"`` (VmRSS polled by a thread every ``interval`` seconds: short peaks can be
    missed). ``arena`` holds ORT's own allocator figures from a profile's ``mem_*`` keys
    (ORT >= 1.32), e.g. ``in_use_peak_max``, when a profile was given.
    """

    peak_bytes: tuple[int, ...]
    baseline_bytes: int
    method: str
    arena: dict[str, int] = field(default_factory=dict)

    @property
    def max_peak_bytes(self) -> int:
        return max(self.peak_bytes) if self.peak_bytes else self.baseline_bytes

    @property
    def growth_bytes(self) -> tuple[int, ...]:
        """Peak above the baseline, per call."""
        return tuple(max(0, p - self.baseline_bytes) for p in self.peak_bytes)


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
