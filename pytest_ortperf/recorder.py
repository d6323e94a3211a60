"""The ``ortperf`` fixture object: measures targets and records the results on the test."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pytest

from pytest_ortperf.gating.gate import (
    BlindBaselineWarning,
    Decision,
    Gate,
    GateFailure,
    blind_baseline_message,
    detects_of,
    failure_message,
)
from pytest_ortperf.gating.settings import GateSettings
from pytest_ortperf.measuring.calls import (
    APIS,
    Call,
    OrtBinding,
    binding_call,
    default_api,
    hide_rejected,
    make_call,
    usable_apis,
)
from pytest_ortperf.measuring.engine import Samples, StopRule, TimingEngine, WarmupWarning, smoke
from pytest_ortperf.measuring.ortvalues import is_bfloat16
from pytest_ortperf.measuring.recorded_feeds import FeedPool, rotating
from pytest_ortperf.measuring.session import OrtSession, watches_cpu
from pytest_ortperf.results import (
    ATTRIBUTION_PROPERTY,
    COLD_START_FIGURES,
    GATED,
    OP_SHARES,
    PROFILE_PROPERTY,
    USER_PROPERTY,
    VERDICTS_PROPERTY,
    ColdStartResult,
    Comparison,
    Judgement,
    LatencyResult,
    MemoryResult,
    OutputDiff,
    Record,
    SessionInfo,
    Verdict,
)
from pytest_ortperf.stats import paired_ratio, ratio_of_blocks

if TYPE_CHECKING:
    import pandas as pd

    from pytest_ortperf.gating.slo import MachineBudgets
    from pytest_ortperf.measuring.engine import EngineConfig
    from pytest_ortperf.measuring.percall import PerCallSamples
    from pytest_ortperf.profiling.parse import Profile
    from pytest_ortperf.remote.sessions import RemoteSession
    from pytest_ortperf.results import PerCallResult, SloVerdict, ThroughputResult

Feeds = Mapping[str, np.ndarray[Any, Any]]
R = TypeVar("R", LatencyResult, Comparison)
R2 = TypeVar("R2", "LatencyResult", "PerCallResult", "ThroughputResult", "ColdStartResult")
"""A record that takes latency budgets (``slo=``)."""
Target = OrtSession | OrtBinding


CONTROL_NAME = "ortperf-control"
"""Label of the control workload a normalized latency is measured against
(:func:`pytest_ortperf.models.control`)."""


def comparison(
    reference: LatencyResult,
    candidate: LatencyResult,
    name: str,
    confidence: float,
    diffs: tuple[OutputDiff, ...] = (),
    runs: tuple[int, ...] = (),
) -> Comparison:
    """The comparison of two arms measured side by side (their samples pair up by index):
    the Hodges-Lehmann ratio of the block ratios with its interval at ``confidence``."""
    ratios = ratio_of_blocks(reference.samples, candidate.samples)
    estimate = paired_ratio(ratios, confidence)
    return Comparison(
        test=reference.test,
        name=name,
        api=reference.api,
        reference=reference,
        candidate=candidate,
        block_ratios=tuple(ratios),
        ratio=estimate.ratio,
        low=estimate.low,
        high=estimate.high,
        confidence=confidence,
        measured=reference.measured,
        output_diffs=diffs,
        runs=runs,
    )


def _merge_latency(parts: Sequence[LatencyResult]) -> LatencyResult:
    first = parts[0]
    controls = [p.control for p in parts if p.control is not None]
    return dataclasses.replace(
        first,
        samples=tuple(x for p in parts for x in p.samples),
        preempted=sum(p.preempted for p in parts),
        preempted_kept=any(p.preempted_kept for p in parts),
        control=_merge_latency(controls) if len(controls) == len(parts) else None,
        runs=tuple(len(p.samples) for p in parts),
    )


def merge_runs(parts: Sequence[R]) -> R:
    """One record of several independent runs of the same measurement, their blocks in
    order and ``runs`` their sizes (a baseline's runs: see ``Recorder.baseline_runs``)."""
    first = parts[0]
    if isinstance(first, Comparison):
        arms = [p for p in parts if isinstance(p, Comparison)]
        merged = comparison(
            _merge_latency([p.reference for p in arms]),
            _merge_latency([p.candidate for p in arms]),
            first.name, first.confidence, first.output_diffs,
            tuple(len(p.block_ratios) for p in arms),
        )  # fmt: skip
        return merged  # type: ignore[return-value]
    return _merge_latency([p for p in parts if isinstance(p, LatencyResult)])  # type: ignore[return-value]


@functools.cache
def control_workload(threads: int, spinning: bool) -> tuple[Call, OrtSession]:
    """The control workload's call and session, with a target's threads and spinning (so
    machine load hits both alike); built once per process for each such pair."""
    from pytest_ortperf.measuring.feeds import input_specs, make_feeds
    from pytest_ortperf.models import control

    session = OrtSession.create(control(), threads=threads, spinning=spinning, name=CONTROL_NAME)
    feeds = make_feeds(input_specs(session.sess))
    return make_call(session, feeds, "iobinding")[0], session


def warmed(engine: TimingEngine, *sessions: OrtSession) -> TimingEngine:
    """``engine`` with the warm-up bound of the providers the sessions run on (longer on
    CUDA and TensorRT, whose first runs search algorithms and build engines)."""
    providers = dict.fromkeys(p for s in sessions for p in s.sess.get_providers())
    return engine.for_providers(tuple(providers))


_WARNED: weakref.WeakKeyDictionary[Any, set[tuple[str, str, int]]] = weakref.WeakKeyDictionary()
"""Per recorder (one per test): the unsettled warnings given, by target and test line."""


def warn_unsettled(name: str, *arms: Samples) -> None:
    """A :class:`~pytest_ortperf.measuring.engine.WarmupWarning` (shown in pytest's warnings
    summary) when a target's warm-up bound ran out before its block times settled.

    Attributed to the first caller outside this package (the test's line), and given once
    per target and line in a test, however many runs measured it."""
    if all(s.settled for s in arms):
        return
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)
    level = 2  # the caller of this function
    owner = None  # the test's Recorder, when one measured this
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        package
    ):
        if owner is None:
            owner = next((v for v in frame.f_locals.values() if isinstance(v, Recorder)), None)
        frame = frame.f_back
        level += 1
    if owner is not None:
        given = _WARNED.setdefault(owner, set())
        key = (name, frame.f_code.co_filename, frame.f_lineno)
        if key in given:
            return
        given.add(key)
    warnings.warn(
        WarmupWarning(
            f"ortperf: {name!r}: block times had not settled when the warm-up bound ran out "
            "(the last blocks' times still differed); the first samples may "
            "include warm-up. Run the target a few times before measuring, or check for "
            "load on the machine"
        ),
        stacklevel=level,
    )


def _session_info(session: OrtSession, structure: bool) -> SessionInfo:
    """The session's record; with ``structure``, its op histogram and node placement."""
    info = session.info(with_histogram=structure)
    if not structure:
        return info
    from pytest_ortperf.profiling.placement import session_placement

    placement = tuple((n, op, p) for n, (op, p) in session_placement(session).items())
    return dataclasses.replace(info, placement=placement)


