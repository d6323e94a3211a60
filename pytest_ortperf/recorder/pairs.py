"""Two local sessions measured interleaved, as one :class:`~pytest_ortperf.results.Comparison`:
the session pair every compare and every side-by-side latency is made of."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_ortperf.measuring.engine import Call, StopRule, TimingEngine, smoke
from pytest_ortperf.measuring.records import comparison
from pytest_ortperf.measuring.session import OrtSession, watches_cpu
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.targets import warmed
from pytest_ortperf.recorder.unsettled import warn_unsettled
from pytest_ortperf.results import Comparison, OutputDiff


def measure_pair(
    ctx: Context,
    reference: OrtSession,
    candidate: OrtSession,
    timed: Sequence[Call],
    *,
    api: str,
    label: str,
    engine: TimingEngine,
    stop: StopRule | None,
    confidence: float,
    structure: bool,
    diffs: tuple[OutputDiff, ...] = (),
) -> Comparison:
    """``reference`` and ``candidate`` through their calls ``timed``, interleaved (a smoke
    run: each called once), as the comparison ``label`` (``structure``: the arms' records
    with their sessions' op histograms)."""
    if ctx.measured:
        ref_s, cand_s = warmed(engine, reference, candidate).interleave(
            list(timed), should_stop=stop, watch_cpu=watches_cpu(reference, candidate)
        )
        warn_unsettled(label, ref_s, cand_s)
    else:
        ref_s, cand_s = smoke(timed[0], engine.clock), smoke(timed[1], engine.clock)
    return comparison(
        ctx.result(f"{label}:reference", api, ref_s, reference, structure),
        ctx.result(f"{label}:candidate", api, cand_s, candidate, structure),
        label, confidence, diffs,
    )  # fmt: skip
