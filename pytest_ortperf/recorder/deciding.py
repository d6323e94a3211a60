"""How a gated measurement is taken and judged: once, as a baseline's several runs, or
through the gate; a comparison judged on itself (``max_slowdown``); and a record judged
against its baseline entry once measured (:func:`record_judged`)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pytest_ortperf.gating.gate import (
    BlindBaselineWarning,
    Decision,
    blind_baseline_message,
    detects_of,
)
from pytest_ortperf.measuring.engine import StopRule, TimingEngine
from pytest_ortperf.measuring.records import merge_runs
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.results import Comparison, LatencyResult, Record

R = TypeVar("R", LatencyResult, Comparison)

Measure = Callable[[TimingEngine, StopRule | None, bool], R]
"""One measurement: ``(engine, stop rule, on fresh sessions)`` -> its record."""


def decide(ctx: Context, measure: Measure[R], entry: Mapping[str, Any] | None) -> Decision[R]:
    """Measure as the run asks: once, or as several runs on fresh sessions when taking a
    baseline (more when they could not see a slowdown of the threshold), or through
    the gate (session pairs, extension, and a confirmation of what would fail; a first
    measurement only where the test fails already: its outcome is settled)."""
    if ctx.gate is not None:
        return ctx.gate.decide(measure, ctx.engine, entry, merge_runs, brief=ctx.fails_already)
    k = ctx.baseline_runs if ctx.measured else 1
    if k <= 1:
        return Decision(measure(ctx.engine, None, False), [])
    engine = ctx.engine.scaled(1.0 / k)
    parts = [measure(engine, None, i > 0) for i in range(k)]
    record = merge_runs(parts)
    settings = ctx.baseline_settings
    detects = detects_of(record, settings.alpha)
    if detects is not None and detects > settings.threshold:
        # Too noisy to see the threshold: measure as many runs again, pooled with these.
        parts += [measure(engine, None, True) for _ in range(k)]
        record = merge_runs(parts)
        detects = detects_of(record, settings.alpha)
    if detects is not None and detects > settings.threshold:
        message = blind_baseline_message(record.name, detects, settings.threshold, len(parts))
        warnings.warn(BlindBaselineWarning(message), stacklevel=4)
        if ctx.fail_blind:
            ctx.recording.blind_baseline(message)
    return Decision(record, [], detects=detects)


def judge_ab(
    ctx: Context, decision: Decision[Comparison], max_slowdown: float | None
) -> Decision[Comparison]:
    """With ``max_slowdown``, the decision with the verdict of the comparison judged on
    itself, without baseline (:func:`pytest_ortperf.gating.ab.judge_ab`); its
    regression fails the test (also where no gate runs: ``--ortperf-update``)."""
    if max_slowdown is None or not ctx.measured:
        return decision
    from pytest_ortperf.gating.ab import judge_ab as judge_pairs

    verdict = judge_pairs(
        decision.record.block_ratios, threshold=max_slowdown, alpha=ctx.alpha,
        a="reference", b="candidate",
    )  # fmt: skip
    decision = dataclasses.replace(decision, verdicts=[*decision.verdicts, verdict])
    if ctx.gate is None and verdict.failed(ctx.strict):
        ctx.recording.gate_failed(decision.record.name, [verdict], decision.verdicts)
    return decision


def record_judged(ctx: Context, record: Record, entry: Mapping[str, Any] | None, name: str) -> None:
    """Record ``record`` with the gate's verdicts against its baseline ``entry``; a failing
    one fails the test once its body has run."""
    verdicts = ctx.judge(record, entry)
    ctx.recording.record(record, gated=True, verdicts=verdicts)
    if verdicts:
        ctx.enforce(name, Decision(record, verdicts))