class OutputMismatch(AssertionError):
    """Candidate and reference outputs differ beyond the tolerances."""


def output_diffs(
    names: Sequence[str], reference: Sequence[Any], candidate: Sequence[Any]
) -> list[OutputDiff]:
    """Largest absolute and relative differences per output (inf where they cannot match)."""
    diffs = []
    for name, ref, cand in zip(names, reference, candidate, strict=True):
        if not isinstance(ref, np.ndarray) or not isinstance(cand, np.ndarray):
            same = ref == cand
            diffs.append(OutputDiff(name, 0.0 if same else math.inf, 0.0 if same else math.inf))
        elif ref.shape != cand.shape or ref.dtype.kind != cand.dtype.kind:
            diffs.append(OutputDiff(name, math.inf, math.inf))
        elif ref.dtype.kind in "OUSb":
            same = bool(np.array_equal(ref, cand))
            diffs.append(OutputDiff(name, 0.0 if same else math.inf, 0.0 if same else math.inf))
        elif ref.size == 0:
            diffs.append(OutputDiff(name, 0.0, 0.0))
        else:
            r = ref.astype(np.float64)
            c = cand.astype(np.float64)
            err = np.abs(c - r)
            rel = err / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
            diffs.append(OutputDiff(name, float(err.max()), float(rel.max())))
    return diffs


def verify_outputs(
    names: Sequence[str],
    reference: Sequence[Any],
    candidate: Sequence[Any],
    *,
    atol: float,
    rtol: float,
    what: str,
) -> list[OutputDiff]:
    """The per-output diffs; raises :class:`OutputMismatch` naming every output out of
    tolerance (``|c - r| <= atol + rtol * |r|`` elementwise, as numpy's ``allclose``)."""
    if len(reference) != len(candidate):
        raise OutputMismatch(
            f"{what}: reference has {len(reference)} outputs, candidate {len(candidate)}"
        )
    diffs = output_diffs(names, reference, candidate)
    bad = []
    for diff, ref, cand in zip(diffs, reference, candidate, strict=True):
        if math.isinf(diff.max_abs):
            bad.append(f"{diff.output}: values, shapes or types differ")
        elif (
            isinstance(ref, np.ndarray)
            and (ref.dtype.kind in "fc" or is_bfloat16(ref.dtype))
            and ref.size
        ):
            if not np.allclose(cand, ref, atol=atol, rtol=rtol, equal_nan=True):
                bad.append(
                    f"{diff.output}: max abs diff {diff.max_abs:.3g}, max rel diff "
                    f"{diff.max_rel:.3g} (atol={atol:g}, rtol={rtol:g})"
                )
        elif diff.max_abs > 0:
            bad.append(f"{diff.output}: max abs diff {diff.max_abs:.3g} (exact match expected)")
    if bad:
        raise OutputMismatch(f"{what}: outputs disagree\n  " + "\n  ".join(bad))
    return diffs


def _cold_session(model: Any, keywords: Mapping[str, Any]) -> OrtSession:
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


