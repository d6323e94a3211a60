"""Latency budgets (``slo=``) of a measurement: checked before it runs, judged after
(:mod:`pytest_ortperf.gating.slo` decides; here the measurement is sized and recorded)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from pytest_ortperf.measuring.session import watches_cpu
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.targets import warmed
from pytest_ortperf.results import LatencyResult

if TYPE_CHECKING:
    from pytest_ortperf.gating.slo import MachineBudgets
    from pytest_ortperf.measuring.calls import Call
    from pytest_ortperf.measuring.percall import PerCallConfig, PerCallSamples
    from pytest_ortperf.measuring.session import OrtSession
    from pytest_ortperf.results import ColdStartResult, PerCallResult, SloVerdict, ThroughputResult

R2 = TypeVar("R2", "LatencyResult", "PerCallResult", "ThroughputResult", "ColdStartResult")
"""A record that takes latency budgets (``slo=``)."""

Budgets = tuple["MachineBudgets", ...]


def budgets_of(
    ctx: Context, kind: str, slo: Any, figures: Sequence[str] | None = None
) -> Budgets | None:
    """The latency budgets of one measurement, checked before it runs (against the
    ``figures`` it takes, where given): a bad one fails the test with its message."""
    from pytest_ortperf.gating.slo import SloError, budgets_for, check_figures

    try:
        budgets = budgets_for(kind, slo, ctx.marker_slo, ctx.test)
        if budgets and figures is not None:
            check_figures(budgets, figures, kind, ctx.test)
    except SloError as exc:
        message = str(exc)
    else:
        return budgets
    pytest.fail(message, pytrace=False)


def values_needed(ctx: Context, budgets: Sequence[MachineBudgets] | None) -> int:
    """The values (blocks, launches, windows) that can decide ``budgets``; 0 for none, or
    in smoke mode."""
    if not budgets or not ctx.measured:
        return 0
    from pytest_ortperf.gating.slo import min_values

    return min_values(budgets, ctx.alpha)


def judged(
    ctx: Context,
    result: R2,
    budgets: Sequence[MachineBudgets] | None,
    values_of: Mapping[str, Sequence[float]],
    unit: str = "blocks",
    verdicts: tuple[SloVerdict, ...] | None = None,
) -> R2:
    """``result`` with its budgets judged on ``values_of`` (or ``verdicts`` already
    judged) for this machine's class; a violated one fails the test when gated."""
    if not budgets or not ctx.measured:
        return result
    from pytest_ortperf.gating.slo import judge_all
    from pytest_ortperf.state import machine_facts

    if verdicts is None:
        env = machine_facts()
        verdicts = judge_all(
            budgets, values_of, ctx.alpha, unit=unit,
            cpu_model=env.get("cpu_model"), cpus=env.get("effective_cpus"),
        )  # fmt: skip
    if ctx.gate is not None:
        ctx.recording.budgets_failed(result.name, verdicts, strict=ctx.strict)
    return dataclasses.replace(result, slo=verdicts)  # type: ignore[type-var]


def latency_blocks(
    ctx: Context,
    result: LatencyResult,
    budgets: Sequence[MachineBudgets] | None,
    call: Call,
    session: OrtSession,
) -> Sequence[float]:
    """The blocks a latency's budget is judged on: the result's, and when they are too
    few to decide it, one more measurement's (a gate may stop after a few blocks)."""
    if len(result.samples) >= values_needed(ctx, budgets):
        return result.samples
    more = warmed(ctx.engine, session).measure(call, watch_cpu=watches_cpu(session))
    return (*result.samples, *more.values)


def per_call_judged(
    ctx: Context,
    result: PerCallResult,
    first: PerCallSamples,
    budgets: Sequence[MachineBudgets],
    call: Call | None,
    config: PerCallConfig,
    watch: bool,
) -> PerCallResult:
    """``result`` judged against its budgets, measured on (more single calls of
    ``call``, none when None) while one is undecided."""
    from pytest_ortperf.gating.slo import judge_per_call
    from pytest_ortperf.measuring.percall import measure_per_call
    from pytest_ortperf.state import machine_facts

    def more(m: int) -> PerCallSamples | None:
        if call is None:
            return None
        sized = dataclasses.replace(config, min_calls=max(m, 2), max_calls=max(m, 2))
        return measure_per_call([call], config=sized, watch_cpu=watch)[0]

    env = machine_facts()
    result, verdicts = judge_per_call(
        result, first, budgets, ctx.alpha, more,
        cpu_model=env.get("cpu_model"), cpus=env.get("effective_cpus"),
    )  # fmt: skip
    return judged(ctx, result, budgets, {}, verdicts=verdicts)
