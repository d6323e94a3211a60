"""``ortperf.latency`` and ``ortperf.compare`` of local sessions: measured, gated against
the baseline (or taken as one), recorded."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pytest_ortperf.gating.beside import fallback_verdicts
from pytest_ortperf.gating.gate import Decision
from pytest_ortperf.measuring.calls import hide_rejected
from pytest_ortperf.measuring.engine import StopRule, TimingEngine, smoke
from pytest_ortperf.measuring.outputs import verify_outputs
from pytest_ortperf.measuring.session import OrtSession, watches_cpu
from pytest_ortperf.recorder.beside import (
    applies,
    candidate_beside,
    judged_beside,
    kept,
    unbound,
)
from pytest_ortperf.recorder.budgets import budgets_of, judged, latency_blocks
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.deciding import Measure, decide, judge_ab
from pytest_ortperf.recorder.pairs import measure_pair
from pytest_ortperf.recorder.targets import (
    CONTROL_NAME,
    Feeds,
    Target,
    calls,
    control_workload,
    warmed,
)
from pytest_ortperf.recorder.unsettled import warn_unsettled
from pytest_ortperf.results import OP_SHARES, Comparison, LatencyResult, OutputDiff


def latency(
    ctx: Context,
    target: Target,
    feeds: Feeds | None,
    *,
    api: str | None,
    name: str | None,
    slo: Any,
) -> LatencyResult:
    """See :meth:`pytest_ortperf.recorder.Recorder.latency`."""
    __tracebackhide__ = hide_rejected
    budgets = budgets_of(ctx, "latency", slo)
    call, _, api, session = calls(target, feeds, api)
    name = name or session.label
    entry = ctx.entry(name)
    normalized = ctx.measured and ctx.latency_mode == "normalized"

    def measure(engine: TimingEngine, stop: StopRule | None, fresh: bool) -> LatencyResult:
        timed, timed_session = call, session
        if fresh and isinstance(target, OrtSession):
            timed_session = target.derive()
            timed = calls(timed_session, feeds, api)[0]
        watch = watches_cpu(timed_session)
        control: LatencyResult | None = None
        if not ctx.measured:
            samples = smoke(timed, engine.clock)
        elif normalized:
            settings = timed_session.settings
            control_call, control_session = control_workload(settings.threads, settings.spinning)
            samples = warmed(engine, timed_session).measure(
                timed, watch_cpu=watch, control=control_call, should_stop=stop
            )
            if samples.control is not None:
                control = ctx.result(CONTROL_NAME, "iobinding", samples.control, control_session)
        else:
            samples = warmed(engine, timed_session).measure(timed, watch_cpu=watch)
        warn_unsettled(name, samples)
        return dataclasses.replace(ctx.result(name, api, samples, timed_session), control=control)

    decision, extra = _decided(ctx, target, feeds, api, name, entry, measure)
    blocks = latency_blocks(ctx, decision.record, budgets, call, session)
    result = judged(ctx, decision.record, budgets, {"median": blocks})
    # A latency run once, not measured (--ortperf-skip-unchanged), keys no baseline entry.
    gated = result.measured or not ctx.measured
    ctx.recording.record(result, gated=gated, verdicts=decision.verdicts, extra=extra)
    ctx.enforce(name, decision)
    return result


def _decided(
    ctx: Context,
    target: Target,
    feeds: Feeds | None,
    api: str,
    name: str,
    entry: Mapping[str, Any] | None,
    measure: Measure[LatencyResult],
) -> tuple[Decision[LatencyResult], dict[str, Any]]:
    """A latency's decision and its payload's extra fields: judged beside the baseline's
    model where its entry has a recipe (:mod:`pytest_ortperf.recorder.beside`), else as
    :func:`~pytest_ortperf.recorder.deciding.decide` does; an update keeps the recipe."""
    if not applies(ctx, target):
        decision = decide(ctx, measure, entry)
        return decision, decision.extra
    session, feeds = unbound(target, feeds)
    if ctx.gate is not None:
        found = judged_beside(ctx, session, feeds, api, name, entry, measure)
        if found is not None:
            return found.decision, found.extra
        decision = decide(ctx, measure, entry)
        return decision, decision.extra
    decision = decide(ctx, measure, entry)
    if ctx.baseline_runs <= 1:  # not a baseline: nothing to keep
        return decision, decision.extra
    return decision, {**decision.extra, **kept(ctx, session, feeds, api, name)}


def check_max_slowdown(max_slowdown: float | None) -> None:
    """A ``max_slowdown`` that is a fraction such as 0.05, or None."""
    if max_slowdown is not None and not (
        isinstance(max_slowdown, int | float) and 0 <= max_slowdown <= 10
    ):
        raise ValueError(f"max_slowdown must be a fraction such as 0.05 (5%), got {max_slowdown!r}")


def compare(
    ctx: Context,
    reference: OrtSession,
    candidate: OrtSession,
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
    """See :meth:`pytest_ortperf.recorder.Recorder.compare` (local sessions)."""
    __tracebackhide__ = hide_rejected
    label = name or f"{candidate.label} vs {reference.label}"
    ref_call, ref_outputs, api, _ = calls(reference, feeds, api)
    cand_call, cand_outputs, _, _ = calls(candidate, feeds, api)
    diffs: list[OutputDiff] = []
    if check_outputs:
        diffs = verify_outputs(
            reference.output_names,
            ref_outputs(),
            cand_outputs(),
            atol=atol,
            rtol=rtol,
            what=f"compare {label!r}",
        )
    entry = ctx.entry(label)

    def measure(engine: TimingEngine, stop: StopRule | None, fresh: bool) -> Comparison:
        ref, cand, timed = reference, candidate, (ref_call, cand_call)
        if fresh:
            ref, cand = reference.derive(), candidate.derive()
            timed = (calls(ref, feeds, api)[0], calls(cand, feeds, api)[0])
        return measure_pair(
            ctx, ref, cand, timed, api=api, label=label, engine=engine, stop=stop,
            confidence=confidence, structure=ctx.measured, diffs=tuple(diffs),
        )  # fmt: skip

    decision = judge_ab(ctx, decide(ctx, measure, entry), max_slowdown)
    arms = {"reference": reference, "candidate": candidate}
    extra = dict(decision.extra)
    if applies(ctx, candidate):
        decision, kept_fields = _candidate_beside(ctx, decision, candidate, feeds, api, entry)
        extra.update(kept_fields)
    if ctx.measured and ctx.profile_arms:
        from pytest_ortperf.profiling.attribution import op_shares

        extra[OP_SHARES] = {role: op_shares(s, feeds) for role, s in arms.items()}
    ctx.recording.record(decision.record, gated=True, verdicts=decision.verdicts, extra=extra)

    def attribute() -> list[str]:
        from pytest_ortperf.profiling.attribution import attribution

        return attribution(arms, feeds, (entry or {}).get(OP_SHARES))

    ctx.enforce(label, decision, attribute)
    return decision.record


def _candidate_beside(
    ctx: Context,
    decision: Decision[Comparison],
    candidate: OrtSession,
    feeds: Feeds,
    api: str,
    entry: Mapping[str, Any] | None,
) -> tuple[Decision[Comparison], dict[str, Any]]:
    """A compare's candidate beside the baseline's candidate: taking a baseline, what its
    entry keeps (the candidate's recipe, its A/A ratio baseline); checking, the decision
    with a verdict of the candidate against the baseline's, where it changed since: from a
    first measurement only where the compare, or the test, fails already (the test's
    outcome is settled; the candidate's figure says whether it, or the reference, moved)."""
    name = decision.record.name
    if ctx.gate is None:
        return decision, (kept(ctx, candidate, feeds, api, name) if ctx.baseline_runs > 1 else {})
    failing = dict.fromkeys(v.metric for v in ctx.gate.failing(decision.verdicts))
    brief = f"the compare already fails on its {', '.join(failing)}" if failing else ""
    brief = brief or ctx.fails_already
    added, reason = candidate_beside(ctx, candidate, feeds, api, name, entry, brief=brief)
    verdicts = list(decision.verdicts)
    if reason:
        verdicts = fallback_verdicts(verdicts, reason, whose="candidate")
    return dataclasses.replace(decision, verdicts=[*verdicts, *added]), {}
