"""``ortperf.throughput``: calls per second under concurrency, measured by
:mod:`pytest_ortperf.measuring.throughput`, recorded with its budgets judged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_ortperf.measuring.calls import Call, hide_rejected
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.recorder.budgets import budgets_of, judged, values_needed
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.targets import Feeds, calls

if TYPE_CHECKING:
    from pytest_ortperf.results import ThroughputResult


def throughput(
    ctx: Context,
    target: OrtSession,
    feeds: Feeds,
    *,
    concurrency: Sequence[int],
    sessions: str,
    api: str | None,
    name: str | None,
    seconds: float | None,
    rounds: int,
    slo: Any,
) -> ThroughputResult:
    """See :meth:`pytest_ortperf.recorder.Recorder.throughput`."""
    __tracebackhide__ = hide_rejected
    from pytest_ortperf.measuring.throughput import (
        check_levels,
        level_figures,
        measure_levels,
        thread_counts,
        usable_cores,
    )
    from pytest_ortperf.results import ThroughputResult

    if not isinstance(target, OrtSession):
        raise TypeError(f"throughput needs a session from ort_session, got {type(target).__name__}")
    if sessions not in ("shared", "per_thread"):
        raise ValueError(f"sessions={sessions!r} is not one of 'shared', 'per_thread'")
    budget = seconds if seconds is not None else ctx.engine_config(target).budget_s
    levels = check_levels(concurrency, budget, rounds)
    budgets = budgets_of(ctx, "throughput", slo, [f"{n} threads" for n in levels])
    rounds = max(rounds, values_needed(ctx, budgets))
    call, _, api, session = calls(target, feeds, api)
    name = name or f"throughput {session.label}"
    ctx.recording.claim(name, gated=False)
    pool = [session]

    def calls_for(n: int) -> list[Call]:
        if sessions == "shared":
            return [call] + [calls(session, feeds, api)[0] for _ in range(n - 1)]
        while len(pool) < n:
            pool.append(session.derive())
        return [call] + [calls(s, feeds, api)[0] for s in pool[1:n]]

    if not ctx.measured:  # smoke: every level runs briefly, nothing is recorded
        budget, rounds = 0.001, 1
    runs = measure_levels(calls_for, levels, seconds=budget, rounds=rounds)
    intra, inter = thread_counts(session.settings)
    result = ThroughputResult(
        test=ctx.test,
        name=name,
        api=api,
        levels=level_figures(runs, f"throughput {name!r}"),
        sessions=sessions,
        intra_op_threads=intra,
        inter_op_threads=inter,
        spinning=session.settings.spinning,
        cores=usable_cores(),
        measured=ctx.measured,
        session=session.info(),
    )
    rates = {f"{x.concurrency} threads": x.rates for x in result.levels}
    result = judged(ctx, result, budgets, rates, "windows")
    ctx.recording.record(result)
    return result
