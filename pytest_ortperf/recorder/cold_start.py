"""``ortperf.cold_start`` and ``ortperf.compare_cold_start``: launches in fresh processes
(:mod:`pytest_ortperf.measuring.coldstart`), gated against earlier runs or as comparisons."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ortperf.gating.gate import Decision, Gate
from pytest_ortperf.measuring.calls import hide_rejected
from pytest_ortperf.measuring.records import comparison
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.recorder.budgets import budgets_of, judged, values_needed
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.deciding import record_judged
from pytest_ortperf.recorder.targets import Feeds, session_info
from pytest_ortperf.results import (
    COLD_START_FIGURES,
    ColdStartResult,
    Comparison,
    LatencyResult,
    Verdict,
)
from pytest_ortperf.results.codec import session_dict


def cold_session(model: Any, keywords: Mapping[str, Any]) -> OrtSession:
    """The session a cold start launches (built here too: its label, settings, inputs,
    and a clear error in this process for a model that cannot load at all)."""
    if isinstance(model, OrtSession):
        if keywords:
            raise TypeError(
                f"session keywords {sorted(keywords)} cannot apply to a session from "
                "ort_session: pass the model instead, or build the session with them"
            )
        return model
    return OrtSession.create(model, **keywords)


def new_shape_feeds(
    session: OrtSession, feeds: Feeds, given: Feeds | bool | None
) -> tuple[dict[str, Any] | None, str]:
    """Feeds of the new-shape figure and, where there are none, why."""
    from pytest_ortperf.measuring.coldstart import other_shape_feeds
    from pytest_ortperf.measuring.feeds import check_feed_names, check_value, input_specs

    specs = input_specs(session.sess)
    check_feed_names(session.input_names, feeds, f"model {session.label}")
    for spec in specs:  # dtypes and shapes here, not as a child's traceback
        check_value(spec, feeds[spec.name])
    if given is False:
        return None, "not measured (shape_feeds=False)"
    if given is None or given is True:
        return other_shape_feeds(specs, feeds)
    check_feed_names(session.input_names, given, f"model {session.label} (shape_feeds)")
    return {s.name: check_value(s, given[s.name]) for s in specs}, ""


def _figure(launches: Sequence[Any], figure: str) -> tuple[float, ...]:
    values = [getattr(x, figure) for x in launches]
    return tuple(float(v) for v in values) if all(v is not None for v in values) else ()


def cold_start(
    ctx: Context,
    model: Any,
    feeds: Feeds,
    *,
    name: str | None,
    shape_feeds: Feeds | bool | None,
    launches: int | None,
    timeout: float | None,
    budget: float | None,
    slo: Any,
    session_keywords: Mapping[str, Any],
) -> ColdStartResult:
    """See :meth:`pytest_ortperf.recorder.Recorder.cold_start`."""
    __tracebackhide__ = hide_rejected
    budgets = budgets_of(ctx, "cold_start", slo)
    from pytest_ortperf.measuring.coldstart import (
        check_launch_settings,
        interleaved,
        prepare,
        shape_text,
        temp_directory,
    )

    check_launch_settings(launches, timeout, budget)  # before anything is claimed or run
    session = cold_session(model, session_keywords)
    name = name or f"{session.label} cold start"
    for figure in COLD_START_FIGURES:
        ctx.entry(f"{name}:{figure}")
    other, note = new_shape_feeds(session, feeds, shape_feeds)
    with temp_directory() as tmp:
        prepared = prepare(
            Path(tmp), "model", session.model_bytes, session.settings, feeds, other,
            session.label,
        )  # fmt: skip
        settings = launch_settings(ctx, launches, timeout, budget)
        settings["launches"] = max(settings["launches"], values_needed(ctx, budgets))
        (arm,) = interleaved([(prepared.spec, prepared.label)], **settings)
    shapes = (shape_text(feeds),) + (() if other is None else (shape_text(other),))
    result = ColdStartResult(
        test=ctx.test,
        name=name,
        create=tuple(x.create for x in arm),
        first_run=tuple(x.first_run for x in arm),
        new_shape=tuple(x.new_shape for x in arm if x.new_shape is not None),
        imports=tuple(x.imports for x in arm),
        shapes=shapes,
        new_shape_note=note,
        measured=ctx.measured,
        session=session_info(session, False),
    )
    figures = {f: v for f, v in result.figures.items() if v}
    result = judged(ctx, result, budgets, figures, "launches")
    verdicts: list[Verdict] = []
    if ctx.gate is not None and ctx.measured:
        verdicts = judge_cold_start(ctx.test, result, ctx.gate)
    ctx.recording.record(result, verdicts=verdicts)
    if verdicts:
        ctx.enforce(name, Decision(result, verdicts))
    return result


def compare_cold_start(
    ctx: Context,
    reference: Any,
    candidate: Any,
    feeds: Feeds,
    *,
    name: str | None,
    shape_feeds: Feeds | bool | None,
    launches: int | None,
    timeout: float | None,
    budget: float | None,
    confidence: float,
    session_keywords: Mapping[str, Any],
) -> dict[str, Comparison]:
    """See :meth:`pytest_ortperf.recorder.Recorder.compare_cold_start`."""
    __tracebackhide__ = hide_rejected
    from pytest_ortperf.measuring.coldstart import interleaved, prepare, temp_directory

    ref = cold_session(reference, session_keywords)
    cand = cold_session(candidate, session_keywords)
    label = name or f"{cand.label} vs {ref.label} cold start"
    other, _ = new_shape_feeds(ref, feeds, shape_feeds)
    with temp_directory() as tmp:
        arms = [
            prepare(Path(tmp), key, s.model_bytes, s.settings, feeds, other, s.label)
            for key, s in (("reference", ref), ("candidate", cand))
        ]
        settings = launch_settings(ctx, launches, timeout, budget)
        ref_runs, cand_runs = interleaved([(a.spec, a.label) for a in arms], **settings)
    results: dict[str, Comparison] = {}
    for figure in COLD_START_FIGURES:
        ref_s = _figure(ref_runs, figure)
        cand_s = _figure(cand_runs, figure)
        if not ref_s or not cand_s:
            continue
        figure_name = f"{label}:{figure}"
        entry = ctx.entry(figure_name)
        sides = (("reference", ref_s, ref), ("candidate", cand_s, cand))
        ref_arm, cand_arm = (
            LatencyResult(
                test=ctx.test, name=f"{figure_name}:{role}", api="cold_start",
                samples=samples, calls_per_block=1, measured=ctx.measured,
                session=session_info(session, ctx.measured),
            )
            for role, samples, session in sides
        )  # fmt: skip
        record = comparison(ref_arm, cand_arm, figure_name, confidence)
        record_judged(ctx, record, entry, figure_name)
        results[figure] = record
    return results


def launch_settings(
    ctx: Context, launches: int | None, timeout: float | None, budget: float | None
) -> dict[str, Any]:
    """Launch count, timeout and budget of a cold start: one launch and no warm-up in
    smoke mode; when gated, at least the pairs the signed-rank test needs."""
    from pytest_ortperf.measuring.coldstart import (
        DEFAULT_BUDGET_S,
        DEFAULT_LAUNCHES,
        DEFAULT_TIMEOUT_S,
        check_launch_settings,
    )

    launches, timeout, budget = check_launch_settings(launches, timeout, budget)
    timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
    launcher = {} if ctx.cold_launcher is None else {"launcher": ctx.cold_launcher}
    if not ctx.measured:
        return {"launches": 1, "timeout": timeout, "budget": math.inf, "warmup": False,
                **launcher}  # fmt: skip
    count = DEFAULT_LAUNCHES if launches is None else launches
    if ctx.gate is not None and launches is None:
        from pytest_ortperf.gating.rules import min_blocks_for

        count = max(count, min_blocks_for(ctx.gate.settings.alpha))
    return {
        "launches": count,
        "timeout": timeout,
        "budget": DEFAULT_BUDGET_S if budget is None else budget,
        **launcher,
    }


def judge_cold_start(test: str, result: ColdStartResult, gate: Gate) -> list[Verdict]:
    """Each figure's median against earlier runs' medians (as absolute latencies)."""
    from pytest_ortperf.gating.history import judge_against_runs

    history = getattr(gate, "history", None)
    settings = gate.settings
    verdicts = []
    session = session_dict(result.session)
    for figure in result.figures:
        key = {"test": test, "name": result.name, "api": result.api,
               "kind": result.kind, "figure": figure, "session": session}  # fmt: skip
        earlier = history(key) if history is not None else None
        verdict = judge_against_runs(
            result.median(figure), earlier or (),
            threshold=settings.of_latencies, alpha=settings.alpha,
        )  # fmt: skip
        metric = f"cold_start.{figure}"
        message = verdict.message.replace("latency", metric, 1)
        verdicts.append(dataclasses.replace(verdict, metric=metric, message=message))
    return verdicts