def _shape_feeds(
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


class Recorder:
    """Measures latencies and comparisons, attaches them to the running test.

    In smoke mode (``measured=False``: plain ``pytest``) every measurement runs its target
    once, checks outputs, and records nothing. With a ``gate`` (``--ortperf`` without
    ``--ortperf-update``), ``latency`` and ``compare`` are judged against the baseline and a
    regression fails the test.
    """

    def __init__(
        self,
        *,
        test: str,
        measured: bool,
        engine: TimingEngine,
        user_properties: list[tuple[str, object]],
        gate: Gate | None = None,
        profile_arms: bool = False,
        baseline_runs: int = 1,
        latency_mode: str = "normalized",
        baseline_settings: GateSettings | None = None,
        fail_blind: bool = False,
    ) -> None:
        self.test = test
        self.measured = measured
        self.engine = engine
        self.gate = gate
        self.profile_arms = profile_arms
        """Profile both arms of each compare (outside the timed runs) and keep each op
        type's share of kernel time with the record: ``--ortperf-update`` stores them in
        the baseline, so a later regression can say which op types moved."""
        self.baseline_runs = baseline_runs
        """Independent runs a measurement is taken as (``--ortperf-update``: several, each
        on fresh sessions, their spread the baseline's between-run variance)."""
        self.latency_mode = latency_mode
        self.baseline_settings = baseline_settings or GateSettings()
        """Threshold and alpha a baseline taken here must be able to see
        (:func:`~pytest_ortperf.gating.gate.detects_of`)."""
        self.fail_blind = fail_blind
        """Fail the test when its baseline stays too noisy to see the threshold
        (``--ortperf-fail-blind``)."""
        """``normalized`` (a latency is measured interleaved with the control workload) or
        ``absolute``."""
        self.records: list[Record] = []
        self.failures: list[str] = []
        """Gate failures of this test, raised together once the test body has run (so a
        failing measurement does not keep the next ones from being measured and stored)."""
        self._user_properties = user_properties
        self._gated_names: set[str] = set()

    def _record(
        self,
        record: Record,
        *,
        gated: bool = False,
        verdicts: Sequence[Verdict] = (),
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.records.append(record)
        if self.measured:
            payload = record.to_dict()
            if gated:
                payload[GATED] = True
            payload.update(extra or {})
            self._user_properties.append((USER_PROPERTY, payload))
            if verdicts:
                judgement = Judgement(record.test, record.name, tuple(verdicts))
                self._user_properties.append((VERDICTS_PROPERTY, judgement.to_dict()))

    def _entry(self, name: str) -> Mapping[str, Any] | None:
        if name in self._gated_names:
            raise ValueError(
                f"measurement name {name!r} is already used in this test: give each "
                "latency/compare its own name= (baseline entries are keyed by it)"
            )
        self._gated_names.add(name)
        if self.gate is None:
            return None
        try:
            return self.gate.entry(self.test, name)
        except GateFailure as exc:
            message = str(exc)
        pytest.fail(message, pytrace=False)

    def _enforce(
        self,
        name: str,
        decision: Decision[Any],
        attribution: Callable[[], list[str]] | None = None,
    ) -> None:
        if self.gate is None:
            return
        verdicts = decision.verdicts
        failing = self.gate.failing(verdicts)
        if failing:
            message = failure_message(name, failing, verdicts, decision.first)
            if attribution is not None and any(v.metric != "structure" for v in failing):
                lines = attribution()
                message += "\n" + "\n".join(lines)
                moved = {"test": self.test, "name": name, "lines": lines}
                self._user_properties.append((ATTRIBUTION_PROPERTY, moved))
            self.failures.append(message)

    def _calls(
        self, target: Target, feeds: Feeds | None, api: str | None
    ) -> tuple[Call, Callable[[], list[Any]], str, OrtSession]:
        __tracebackhide__ = hide_rejected
        if isinstance(target, OrtBinding):
            if api not in (None, "iobinding"):
                raise ValueError(f"a binding target is timed with api='iobinding', not {api!r}")
            call, outputs = binding_call(target)
            return call, outputs, "iobinding", target.session
        if not isinstance(target, OrtSession):
            raise TypeError(
                "target must be a session from ort_session or a binding from ort_binding, "
                f"got {type(target).__name__}"
            )
        if feeds is None:
            raise ValueError(f"feeds are required to time session {target.label!r}")
        api = api or default_api(target)
        if api not in APIS:
            raise ValueError(f"api={api!r} is not one of {', '.join(APIS)}")
        call, outputs = make_call(target, feeds, api)
        if isinstance(feeds, FeedPool) and len(feeds.sets) > 1:  # one recorded set per call
            rest = [make_call(target, s, api)[0] for s in feeds.sets[1:]]
            call = rotating([call, *rest])
        return call, outputs, api, target

    def latency(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        api: str | None = None,
        name: str | None = None,
        slo: Any = None,
    ) -> LatencyResult:
        """Seconds per call of a binding, or of a session with feeds through ``api``
        (default ``run``). Measured interleaved with the control workload when latencies
        are normalized (the default): the gate then judges target over control. ``slo``:
        a budget of the median, ``"5 ms"`` (:mod:`pytest_ortperf.gating.slo`)."""
        __tracebackhide__ = hide_rejected
        budgets = self._slo("latency", slo)
        call, _, api, session = self._calls(target, feeds, api)
        name = name or session.label
        entry = self._entry(name)
        normalized = self.measured and self.latency_mode == "normalized"

        def measure(engine: TimingEngine, stop: StopRule | None, fresh: bool) -> LatencyResult:
            timed, timed_session = call, session
            if fresh and isinstance(target, OrtSession):
                timed_session = target.derive()
                timed = self._calls(timed_session, feeds, api)[0]
            watch = watches_cpu(timed_session)
            control: LatencyResult | None = None
            if not self.measured:
                samples = smoke(timed, engine.clock)
            elif normalized:
                settings = timed_session.settings
                control_call, control_session = control_workload(
                    settings.threads, settings.spinning
                )
                samples = warmed(engine, timed_session).measure(
                    timed, watch_cpu=watch, control=control_call, should_stop=stop
                )
                if samples.control is not None:
                    control = self._result(
                        CONTROL_NAME, "iobinding", samples.control, control_session
                    )
            else:
                samples = warmed(engine, timed_session).measure(timed, watch_cpu=watch)
            warn_unsettled(name, samples)
            return dataclasses.replace(
                self._result(name, api, samples, timed_session), control=control
            )

        decision = self._decide(measure, entry)
        blocks = self._budget_blocks(decision.record, budgets, call, session)
        result = self._budgets(decision.record, budgets, {"median": blocks})
        self._record(result, gated=True, verdicts=decision.verdicts, extra=decision.extra)
        self._enforce(name, decision)
        return result

    def _result(
        self, name: str, api: str, samples: Samples, session: OrtSession, histogram: bool = False
    ) -> LatencyResult:
        return LatencyResult(
            test=self.test,
            name=name,
            api=api,
            samples=samples.values,
            calls_per_block=samples.calls_per_block,
            measured=self.measured,
            session=_session_info(session, histogram),
            preempted=samples.preempted,
            preempted_kept=samples.preempted_kept,
        )

    def _decide(
        self,
        measure: Callable[[TimingEngine, StopRule | None, bool], R],
        entry: Mapping[str, Any] | None,
    ) -> Decision[R]:
        """Measure as the run asks: once, or as several runs on fresh sessions when taking a
        baseline (more when they could not see a slowdown of the threshold), or through
        the gate (session pairs, extension, and a confirmation of what would fail)."""
        if self.gate is not None:
            return self.gate.decide(measure, self.engine, entry, merge_runs)
        k = self.baseline_runs if self.measured else 1
        if k <= 1:
            return Decision(measure(self.engine, None, False), [])
        engine = self.engine.scaled(1.0 / k)
        parts = [measure(engine, None, i > 0) for i in range(k)]
        record = merge_runs(parts)
        settings = self.baseline_settings
        detects = detects_of(record, settings.alpha)
        if detects is not None and detects > settings.threshold:
            # Too noisy to see the threshold: measure as many runs again, pooled with these.
            parts += [measure(engine, None, True) for _ in range(k)]
            record = merge_runs(parts)
            detects = detects_of(record, settings.alpha)
        if detects is not None and detects > settings.threshold:
            message = blind_baseline_message(record.name, detects, settings.threshold, len(parts))
            warnings.warn(BlindBaselineWarning(message), stacklevel=3)
            if self.fail_blind:
                self.failures.append(f"ortperf: {message}")
        return Decision(record, [], detects=detects)

    def compare(
        self,
        reference: OrtSession,
        candidate: OrtSession,
        feeds: Feeds,
        *,
        name: str | None = None,
        api: str = "iobinding",
        check_outputs: bool = True,
        atol: float = 1e-4,
        rtol: float = 1e-3,
        confidence: float = 0.95,
        max_slowdown: float | None = None,
    ) -> Comparison:
        """Candidate vs reference, measured interleaved; outputs checked first.

        The ratio is candidate/reference per call (below 1: the candidate is faster), the
        Hodges-Lehmann estimate of the paired block ratios with its distribution-free
        interval at ``confidence``. Sessions of ``ort_env`` (remote sessions: both arms in
        worker processes) are measured by :mod:`pytest_ortperf.remote.sessions`. With
        ``max_slowdown`` (0.05: 5%), the comparison is also judged without any baseline:
        the candidate may not be slower than the reference by more than that.
        """
        __tracebackhide__ = hide_rejected
        from pytest_ortperf.remote.sessions import is_remote

        if max_slowdown is not None and not (
            isinstance(max_slowdown, int | float) and 0 <= max_slowdown <= 10
        ):
            raise ValueError(
                f"max_slowdown must be a fraction such as 0.05 (5%), got {max_slowdown!r}"
            )
        if is_remote(reference, candidate):
            return compare_remote(
                self, reference, candidate, feeds, name=name, api=api,
                check_outputs=check_outputs, atol=atol, rtol=rtol, confidence=confidence,
                max_slowdown=max_slowdown,
            )  # fmt: skip
        label = name or f"{candidate.label} vs {reference.label}"
        ref_call, ref_outputs, api, _ = self._calls(reference, feeds, api)
        cand_call, cand_outputs, _, _ = self._calls(candidate, feeds, api)
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
        entry = self._entry(label)

        def measure(engine: TimingEngine, stop: StopRule | None, fresh: bool) -> Comparison:
            ref, cand, calls = reference, candidate, (ref_call, cand_call)
            if fresh:
                ref, cand = reference.derive(), candidate.derive()
                calls = (self._calls(ref, feeds, api)[0], self._calls(cand, feeds, api)[0])
            if self.measured:
                ref_s, cand_s = warmed(engine, ref, cand).interleave(
                    list(calls), should_stop=stop, watch_cpu=watches_cpu(ref, cand)
                )
                warn_unsettled(label, ref_s, cand_s)
            else:
                ref_s, cand_s = smoke(calls[0], engine.clock), smoke(calls[1], engine.clock)
            return comparison(
                self._result(f"{label}:reference", api, ref_s, ref, self.measured),
                self._result(f"{label}:candidate", api, cand_s, cand, self.measured),
                label, confidence, tuple(diffs),
            )  # fmt: skip

        decision = self._judge_ab(self._decide(measure, entry), max_slowdown)
        result, verdicts = decision.record, decision.verdicts
        arms = {"reference": reference, "candidate": candidate}
        extra = dict(decision.extra)
        if self.measured and self.profile_arms:
            from pytest_ortperf.profiling.attribution import op_shares

            extra[OP_SHARES] = {role: op_shares(s, feeds) for role, s in arms.items()}
        self._record(result, gated=True, verdicts=verdicts, extra=extra)

        def attribute() -> list[str]:
            from pytest_ortperf.profiling.attribution import attribution

            return attribution(arms, feeds, (entry or {}).get(OP_SHARES))

        self._enforce(label, decision, attribute)
        return result

    def _judge_ab(
        self, decision: Decision[Comparison], max_slowdown: float | None
    ) -> Decision[Comparison]:
        """With ``max_slowdown``, the decision with the verdict of the comparison judged on
        itself, without baseline (:func:`pytest_ortperf.gating.ab.judge_ab`); its
        regression fails the test (also where no gate runs: ``--ortperf-update``)."""
        if max_slowdown is None or not self.measured:
            return decision
        from pytest_ortperf.gating.ab import judge_ab

        alpha = self.gate.settings.alpha if self.gate is not None else 0.01
        verdict = judge_ab(
            decision.record.block_ratios, threshold=max_slowdown, alpha=alpha,
            a="reference", b="candidate",
        )  # fmt: skip
        decision = dataclasses.replace(decision, verdicts=[*decision.verdicts, verdict])
        strict = self.gate is not None and self.gate.settings.strict
        if self.gate is None and verdict.failed(strict):
            name = decision.record.name
            self.failures.append(failure_message(name, [verdict], decision.verdicts))
        return decision

    def profile(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        name: str | None = None,
        runs: int = 10,
        warmup: int = 3,
    ) -> Profile:
        """Per-node kernel timings of ``runs`` runs on a separate profiling session (never
        mixed into latency samples). Under ``--ortperf`` its per-op summary is stored with
        the measurement of the same ``name`` in this test."""
        from pytest_ortperf.profiling.run import profile_session

        session = target.session if isinstance(target, OrtBinding) else target
        if feeds is None:
            if not isinstance(target, OrtBinding):
                raise ValueError(f"feeds are required to profile session {session.label!r}")
            feeds = target.feeds
        profile = profile_session(
            session, feeds, runs=runs if self.measured else 1, warmup=warmup if self.measured else 0
        )
        if self.measured:
            columns = ["op_type", "total_us", "count_per_run", "share"]
            summary = [
                {"op_type": str(op), "total_us": total, "count": count, "share": share}
                for op, total, count, share in profile.by_op()[columns].to_numpy().tolist()
            ]
            self._user_properties.append(
                (
                    PROFILE_PROPERTY,
                    {"test": self.test, "name": name or session.label, "by_op": summary},
                )
            )
        return profile

    def memory(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        api: str | None = None,
        name: str | None = None,
        runs: int = 5,
        arena: bool = True,
    ) -> MemoryResult:
        """Peak memory of the process during each of ``runs`` calls (Linux: the kernel's
        high-water mark, reset before each call where permitted) and, with ``arena`` (ORT
        >= 1.32, measured runs only), ORT's own peak bytes in use from a short profile on a
        separate session. ``name`` defaults to ``"<model>:memory"``. Gated with a
        tolerance (:mod:`pytest_ortperf.gating.memory_rule`): ``memory.growth`` and
        ``memory.arena_peak``. In smoke mode: one run, no profile."""
        from pytest_ortperf.profiling.memory import peak_memory

        call, _, api, session = self._calls(target, feeds, api)
        name = name or f"{session.label}:memory"
        entry = self._entry(name)
        profile = None
        if arena and self.measured:
            from pytest_ortperf.profiling.run import profile_session

            profiled = feeds if feeds is not None else getattr(target, "feeds", None)
            if profiled is not None:
                profile = profile_session(session, profiled, runs=2, warmup=1)
        result = dataclasses.replace(
            peak_memory(call, runs=runs if self.measured else 1, profile=profile),
            test=self.test,
            name=name,
            api=api,
            measured=self.measured,
        )
        verdicts: list[Verdict] = []
        if self.gate is not None and self.measured:
            verdicts = self.gate.judge(result.to_dict(), entry)
        self._record(result, gated=True, verdicts=verdicts)
        if verdicts:
            self._enforce(name, Decision(result, verdicts))  # type: ignore[arg-type]
        return result

    cold_launcher: Callable[[Path, str, float], Any] | None = None
    """What starts one cold-start process (None: :func:`pytest_ortperf.measuring.coldstart.launch`);
    tests set a :class:`pytest_ortperf.testing.ScriptedLauncher` to inject figures."""

    marker_slo: Any = None
    """The marker's ``slo=`` (set by the fixture): the budget of each measurement of the
    kind its form fits that gives no ``slo=`` of its own."""

    @property
    def _alpha(self) -> float:
        return self.gate.settings.alpha if self.gate is not None else 0.01

    def _slo(
        self, kind: str, slo: Any, figures: Sequence[str] | None = None
    ) -> tuple[MachineBudgets, ...] | None:
        """The latency budgets of one measurement, checked before it runs (against the
        ``figures`` it takes, where given): a bad one fails the test with its message."""
        from pytest_ortperf.gating.slo import SloError, budgets_for, check_figures

        try:
            budgets = budgets_for(kind, slo, self.marker_slo, self.test)
            if budgets and figures is not None:
                check_figures(budgets, figures, kind, self.test)
        except SloError as exc:
            message = str(exc)
        else:
            return budgets
        pytest.fail(message, pytrace=False)

    def _budgets(
        self,
        result: R2,
        budgets: Sequence[MachineBudgets] | None,
        values_of: Mapping[str, Sequence[float]],
        unit: str = "blocks",
        verdicts: tuple[SloVerdict, ...] | None = None,
    ) -> R2:
        """``result`` with its budgets judged on ``values_of`` (or ``verdicts`` already
        judged) for this machine's class; a violated one fails the test when gated."""
        if not budgets or not self.measured:
            return result
        from pytest_ortperf.gating.slo import failure_message, judge_all
        from pytest_ortperf.state import environment

        if verdicts is None:
            env = environment()
            verdicts = judge_all(
                budgets, values_of, self._alpha, unit=unit,
                cpu_model=env.get("cpu_model"), cpus=env.get("effective_cpus"),
            )  # fmt: skip
        strict = self.gate is not None and self.gate.settings.strict
        message = failure_message(result.name, verdicts, strict=strict)
        if message is not None and self.gate is not None:
            self.failures.append(message)
        return dataclasses.replace(result, slo=verdicts)  # type: ignore[type-var]

    def _budget_blocks(
        self,
        result: LatencyResult,
        budgets: Sequence[MachineBudgets] | None,
        call: Call,
        session: OrtSession,
    ) -> Sequence[float]:
        """The blocks a latency's budget is judged on: the result's, and when they are too
        few to decide it, one more measurement's (a gate may stop after a few blocks)."""
        if not budgets or not self.measured:
            return result.samples
        from pytest_ortperf.gating.slo import min_values

        if len(result.samples) >= min_values(budgets, self._alpha):
            return result.samples
        more = warmed(self.engine, session).measure(call, watch_cpu=watches_cpu(session))
        return (*result.samples, *more.values)

    def _per_call_budgets(
        self,
        result: PerCallResult,
        first: PerCallSamples,
        budgets: Sequence[MachineBudgets],
        call: Call | None,
        config: Any,
        watch: bool,
    ) -> PerCallResult:
        """``result`` judged against its budgets, measured on (more single calls of
        ``call``, none when None) while one is undecided."""
        from pytest_ortperf.gating.slo import judge_per_call
        from pytest_ortperf.measuring.percall import measure_per_call
        from pytest_ortperf.state import environment

        def more(m: int) -> PerCallSamples | None:
            if call is None:
                return None
            sized = dataclasses.replace(config, min_calls=max(m, 2), max_calls=max(m, 2))
            return measure_per_call([call], config=sized, watch_cpu=watch)[0]

        env = environment()
        result, verdicts = judge_per_call(
            result, first, budgets, self._alpha, more,
            cpu_model=env.get("cpu_model"), cpus=env.get("effective_cpus"),
        )  # fmt: skip
        return self._budgets(result, budgets, {}, verdicts=verdicts)

    def cold_start(
        self,
        model: Any,
        feeds: Feeds,
        *,
        name: str | None = None,
        shape_feeds: Feeds | bool | None = None,
        launches: int | None = None,
        timeout: float | None = None,
        budget: float | None = None,
        slo: Any = None,
        **session_keywords: Any,
    ) -> ColdStartResult:
        """Session creation, first run, and first run at a new input shape, each launch
        a fresh Python process (see :mod:`pytest_ortperf.measuring.coldstart`). ``model`` is what
        ``ort_session`` takes, with its keywords (``providers``, ``optimization``,
        ``threads``, ``spinning``, ``options``, ``custom_ops``), or a session from it.
        ``shape_feeds``: feeds at the other shape (None: every dynamic dim doubled;
        False: no new-shape figure). Figures are gated against earlier runs' medians (as
        absolute latencies are); compare two models with :meth:`compare_cold_start`.
        ``slo``: budgets of the figures' medians, ``{"create": "2 s"}`` (at least the
        launches that can decide them are taken)."""
        __tracebackhide__ = hide_rejected
        budgets = self._slo("cold_start", slo)
        from pytest_ortperf.measuring.coldstart import (
            check_launch_settings,
            interleaved,
            prepare,
            shape_text,
            temp_directory,
        )

        check_launch_settings(launches, timeout, budget)  # before anything is claimed or run
        session = _cold_session(model, session_keywords)
        name = name or f"{session.label} cold start"
        entry_names = [f"{name}:{figure}" for figure in COLD_START_FIGURES]
        for entry_name in entry_names:
            self._entry(entry_name)
        other, note = _shape_feeds(session, feeds, shape_feeds)
        with temp_directory() as tmp:
            prepared = prepare(
                Path(tmp), "model", session.model_bytes, session.settings, feeds, other,
                session.label,
            )  # fmt: skip
            settings = self._launch_settings(launches, timeout, budget)
            if budgets and self.measured:
                from pytest_ortperf.gating.slo import min_values

                settings["launches"] = max(settings["launches"], min_values(budgets, self._alpha))
            (arm,) = interleaved([(prepared.spec, prepared.label)], **settings)
        shapes = (shape_text(feeds),) + (() if other is None else (shape_text(other),))
        result = ColdStartResult(
            test=self.test,
            name=name,
            create=tuple(x.create for x in arm),
            first_run=tuple(x.first_run for x in arm),
            new_shape=tuple(x.new_shape for x in arm if x.new_shape is not None),
            imports=tuple(x.imports for x in arm),
            shapes=shapes,
            new_shape_note=note,
            measured=self.measured,
            session=_session_info(session, False),
        )
        figures = {f: v for f, v in result.figures.items() if v}
        result = self._budgets(result, budgets, figures, "launches")
        verdicts: list[Verdict] = []
        if self.gate is not None and self.measured:
            verdicts = self._judge_cold_start(result, self.gate)
        self._record(result, verdicts=verdicts)
        if verdicts:
            self._enforce(name, Decision(result, verdicts))  # type: ignore[arg-type]
        return result

    def compare_cold_start(
        self,
        reference: Any,
        candidate: Any,
        feeds: Feeds,
        *,
        name: str | None = None,
        shape_feeds: Feeds | bool | None = None,
        launches: int | None = None,
        timeout: float | None = None,
        budget: float | None = None,
        confidence: float = 0.95,
        **session_keywords: Any,
    ) -> dict[str, Comparison]:
        """Cold starts of two models, their launches interleaved (reference, candidate,
        reference, ...): one :class:`~pytest_ortperf.results.Comparison` per figure
        (``create``, ``first_run``, ``new_shape`` where the models have a dynamic dim),
        its samples the per-launch seconds and its ratio candidate/reference, each
        recorded as ``"<name>:<figure>"`` and gated as any comparison is. Session keywords
        apply to both models (or pass sessions from ``ort_session``)."""
        __tracebackhide__ = hide_rejected
        from pytest_ortperf.measuring.coldstart import interleaved, prepare, temp_directory

        ref = _cold_session(reference, session_keywords)
        cand = _cold_session(candidate, session_keywords)
        label = name or f"{cand.label} vs {ref.label} cold start"
        other, _ = _shape_feeds(ref, feeds, shape_feeds)
        with temp_directory() as tmp:
            arms = [
                prepare(Path(tmp), key, s.model_bytes, s.settings, feeds, other, s.label)
                for key, s in (("reference", ref), ("candidate", cand))
            ]
            settings = self._launch_settings(launches, timeout, budget)
            ref_runs, cand_runs = interleaved([(a.spec, a.label) for a in arms], **settings)
        results: dict[str, Comparison] = {}
        for figure in COLD_START_FIGURES:
            ref_s = _figure(ref_runs, figure)
            cand_s = _figure(cand_runs, figure)
            if not ref_s or not cand_s:
                continue
            figure_name = f"{label}:{figure}"
            entry = self._entry(figure_name)
            sides = (("reference", ref_s, ref), ("candidate", cand_s, cand))
            ref_arm, cand_arm = (
                LatencyResult(
                    test=self.test, name=f"{figure_name}:{role}", api="cold_start",
                    samples=samples, calls_per_block=1, measured=self.measured,
                    session=_session_info(session, self.measured),
                )
                for role, samples, session in sides
            )  # fmt: skip
            record = comparison(ref_arm, cand_arm, figure_name, confidence)
            verdicts: list[Verdict] = []
            if self.gate is not None and self.measured:
                verdicts = self.gate.judge(record.to_dict(), entry)
            self._record(record, gated=True, verdicts=verdicts)
            if verdicts:
                self._enforce(figure_name, Decision(record, verdicts))
            results[figure] = record
        return results

    def _launch_settings(
        self, launches: int | None, timeout: float | None, budget: float | None
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
        if not self.measured:
            launcher = {} if self.cold_launcher is None else {"launcher": self.cold_launcher}
            return {"launches": 1, "timeout": timeout, "budget": math.inf, "warmup": False,
                    **launcher}  # fmt: skip
        count = DEFAULT_LAUNCHES if launches is None else launches
        if self.gate is not None and launches is None:
            from pytest_ortperf.gating.rules import min_blocks_for

            count = max(count, min_blocks_for(self.gate.settings.alpha))
        launcher = {} if self.cold_launcher is None else {"launcher": self.cold_launcher}
        return {
            "launches": count,
            "timeout": timeout,
            "budget": DEFAULT_BUDGET_S if budget is None else budget,
            **launcher,
        }

    def _judge_cold_start(self, result: ColdStartResult, gate: Gate) -> list[Verdict]:
        """Each figure's median against earlier runs' medians (as absolute latencies)."""
        from pytest_ortperf.gating.history import judge_against_runs

        history = getattr(gate, "history", None)
        settings = gate.settings
        verdicts = []
        session = None if result.session is None else result.session.to_dict()
        for figure in result.figures:
            key = {"test": self.test, "name": result.name, "api": result.api,
                   "kind": result.kind, "figure": figure, "session": session}  # fmt: skip
            earlier = history(key) if history is not None else None
            verdict = judge_against_runs(
                result.median(figure), earlier or (),
                threshold=settings.latency_threshold or settings.threshold, alpha=settings.alpha,
            )  # fmt: skip
            metric = f"cold_start.{figure}"
            message = verdict.message.replace("latency", metric, 1)
            verdicts.append(dataclasses.replace(verdict, metric=metric, message=message))
        return verdicts

    def rank(
        self,
        variants: Mapping[str, OrtSession],
        feeds: Feeds,
        *,
        name: str = "rank",
        api: str = "iobinding",
        check_outputs: bool = True,
        atol: float = 1e-4,
        rtol: float = 1e-3,
    ) -> pd.DataFrame:
        """Several sessions measured interleaved: a DataFrame sorted by median with each
        variant's ratio to the fastest. Outputs are checked against the first variant.

        Its ``measured`` column (and ``frame.attrs["measured"]``) is False in smoke mode,
        where each variant ran once: medians and ``ratio_to_fastest`` are then no
        measurement, as for the other results."""
        if len(variants) < 2:
            raise ValueError("rank needs at least two variants")
        from pytest_ortperf.remote.sessions import is_remote

        if is_remote(*variants.values()):
            return rank_remote(
                self, variants, feeds, name=name, api=api, check_outputs=check_outputs,
                atol=atol, rtol=rtol,
            )  # fmt: skip
        pairs = {key: self._calls(s, feeds, api) for key, s in variants.items()}
        if check_outputs:
            (first_key, first), *rest = pairs.items()
            first_out = first[1]()
            for key, (_, outputs, _, session) in rest:
                verify_outputs(
                    session.output_names,
                    first_out,
                    outputs(),
                    atol=atol,
                    rtol=rtol,
                    what=f"rank {name!r}: {key!r} vs {first_key!r}",
                )
        return self._table(
            name, {key: (call, api, sess) for key, (call, _, _, sess) in pairs.items()}
        )

    def api_sweep(self, session: OrtSession, feeds: Feeds, *, name: str = "api") -> pd.DataFrame:
        """The same model through every run API (see :mod:`pytest_ortperf.measuring.calls`),
        measured interleaved: one row per API, sorted by median, ratios to the fastest.

        Its ``measured`` column (and ``frame.attrs["measured"]``) is False in smoke mode,
        where each API ran once: medians and ``ratio_to_fastest`` are then no
        measurement, as for the other results. A bfloat16 model leaves out the APIs that
        pass numpy arrays (``run``, ``run_c``, ``iobinding_bind_per_call``)."""
        apis = usable_apis(session)
        calls = {api: (make_call(session, feeds, api)[0], api, session) for api in apis}
        return self._table(name, calls)

    def _table(self, name: str, calls: Mapping[str, tuple[Call, str, OrtSession]]) -> pd.DataFrame:
        import pandas as pd

        keys = list(calls)
        if self.measured:
            all_samples = warmed(self.engine, *(calls[k][2] for k in keys)).interleave(
                [calls[k][0] for k in keys],
                watch_cpu=watches_cpu(*(calls[k][2] for k in keys)),
            )
            warn_unsettled(name, *all_samples)
        else:
            all_samples = [smoke(calls[k][0], self.engine.clock) for k in keys]
        rows = []
        for key, samples in zip(keys, all_samples, strict=True):
            _, api, session = calls[key]
            result = self._result(f"{name}:{key}", api, samples, session)
            self._record(result)
            rows.append({"variant": key, "api": api, **result.summary.to_dict()})
        frame = pd.DataFrame(rows).sort_values("median", ignore_index=True)
        frame["ratio_to_fastest"] = frame["median"] / frame["median"].iloc[0]
        # Smoke mode times one call each: nothing to rank on, and the table says so.
        frame["measured"] = self.measured
        frame.attrs["measured"] = self.measured
        return frame

    # -------------------------------------------------------- per-call tails, throughput

    def _claim(self, name: str) -> None:
        """Reserve a measurement name in this test (ungated kinds share the namespace)."""
        if name in self._gated_names:
            raise ValueError(
                f"measurement name {name!r} is already used in this test: give each "
                "measurement its own name="
            )
        self._gated_names.add(name)

    def _engine_config(self, *sessions: OrtSession) -> EngineConfig:
        from pytest_ortperf.measuring.engine import EngineConfig

        config = getattr(warmed(self.engine, *sessions), "config", None)
        return config if isinstance(config, EngineConfig) else EngineConfig()

    def per_call(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        api: str | None = None,
        name: str | None = None,
        reference: Target | None = None,
        q: float = 0.99,
        threshold: float = 0.10,
        min_calls: int = 1000,
        max_calls: int = 20_000,
        slo: Any = None,
    ) -> PerCallResult:
        """Single calls timed one by one, the timer's own cost subtracted: p50/p90/p99/p99.9
        of single calls (``.quantiles``), beside the block median the gate uses
        (``.block_median``). See :mod:`pytest_ortperf.measuring.percall`.

        With a ``reference`` (another session or binding, same feeds and api) both are
        measured interleaved, round by round, and the tail rule
        (:func:`pytest_ortperf.gating.tails.judge_tail`) judges the ``q`` quantile ratio
        candidate/reference against ``threshold``: under ``--ortperf`` a regression fails
        the test (inconclusive fails only with ``--ortperf-strict``). The result is the
        target's, its ``reference`` the other arm. Recorded and stored; no baseline entry.
        With a reference the measurement is sized for ``q``: at least the calls that leave
        10 beyond it (1,000 for p99, 10,000 for p99.9) in 10 rounds, ``max_calls`` below
        that refused at once. ``q``, ``threshold``, ``min_calls`` and ``max_calls`` (at
        most 200,000) are checked before anything runs.

        ``slo``: budgets of quantiles of single calls, ``{"p99": "20 ms"}``; measuring goes
        on while one is undecided (:func:`pytest_ortperf.gating.slo.keep_measuring`).
        """
        __tracebackhide__ = hide_rejected
        from pytest_ortperf.gating.tails import MIN_ROUNDS, calls_for, check_tail, quantile_label
        from pytest_ortperf.measuring.percall import (
            MAX_CALLS,
            PerCallConfig,
            PerCallError,
            measure_per_call,
            smoke_per_call,
        )
        from pytest_ortperf.results import PerCallResult

        # Every argument is checked before anything is measured, in smoke mode too.
        alpha = self.gate.settings.alpha if self.gate is not None else 0.01
        check_tail(q, threshold, alpha)
        sizing: dict[str, Any] = {"min_calls": min_calls, "max_calls": max_calls}
        PerCallConfig(**sizing)
        if reference is not None:
            need = calls_for(q)
            if max_calls < need:
                raise PerCallError(
                    f"a {quantile_label(q)} verdict needs {need:,} calls per arm, more than "
                    f"max_calls={max_calls:,}: raise max_calls (at most {MAX_CALLS:,}) or "
                    "lower q"
                )
            sizing.update(min_calls=max(min_calls, need), min_rounds=MIN_ROUNDS, sized=True)
        budgets = self._slo("per_call", slo)
        call, _, api, session = self._calls(target, feeds, api)
        arms = [(call, session)]
        if reference is not None:
            ref_call, _, _, ref_session = self._calls(reference, feeds, api)
            arms.insert(0, (ref_call, ref_session))
        label = session.label if reference is None else f"{session.label} vs {arms[0][1].label}"
        name = name or f"per-call {label}"
        self._claim(name)
        sessions = [s for _, s in arms]
        if self.measured:
            config = PerCallConfig.from_engine(self._engine_config(*sessions), **sizing)
            samples = measure_per_call(
                [c for c, _ in arms], config=config, watch_cpu=watches_cpu(*sessions)
            )
        else:
            samples = [smoke_per_call(c) for c, _ in arms]
        results = [
            PerCallResult(
                test=self.test,
                name=name if i == len(arms) - 1 else f"{name}:reference",
                api=api,
                calls=tuple(x * 1e-9 for x in s.calls_ns),
                timer_cost=s.timer_ns * 1e-9,
                calls_per_round=s.calls_per_round,
                blocks=s.blocks,
                calls_per_block=s.calls_per_block,
                measured=self.measured,
                session=sess.info(),
                preempted=s.preempted,
                preempted_kept=s.preempted_kept,
                watched=s.watched,
            )
            for i, (s, (_, sess)) in enumerate(zip(samples, arms, strict=True))
        ]
        result = results[-1]
        if budgets and self.measured:
            more = call if reference is None else None  # with a reference: no more calls
            watch = watches_cpu(session)
            result = self._per_call_budgets(result, samples[-1], budgets, more, config, watch)
        verdicts: list[Verdict] = []
        if reference is not None:
            result = dataclasses.replace(result, reference=results[0])
            if self.measured:
                from pytest_ortperf.gating.tails import judge_tail

                verdicts.append(
                    judge_tail(
                        results[0].rounds(), result.rounds(), q, threshold=threshold, alpha=alpha
                    )
                )
        self._record(result, verdicts=verdicts)
        if self.gate is not None and verdicts:
            failing = self.gate.failing(verdicts)
            if failing:
                lines = [f"ortperf: {name!r} failed its tail rule"]
                lines += [f"  FAIL {v.metric}: {v.message}" for v in failing]
                self.failures.append("\n".join(lines))
        return result

    def throughput(
        self,
        target: OrtSession,
        feeds: Feeds,
        *,
        concurrency: Sequence[int] = (1, 2, 4),
        sessions: str = "shared",
        api: str | None = None,
        name: str | None = None,
        seconds: float | None = None,
        rounds: int = 3,
        slo: Any = None,
    ) -> ThroughputResult:
        """Calls per second and per-call latency with ``concurrency`` Python threads
        calling at once (ORT's run releases the GIL): all of them one session
        (``sessions="shared"``) or one session each (``"per_thread"``, derived from
        ``target`` with its settings). Each level runs ``seconds`` (default: the
        measurement budget) in ``rounds`` windows. The result names the intra-op threads,
        spinning and cores the figures depend on. Recorded and stored, not gated.
        ``slo``: a budget of calls per second by thread count, ``{4: "1500/s"}`` (at
        least the windows that can decide it are taken)."""
        __tracebackhide__ = hide_rejected
        import os

        from pytest_ortperf.measuring.throughput import check_levels, measure_levels
        from pytest_ortperf.results import ThroughputLevel, ThroughputResult
        from pytest_ortperf.stats import quantile

        if not isinstance(target, OrtSession):
            raise TypeError(
                f"throughput needs a session from ort_session, got {type(target).__name__}"
            )
        if sessions not in ("shared", "per_thread"):
            raise ValueError(f"sessions={sessions!r} is not one of 'shared', 'per_thread'")
        budget = seconds if seconds is not None else self._engine_config(target).budget_s
        levels = check_levels(concurrency, budget, rounds)
        budgets = self._slo("throughput", slo, [f"{n} threads" for n in levels])
        if budgets:
            from pytest_ortperf.gating.slo import min_values

            rounds = max(rounds, min_values(budgets, self._alpha))
        call, _, api, session = self._calls(target, feeds, api)
        name = name or f"throughput {session.label}"
        self._claim(name)
        pool = [session]

        def calls_for(n: int) -> list[Call]:
            if sessions == "shared":
                return [call] + [self._calls(session, feeds, api)[0] for _ in range(n - 1)]
            while len(pool) < n:
                pool.append(session.derive())
            return [call] + [self._calls(s, feeds, api)[0] for s in pool[1:n]]

        if not self.measured:  # smoke: every level runs briefly, nothing is recorded
            budget, rounds = 0.001, 1
        runs = measure_levels(calls_for, levels, seconds=budget, rounds=rounds)
        results = []
        for n in levels:
            windows = runs[n]
            spans = sorted(x * 1e-9 for w in windows for x in w.latencies_ns)
            if not spans:
                raise RuntimeError(f"throughput {name!r}: no call finished at {n} threads")
            results.append(
                ThroughputLevel(
                    concurrency=n,
                    calls=sum(w.calls for w in windows),
                    seconds=sum(w.seconds for w in windows),
                    rates=tuple(w.calls / w.seconds for w in windows if w.seconds > 0),
                    p50=quantile(spans, 0.5),
                    p90=quantile(spans, 0.9),
                    p99=quantile(spans, 0.99),
                    mean=sum(spans) / len(spans),
                )
            )
        settings = session.settings
        options = dict(settings.options)
        intra = int(options.get("intra_op_num_threads", settings.threads))
        inter = int(options.get("inter_op_num_threads", 1 if settings.threads == 1 else 0))
        affinity = getattr(os, "sched_getaffinity", None)
        cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
        result = ThroughputResult(
            test=self.test,
            name=name,
            api=api,
            levels=tuple(results),
            sessions=sessions,
            intra_op_threads=intra,
            inter_op_threads=inter,
            spinning=settings.spinning,
            cores=cores,
            measured=self.measured,
            session=session.info(),
        )
        rates = {f"{x.concurrency} threads": x.rates for x in result.levels}
        result = self._budgets(result, budgets, rates, "windows")
        self._record(result)
        return result


# --------------------------------------------------------------------------- remote sessions
# Sessions of ``ort_env`` run in worker processes (pytest_ortperf.remote.sessions measures them);
# here they are compared, ranked, profiled and recorded as local ones are.


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
    from pytest_ortperf.remote.sessions import Arms, arm_result

    ref_s, cand_s = Arms(reference, candidate, feeds, api).measure(config, stop, measured)
    if measured:
        warn_unsettled(name, ref_s, cand_s)
    return comparison(
        arm_result(test, f"{name}:reference", api, ref_s, reference, measured),
        arm_result(test, f"{name}:candidate", api, cand_s, candidate, measured),
        name, confidence, tuple(diffs),
    )  # fmt: skip


def check_outputs_ab(
    reference: RemoteSession,
    candidate: RemoteSession,
    feeds: Feeds,
    *,
    api: str,
    atol: float,
    rtol: float,
    what: str,
) -> list[OutputDiff]:
    """Both sessions' outputs on the same feeds, checked with the usual tolerances
    (:func:`pytest_ortperf.recorder.verify_outputs`)."""
    from pytest_ortperf.remote.sessions import Arms

    ref_out, cand_out = Arms(reference, candidate, feeds, api).outputs()
    return verify_outputs(
        reference.output_names, ref_out, cand_out, atol=atol, rtol=rtol, what=what
    )


PROFILE_ROUNDS = 2
"""Profiles taken of each arm, alternately (A B B A): the least disturbed one of each
(the lowest kernel time per run) is compared. One profile of a few runs of a small model
read 40% apart from the next one of the same session on a busy machine."""


PROFILE_SECONDS = 0.05
"""Seconds of (unprofiled) calls a profile covers at least: a few runs of a model of
microseconds say little (200 runs of a 13 us attention block read within 3-8% from one
profile to the next here, 20 runs within 40%)."""

MAX_PROFILE_RUNS = 1000


def profile_runs_for(seconds_per_call: float, minimum: int) -> int:
    """Runs of a profile: at least ``minimum``, and enough for :data:`PROFILE_SECONDS`."""
    if not seconds_per_call > 0:
        return minimum
    return max(minimum, min(MAX_PROFILE_RUNS, int(PROFILE_SECONDS / seconds_per_call)))


def remote_profile(session: RemoteSession, feeds: Feeds, *, runs: int, warmup: int = 3) -> Profile:
    """A profile of ``runs`` calls of a remote session, taken in its worker on a separate
    profiling session (outside any timed run), parsed here; its file is removed."""
    import tempfile

    from pytest_ortperf.profiling.parse import read_profile

    with tempfile.TemporaryDirectory(prefix="ortperf-profile-") as tmp:
        path = session.profile_to(Path(tmp), feeds, runs=runs, warmup=warmup)
        profile = read_profile(path, keep_events=True)
    profile.source = None
    return profile.select_runs(warmup)


def least_disturbed(
    sessions: Sequence[RemoteSession], feeds: Feeds, runs: int, rounds: int = PROFILE_ROUNDS
) -> list[Profile]:
    """Each session's profile with the lowest kernel time per run, of ``rounds`` taken in
    alternating order (each round reverses the previous one)."""
    from pytest_ortperf.remote.sessions import order

    taken: list[list[Profile]] = [[] for _ in sessions]
    for r in range(rounds):
        for i in order(r, len(sessions)):
            taken[i].append(remote_profile(sessions[i], feeds, runs=runs))
    return [min(profiles, key=lambda p: p.kernel_us_per_run()) for profiles in taken]


def profile_lines(
    reference: RemoteSession, candidate: RemoteSession, feeds: Feeds, *, runs: int = 20
) -> list[str]:
    """Which op types got slower or faster, reference -> candidate: each profiled in its
    own worker, outside the timed runs (time per run of each op type, and counts), the
    least disturbed of :data:`PROFILE_ROUNDS` profiles of each."""
    from pytest_ortperf.profiling.parse import compare_profiles

    base, other = least_disturbed([reference, candidate], feeds, runs)
    diff = compare_profiles(base, other)
    frame = diff.by_op
    lines = [f"kernel time per run: {diff.base_kernel_us:.1f} -> {diff.optimized_kernel_us:.1f} us"]
    moved = (frame["optimized_us"] - frame["base_us"]).abs().sort_values(ascending=False)
    for pos in moved.index[:8]:
        row = frame.loc[pos]
        before, after = float(row["base_us"]), float(row["optimized_us"])
        if before == after:
            continue
        change = f" ({after / before - 1:+.1%})" if before > 0 else " (new)"
        count = f", count {row['change']}" if row["change"] else ""
        lines.append(f"  {row['op_type']}: {before:.1f} -> {after:.1f} us/run{change}{count}")
    return lines


def compare_remote(
    recorder: Recorder,
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
    from pytest_ortperf.measuring.engine import EngineConfig
    from pytest_ortperf.remote.sessions import both_remote, engine_config, start_sessions

    ref, cand = both_remote(reference, candidate)
    label = name or f"{cand.label} vs {ref.label}"
    diffs: list[OutputDiff] = []
    if check_outputs:
        what = f"compare {label!r}"
        diffs = check_outputs_ab(ref, cand, feeds, api=api, atol=atol, rtol=rtol, what=what)
    entry = recorder._entry(label)

    def measure(engine: Any, stop: StopRule | None, fresh: bool) -> Comparison:
        # A baseline's later runs, a check's later pairs: each on a fresh pair of workers
        # (new processes, started side by side).
        pair = (ref, cand)
        if fresh:
            a, b = start_sessions([ref.derive, cand.derive])
            pair = (a, b)
        try:
            return measure_ab(
                *pair, feeds, config=engine_config(engine) or EngineConfig(), name=label,
                test=recorder.test, api=api, measured=recorder.measured, stop=stop,
                confidence=confidence, diffs=diffs,
            )  # fmt: skip
        finally:
            if fresh:
                for session in pair:
                    session.close()

    decision = recorder._judge_ab(recorder._decide(measure, entry), max_slowdown)
    recorder._record(decision.record, gated=True, verdicts=decision.verdicts, extra=decision.extra)

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

    recorder._enforce(label, decision, attribute)
    return decision.record


def rank_remote(
    recorder: Recorder,
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
    import pandas as pd

    from pytest_ortperf.measuring.engine import EngineConfig
    from pytest_ortperf.remote.sessions import (
        RemoteSession,
        arm_result,
        engine_config,
        interleave,
        shared_feeds,
    )
    from pytest_ortperf.remote.sessions import smoke as smoke_remote

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
        if recorder.measured:
            config = engine_config(recorder.engine) or EngineConfig()
            all_samples = interleave(arms, config, watch_cpu=watches_cpu(*arms))
            warn_unsettled(name, *all_samples)
        else:
            all_samples = smoke_remote(arms)
    rows = []
    for key, session, samples in zip(keys, arms, all_samples, strict=True):
        result = arm_result(recorder.test, f"{name}:{key}", api, samples, session, False)
        recorder._record(result)
        rows.append({"variant": key, "api": api, **result.summary.to_dict()})
    frame = pd.DataFrame(rows).sort_values("median", ignore_index=True)
    frame["ratio_to_fastest"] = frame["median"] / frame["median"].iloc[0]
    frame["measured"] = recorder.measured
    frame.attrs["measured"] = recorder.measured
    return frame
