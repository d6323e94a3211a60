"""The ``ortperf`` fixture object: measures targets and records the results on the test."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pytest

from pytest_ortperf.gating.gate import Decision, Gate, GateFailure, failure_message
from pytest_ortperf.measure import Samples, StopRule, TimingEngine, smoke
from pytest_ortperf.ort_session import OrtSession
from pytest_ortperf.results import (
    GATED,
    OP_SHARES,
    PROFILE_PROPERTY,
    USER_PROPERTY,
    VERDICTS_PROPERTY,
    Comparison,
    Judgement,
    LatencyResult,
    MemoryResult,
    OutputDiff,
    Record,
    Verdict,
)
from pytest_ortperf.runapi import APIS, Call, OrtBinding, binding_call, hide_rejected, make_call
from pytest_ortperf.stats import paired_ratio, ratio_of_blocks

if TYPE_CHECKING:
    import pandas as pd

    from pytest_ortperf.profiling.parse import Profile

Feeds = Mapping[str, np.ndarray[Any, Any]]
R = TypeVar("R", LatencyResult, Comparison)
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
    from pytest_ortperf.feeds import input_specs, make_feeds
    from pytest_ortperf.models import control

    session = OrtSession.create(control(), threads=threads, spinning=spinning, name=CONTROL_NAME)
    feeds = make_feeds(input_specs(session.sess))
    return make_call(session, feeds, "iobinding")[0], session


class OutputMismatch(AssertionError):
    """Candidate and reference outputs differ beyond the tolerances."""


def watches_cpu(*sessions: OrtSession) -> bool:
    """Whether the engine may tell preempted blocks by the calling thread's CPU time: only
    where ORT computes on that thread, i.e. every session runs on the CPU provider alone
    with one intra-op thread and no spinning. Elsewhere the thread mostly waits (for the
    intra-op pool, or a device), so its CPU time says nothing of the work's and every
    block is kept."""
    return all(
        s.settings.threads == 1
        and not s.settings.spinning
        and set(s.settings.providers) == {"CPUExecutionProvider"}
        and dict(s.settings.options).get("intra_op_num_threads", 1) == 1
        for s in sessions
    )


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
        elif isinstance(ref, np.ndarray) and ref.dtype.kind in "fc" and ref.size:
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
                message += "\n" + "\n".join(attribution())
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
        api = api or "run"
        if api not in APIS:
            raise ValueError(f"api={api!r} is not one of {', '.join(APIS)}")
        call, outputs = make_call(target, feeds, api)
        return call, outputs, api, target

    def latency(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        api: str | None = None,
        name: str | None = None,
    ) -> LatencyResult:
        """Seconds per call of a binding, or of a session with feeds through ``api``
        (default ``run``). Measured interleaved with the control workload when latencies
        are normalized (the default): the gate then judges target over control."""
        __tracebackhide__ = hide_rejected
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
                samples = engine.measure(
                    timed, watch_cpu=watch, control=control_call, should_stop=stop
                )
                if samples.control is not None:
                    control = self._result(
                        CONTROL_NAME, "iobinding", samples.control, control_session
                    )
            else:
                samples = engine.measure(timed, watch_cpu=watch)
            return dataclasses.replace(
                self._result(name, api, samples, timed_session), control=control
            )

        decision = self._decide(measure, entry)
        result = decision.record
        self._record(result, gated=True, verdicts=decision.verdicts)
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
            session=session.info(with_histogram=histogram),
            preempted=samples.preempted,
            preempted_kept=samples.preempted_kept,
        )

    def _decide(
        self,
        measure: Callable[[TimingEngine, StopRule | None, bool], R],
        entry: Mapping[str, Any] | None,
    ) -> Decision[R]:
        """Measure as the run asks: once, or as several runs on fresh sessions when taking a
        baseline, or through the gate (early stop, and a confirmation of what would fail)."""
        if self.gate is not None:
            return self.gate.decide(lambda e, stop: measure(e, stop, False), self.engine, entry)
        k = self.baseline_runs if self.measured else 1
        if k <= 1:
            return Decision(measure(self.engine, None, False), [])
        engine = self.engine.scaled(1.0 / k)
        return Decision(merge_runs([measure(engine, None, i > 0) for i in range(k)]), [])

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
    ) -> Comparison:
        """Candidate vs reference, measured interleaved; outputs checked first.

        The ratio is candidate/reference per call (below 1: the candidate is faster), the
        Hodges-Lehmann estimate of the paired block ratios with its distribution-free
        interval at ``confidence``.
        """
        __tracebackhide__ = hide_rejected
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
                ref_s, cand_s = engine.interleave(
                    list(calls), should_stop=stop, watch_cpu=watches_cpu(ref, cand)
                )
            else:
                ref_s, cand_s = smoke(calls[0], engine.clock), smoke(calls[1], engine.clock)
            return comparison(
                self._result(f"{label}:reference", api, ref_s, ref, self.measured),
                self._result(f"{label}:candidate", api, cand_s, cand, self.measured),
                label, confidence, tuple(diffs),
            )  # fmt: skip

        decision = self._decide(measure, entry)
        result, verdicts = decision.record, decision.verdicts
        arms = {"reference": reference, "candidate": candidate}
        extra = {}
        if self.measured and self.profile_arms:
            from pytest_ortperf.profiling.attribution import op_shares

            extra[OP_SHARES] = {role: op_shares(s, feeds) for role, s in arms.items()}
        self._record(result, gated=True, verdicts=verdicts, extra=extra)

        def attribute() -> list[str]:
            from pytest_ortperf.profiling.attribution import attribution

            return attribution(arms, feeds, (entry or {}).get(OP_SHARES))

        self._enforce(label, decision, attribute)
        return result

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
    ) -> MemoryResult:
        """Peak memory of the process during each of ``runs`` calls (Linux: the kernel's
        high-water mark, reset before each call where permitted). In smoke mode: one run."""
        from pytest_ortperf.profiling.memory import peak_memory

        call, _, api, session = self._calls(target, feeds, api)
        result = dataclasses.replace(
            peak_memory(call, runs=runs if self.measured else 1),
            test=self.test,
            name=name or session.label,
            api=api,
            measured=self.measured,
        )
        self._record(result)
        return result

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
        """The same model through every run API (see :mod:`pytest_ortperf.runapi`),
        measured interleaved: one row per API, sorted by median, ratios to the fastest.

        Its ``measured`` column (and ``frame.attrs["measured"]``) is False in smoke mode,
        where each API ran once: medians and ``ratio_to_fastest`` are then no
        measurement, as for the other results."""
        calls = {api: (make_call(session, feeds, api)[0], api, session) for api in APIS}
        return self._table(name, calls)

    def _table(self, name: str, calls: Mapping[str, tuple[Call, str, OrtSession]]) -> pd.DataFrame:
        import pandas as pd

        keys = list(calls)
        if self.measured:
            all_samples = self.engine.interleave(
                [calls[k][0] for k in keys],
                watch_cpu=watches_cpu(*(calls[k][2] for k in keys)),
            )
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
