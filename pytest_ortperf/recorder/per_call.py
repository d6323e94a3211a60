"""``ortperf.per_call``: single calls timed one by one (their tails), judged by the tail
rule against a reference and by their budgets."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pytest_ortperf.measuring.calls import hide_rejected
from pytest_ortperf.measuring.session import watches_cpu
from pytest_ortperf.recorder.budgets import budgets_of, per_call_judged
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.targets import Feeds, Target, calls
from pytest_ortperf.results import Verdict

if TYPE_CHECKING:
    from pytest_ortperf.measuring.percall import PerCallSamples
    from pytest_ortperf.measuring.session import OrtSession
    from pytest_ortperf.results import PerCallResult


def per_call(
    ctx: Context,
    target: Target,
    feeds: Feeds | None,
    *,
    api: str | None,
    name: str | None,
    reference: Target | None,
    q: float,
    threshold: float,
    min_calls: int,
    max_calls: int,
    slo: Any,
) -> PerCallResult:
    """See :meth:`pytest_ortperf.recorder.Recorder.per_call`."""
    __tracebackhide__ = hide_rejected
    from pytest_ortperf.measuring.percall import PerCallConfig, measure_per_call, smoke_per_call

    # Every argument is checked before anything is measured, in smoke mode too.
    alpha = ctx.alpha
    sizing = checked_sizing(q, threshold, alpha, min_calls, max_calls, reference is not None)
    budgets = budgets_of(ctx, "per_call", slo)
    call, _, api, session = calls(target, feeds, api)
    arms = [(call, session)]
    if reference is not None:
        ref_call, _, _, ref_session = calls(reference, feeds, api)
        arms.insert(0, (ref_call, ref_session))
    label = session.label if reference is None else f"{session.label} vs {arms[0][1].label}"
    name = name or f"per-call {label}"
    ctx.recording.claim(name, gated=False)
    sessions = [s for _, s in arms]
    if ctx.measured:
        config = PerCallConfig.from_engine(ctx.engine_config(*sessions), **sizing)
        samples = measure_per_call(
            [c for c, _ in arms], config=config, watch_cpu=watches_cpu(*sessions)
        )
    else:
        samples = [smoke_per_call(c) for c, _ in arms]
    results = [
        _record(ctx, name if i == len(arms) - 1 else f"{name}:reference", api, s, sess)
        for i, (s, (_, sess)) in enumerate(zip(samples, arms, strict=True))
    ]
    result = results[-1]
    if budgets and ctx.measured:
        more = call if reference is None else None  # with a reference: no more calls
        watch = watches_cpu(session)
        result = per_call_judged(ctx, result, samples[-1], budgets, more, config, watch)
    verdicts: list[Verdict] = []
    if reference is not None:
        result = dataclasses.replace(result, reference=results[0])
        if ctx.measured:
            from pytest_ortperf.gating.tails import judge_tail

            verdicts.append(
                judge_tail(
                    results[0].rounds(), result.rounds(), q, threshold=threshold, alpha=alpha
                )
            )
    ctx.recording.record(result, verdicts=verdicts)
    if ctx.gate is not None and verdicts:
        failing = ctx.gate.failing(verdicts)
        if failing:
            ctx.recording.tail_failed(name, failing)
    return result


def checked_sizing(
    q: float, threshold: float, alpha: float, min_calls: int, max_calls: int, paired: bool
) -> dict[str, Any]:
    """The sizing of a per-call measurement (``PerCallConfig`` fields), every argument
    checked first; ``paired`` (a reference, judged by the tail rule): at least the calls
    that leave 10 beyond ``q`` in 10 rounds, a ``max_calls`` below that refused."""
    from pytest_ortperf.gating.tails import MIN_ROUNDS, calls_for, check_tail, quantile_label
    from pytest_ortperf.measuring.percall import MAX_CALLS, PerCallConfig, PerCallError

    check_tail(q, threshold, alpha)
    sizing: dict[str, Any] = {"min_calls": min_calls, "max_calls": max_calls}
    PerCallConfig(**sizing)
    if paired:
        need = calls_for(q)
        if max_calls < need:
            raise PerCallError(
                f"a {quantile_label(q)} verdict needs {need:,} calls per arm, more than "
                f"max_calls={max_calls:,}: raise max_calls (at most {MAX_CALLS:,}) or "
                "lower q"
            )
        sizing.update(min_calls=max(min_calls, need), min_rounds=MIN_ROUNDS, sized=True)
    return sizing


def _record(
    ctx: Context, name: str, api: str, samples: PerCallSamples, session: OrtSession
) -> PerCallResult:
    from pytest_ortperf.results import PerCallResult

    return PerCallResult(
        test=ctx.test,
        name=name,
        api=api,
        calls=tuple(x * 1e-9 for x in samples.calls_ns),
        timer_cost=samples.timer_ns * 1e-9,
        calls_per_round=samples.calls_per_round,
        blocks=samples.blocks,
        calls_per_block=samples.calls_per_block,
        measured=ctx.measured,
        session=session.info(),
        preempted=samples.preempted,
        preempted_kept=samples.preempted_kept,
        watched=samples.watched,
    )
