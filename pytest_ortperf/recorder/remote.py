"""Sessions of ``ort_env`` (remote sessions, measured in worker processes by
:mod:`pytest_ortperf.remote.sessions`): compared, ranked, profiled and recorded as local
ones are. Their outputs are checked and their profiles taken as ``ortperf ab`` does
(:mod:`pytest_ortperf.remote.ab`, :mod:`pytest_ortperf.remote.profiles`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_ortperf.measuring.engine import StopRule, config_of
from pytest_ortperf.measuring.outputs import verify_outputs
from pytest_ortperf.measuring.records import comparison
from pytest_ortperf.measuring.session import watches_cpu
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.deciding import decide, judge_ab
from pytest_ortperf.recorder.ranking import ranking_frame
from pytest_ortperf.recorder.targets import Feeds
from pytest_ortperf.recorder.unsettled import warn_unsettled
from pytest_ortperf.remote.ab import check_outputs_ab
from pytest_ortperf.remote.profiles import profile_lines, profile_runs_for
from pytest_ortperf.results import Comparison, OutputDiff

if TYPE_CHECKING:
    import pandas as pd

    from pytest_ortperf.measuring.engine import EngineConfig
    from pytest_ortperf.remote.sessions import RemoteSession


def measure_ab(
    reference: RemoteSession,
    candidate: RemoteSession,
    feeds: Feeds,
    *,
    config: EngineConfig | None,
    name: str,
    test: str = "",
    api: str = "iobinding",
    measured: bool = True,
    stop: StopRule | None = None,
    confidence: float = 0.95,
    diffs: Sequence[OutputDiff] = (),
) -> Comparison:
    """One interleaved measurement of two remote sessions as a
    :class:`~pytest_ortperf.results.Comparison` (ratio candidate/reference)."""
    from pytest_ortperf.remote.interleave import Arms, arm_result

    ref_s, cand_s = Arms(reference, candidate, feeds, api).measure(config, stop, measured)
    if measured:
        warn_unsettled(name, ref_s, cand_s)
    return comparison(
        arm_result(test, f"{name}:reference", api, ref_s, reference, measured),
        arm_result(test, f"{name}:candidate", api, cand_s, candidate, measured),
        name, confidence, tuple(diffs),
    )  # fmt: skip


def compare(
    ctx: Context,
    reference: object,
    candidate: object,
    feeds: Feeds,
    *,
    name: str | None,
    api: str,
    check_outputs: bool,
    atol: float,
    rtol: float,
    confidence: float,
    max_slowdown: float | None,
) -> Comparison:
    """``ortperf.compare`` of two remote sessions: outputs checked, measured interleaved
    in their workers, recorded and gated as a local comparison is (the baseline's ratio
    and structure; with ``max_slowdown`` also without baseline). Where the gate fails
    it, each arm's profile (taken in its worker) says which op types moved."""
    from pytest_ortperf.remote.interleave import both_remote, start_sessions

    ref, cand = both_remote(reference, candidate)
    label = name or f"{cand.label} vs {ref.label}"
    diffs: list[OutputDiff] = []
    if check_outputs:
        what = f"compare {label!r}"
        diffs = check_outputs_ab(ref, cand, feeds, api=api, atol=atol, rtol=rtol, what=what)
    entry = ctx.entry(label)

    def measure(engine: Any, stop: StopRule | None, fresh: bool) -> Comparison:
        # A baseline's later runs, a check's later pairs: each on a fresh pair of workers
        # (new processes, started side by side).
        pair = (ref, cand)
        if fresh:
            a, b = start_sessions([ref.derive, cand.derive])
            pair = (a, b)
        try:
            return measure_ab(
                *pair, feeds, config=config_of(engine), name=label, test=ctx.test, api=api,
                measured=ctx.measured, stop=stop, confidence=confidence, diffs=diffs,
            )  # fmt: skip
        finally:
            if fresh:
                for session in pair:
                    session.close()

    decision = judge_ab(ctx, decide(ctx, measure, entry), max_slowdown)
    ctx.recording.record(
        decision.record, gated=True, verdicts=decision.verdicts, extra=decision.extra
    )

    def attribute() -> list[str]:
        record = decision.record
        runs = profile_runs_for(max(record.reference.median, record.candidate.median), 20)
        try:
            lines = profile_lines(ref, cand, feeds, runs=runs)
        except Exception as exc:  # attribution must never hide the verdict it explains
            return [f"  (no attribution: profiling failed: {type(exc).__name__}: {exc})"]
        return ["  where the time goes, reference -> candidate (each profiled in its worker):"] + [
            f"    {line}" for line in lines
        ]

    ctx.enforce(label, decision, attribute)
    return decision.record


def rank(
    ctx: Context,
    variants: Mapping[str, object],
    feeds: Feeds,
    *,
    name: str,
    api: str,
    check_outputs: bool,
    atol: float,
    rtol: float,
) -> pd.DataFrame:
    """``ortperf.rank`` of remote sessions (all of them remote): outputs checked against
    the first, blocks interleaved in the workers (each round reversing the last), one row
    per variant sorted by median with its ratio to the fastest."""
    from pytest_ortperf.remote.interleave import arm_result, interleave, shared_feeds
    from pytest_ortperf.remote.interleave import smoke as smoke_remote
    from pytest_ortperf.remote.sessions import RemoteSession

    local = [key for key, s in variants.items() if not isinstance(s, RemoteSession)]
    if local:
        raise TypeError(
            f"rank got local session(s) {local} beside remote ones: make every variant with "
            "ort_env so that all run in workers (ort_env(sys.executable) is this environment)"
        )
    sessions = {key: s for key, s in variants.items() if isinstance(s, RemoteSession)}
    keys = list(sessions)
    arms = [sessions[k] for k in keys]
    with shared_feeds(arms, feeds, api):
        if check_outputs:
            first = arms[0].outputs()
            for key, session in zip(keys[1:], arms[1:], strict=True):
                verify_outputs(
                    session.output_names, first, session.outputs(), atol=atol, rtol=rtol,
                    what=f"rank {name!r}: {key!r} vs {keys[0]!r}",
                )  # fmt: skip
        if ctx.measured:
            all_samples = interleave(arms, config_of(ctx.engine), watch_cpu=watches_cpu(*arms))
            warn_unsettled(name, *all_samples)
        else:
            all_samples = smoke_remote(arms)
    rows = []
    for key, session, samples in zip(keys, arms, all_samples, strict=True):
        result = arm_result(ctx.test, f"{name}:{key}", api, samples, session, False)
        ctx.recording.record(result)
        rows.append({"variant": key, "api": api, **result.summary.to_dict()})
    return ranking_frame(rows, ctx.measured)
