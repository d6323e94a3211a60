"""The ``ortperf`` fixture object: measures targets and records the results on the test."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pytest

from pytest_ortperf.gating.gate import Gate, GateFailure, failure_message
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
from pytest_ortperf.runapi import APIS, Call, OrtBinding, binding_call, make_call
from pytest_ortperf.stats import paired_ratio, ratio_of_blocks

if TYPE_CHECKING:
    import pandas as pd

    from pytest_ortperf.profiling.parse import Profile

Feeds = Mapping[str, np.ndarray[Any, Any]]
R = TypeVar("R", LatencyResult, Comparison)
Target = OrtSession | OrtBinding


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
    ) -> None:
        self.test = test
        self.measured = measured
        self.engine = engine
        self.gate = gate
        self.profile_arms = profile_arms
        """Profile both arms of each compare (outside the timed runs) and keep each op
        type's share of kernel time with the record: ``--ortperf-update`` stores them in
        the baseline, so a later regression can say which op types moved."""
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
        verdicts: Sequence[Verdict],
        confirmed: bool,
        attribution: Callable[[], list[str]] | None = None,
    ) -> None:
        if self.gate is None:
            return
        failing = self.gate.failing(verdicts)
        if failing:
            message = failure_message(name, failing, verdicts, confirmed)
            if attribution is not None and any(v.metric != "structure" for v in failing):
                message += "\n" + "\n".join(attribution())
            self.failures.append(message)

    def _calls(
        self, target: Target, feeds: Feeds | None, api: str | None
    ) -> tuple[Call, Callable[[], list[Any]], str, OrtSession]:
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
        (default ``run``)."""
        call, _, api, session = self._calls(target, feeds, api)
        name = name or session.label
        entry = self._entry(name)

        def measure(engine: TimingEngine) -> LatencyResult:
            samples = engine.measure(call) if self.measured else smoke(call, engine.clock)
            return LatencyResult(
                test=self.test,
                name=name,
                api=api,
                samples=samples.values,
                calls_per_block=samples.calls_per_block,
                measured=self.measured,
                session=session.info(),
            )

        result, verdicts, confirmed = self._judged(measure, entry)
        self._record(result, gated=True, verdicts=verdicts)
        self._enforce(name, verdicts, confirmed)
        return result

    def _judged(
        self, measure: Callable[[TimingEngine], R], entry: Mapping[str, Any] | None
    ) -> tuple[R, list[Verdict], bool]:
        """Measure, judge, and re-measure once at twice the budget before a regression."""
        result = measure(self.engine)
        if self.gate is None:
            return result, [], False
        verdicts = self.gate.judge(result.to_dict(), entry)
        if not self.gate.needs_confirmation(verdicts):
            return result, verdicts, False
        result = measure(self.engine.scaled(2.0))
        return result, self.gate.judge(result.to_dict(), entry), True

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
        median of the paired block ratios with its distribution-free interval.
        """
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
        stop: StopRule | None = self.gate.stop_rule(entry) if self.gate else None

        def measure(engine: TimingEngine) -> Comparison:
            if self.measured:
                ref_s, cand_s = engine.interleave([ref_call, cand_call], should_stop=stop)
            else:
                ref_s, cand_s = smoke(ref_call, engine.clock), smoke(cand_call, engine.clock)
            ratios = ratio_of_blocks(ref_s.values, cand_s.values)
            estimate = paired_ratio(ratios, confidence)
            return Comparison(
                test=self.test,
                name=label,
                api=api,
                reference=self._arm(reference, ref_s, label, "reference", api),
                candidate=self._arm(candidate, cand_s, label, "candidate", api),
                block_ratios=tuple(ratios),
                ratio=estimate.ratio,
                low=estimate.low,
                high=estimate.high,
                confidence=confidence,
                measured=self.measured,
                output_diffs=tuple(diffs),
            )

        result, verdicts, confirmed = self._judged(measure, entry)
        arms = {"reference": reference, "candidate": candidate}
        extra = {}
        if self.measured and self.profile_arms:
            from pytest_ortperf.profiling.attribution import op_shares

            extra[OP_SHARES] = {role: op_shares(s, feeds) for role, s in arms.items()}
        self._record(result, gated=True, verdicts=verdicts, extra=extra)

        def attribute() -> list[str]:
            from pytest_ortperf.profiling.attribution import attribution

            return attribution(arms, feeds, (entry or {}).get(OP_SHARES))

        self._enforce(label, verdicts, confirmed, attribute)
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

    def _arm(
        self, session: OrtSession, samples: Samples, label: str, role: str, api: str
    ) -> LatencyResult:
        return LatencyResult(
            test=self.test,
            name=f"{label}:{role}",
            api=api,
            samples=samples.values,
            calls_per_block=samples.calls_per_block,
            measured=self.measured,
            session=session.info(with_histogram=self.measured),
        )

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
        variant's ratio to the fastest. Outputs are checked against the first variant."""
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
        measured interleaved: one row per API, sorted by median, ratios to the fastest."""
        calls = {api: (make_call(session, feeds, api)[0], api, session) for api in APIS}
        return self._table(name, calls)

    def _table(self, name: str, calls: Mapping[str, tuple[Call, str, OrtSession]]) -> pd.DataFrame:
        import pandas as pd

        keys = list(calls)
        if self.measured:
            all_samples = self.engine.interleave([calls[k][0] for k in keys])
        else:
            all_samples = [smoke(calls[k][0], self.engine.clock) for k in keys]
        rows = []
        for key, samples in zip(keys, all_samples, strict=True):
            _, api, session = calls[key]
            result = LatencyResult(
                test=self.test,
                name=f"{name}:{key}",
                api=api,
                samples=samples.values,
                calls_per_block=samples.calls_per_block,
                measured=self.measured,
                session=session.info(),
            )
            self._record(result)
            rows.append({"variant": key, "api": api, **result.summary.to_dict()})
        frame = pd.DataFrame(rows).sort_values("median", ignore_index=True)
        frame["ratio_to_fastest"] = frame["median"] / frame["median"].iloc[0]
        return frame
