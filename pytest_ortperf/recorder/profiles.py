"""``ortperf.profile`` and ``ortperf.memory``: what ORT's profiler and the kernel tell of
a target, outside its timed runs."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pytest_ortperf.measuring.calls import OrtBinding
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.deciding import record_judged
from pytest_ortperf.recorder.targets import Feeds, Target, calls
from pytest_ortperf.results import PROFILE_PROPERTY, MemoryResult

if TYPE_CHECKING:
    from pytest_ortperf.profiling.parse import Profile


def profile(
    ctx: Context, target: Target, feeds: Feeds | None, *, name: str | None, runs: int, warmup: int
) -> Profile:
    """See :meth:`pytest_ortperf.recorder.Recorder.profile`."""
    from pytest_ortperf.profiling.run import profile_session

    session = target.session if isinstance(target, OrtBinding) else target
    if feeds is None:
        if not isinstance(target, OrtBinding):
            raise ValueError(f"feeds are required to profile session {session.label!r}")
        feeds = target.feeds
    measured = ctx.measured
    result = profile_session(
        session, feeds, runs=runs if measured else 1, warmup=warmup if measured else 0
    )
    if measured:
        columns = ["op_type", "total_us", "count_per_run", "share"]
        summary = [
            {"op_type": str(op), "total_us": total, "count": count, "share": share}
            for op, total, count, share in result.by_op()[columns].to_numpy().tolist()
        ]
        ctx.recording.attach(
            PROFILE_PROPERTY, {"test": ctx.test, "name": name or session.label, "by_op": summary}
        )
    return result


def memory(
    ctx: Context,
    target: Target,
    feeds: Feeds | None,
    *,
    api: str | None,
    name: str | None,
    runs: int,
    arena: bool,
) -> MemoryResult:
    """See :meth:`pytest_ortperf.recorder.Recorder.memory`."""
    from pytest_ortperf.profiling.memory import peak_memory

    call, _, api, session = calls(target, feeds, api)
    name = name or f"{session.label}:memory"
    entry = ctx.entry(name)
    arena_profile = None
    if arena and ctx.measured:
        from pytest_ortperf.profiling.run import profile_session

        profiled = feeds if feeds is not None else getattr(target, "feeds", None)
        if profiled is not None:
            arena_profile = profile_session(session, profiled, runs=2, warmup=1)
    result = dataclasses.replace(
        peak_memory(call, runs=runs if ctx.measured else 1, profile=arena_profile),
        test=ctx.test,
        name=name,
        api=api,
        measured=ctx.measured,
    )
    record_judged(ctx, result, entry, name)
    return result
