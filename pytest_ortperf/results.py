"""Immutable result records, their plain-dict form, and the ``user_properties`` keys.

Records travel as plain dicts (``to_dict``) through ``user_properties`` so that pytest-xdist
workers can hand them to the controller; ``from_dict`` rebuilds them. The store and the
reports take the typed records; the gate and the baseline files read the ``to_dict`` form.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pytest_ortperf.stats import Summary, summarize

# The ``user_properties`` entries a test's report carries (all of them live here, so the
# xdist controller reads them without importing the measuring code).
USER_PROPERTY = "ortperf"
"""Entry that carries one record (``to_dict`` form)."""
VERDICTS_PROPERTY = "ortperf-verdicts"
"""Entry that carries the verdicts of one measurement (:meth:`Judgement.to_dict`)."""
PROFILE_PROPERTY = "ortperf-profile"
"""Entry that carries a per-op profile summary (``{test, name, by_op: [...]}``)."""
GATED = "gated"
"""Key set in a record's dict when it came from ``latency``/``compare`` (baseline-able)."""
OP_SHARES = "op_shares"
"""Key of a compare record's dict (and baseline entry) holding each arm's op-type shares."""


class Outcome(str, Enum):
    """What a verdict says about one metric. Members are declared in display order (most
    urgent first), which every report uses: see :attr:`rank`."""

    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"
    UNSTABLE = "unstable"
    """The measurement itself is not trustworthy (dependent blocks, most blocks preempted):
    it passes unless strict, and says what to do about the machine."""
    NEW = "new"
    IMPROVED = "improved"
    NOT_COMPARABLE = "not_comparable"
    OK = "ok"
    RECORDED = "recorded"
    """Not a verdict: a measurement that no gate judged (reports list it last)."""

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        """Position in display order (0 is shown first)."""
        return _OUTCOME_RANK[self]

    @property
    def needs_attention(self) -> bool:
        """Regressed, inconclusive or unstable: shown first, whether or not the test failed
        (inconclusive and unstable verdicts fail only under ``--ortperf-strict``)."""
        return self in (Outcome.REGRESSED, Outcome.INCONCLUSIVE, Outcome.UNSTABLE)


_OUTCOME_RANK = {outcome: i for i, outcome in enumerate(Outcome)}


@dataclass(frozen=True)
class Verdict:
    """The judgement of one metric against its baseline.

    ``change`` is ``current / baseline - 1`` (``current`` is the baseline scaled by the
    estimated change, so the identity is exact); ``low``/``high`` bound the change at
    confidence ``1 - 2 * alpha``. ``p_value`` is the one-sided p-value in the direction of the
    estimate (None for structure and for verdicts without a test).
    """

    metric: str
    outcome: Outcome
    baseline: float
    current: float
    change: float
    low: float
    high: float
    threshold: float
    alpha: float
    p_value: float | None
    n: int
    message: str

    def failed(self, strict: bool = False) -> bool:
        """Regressed always fails; inconclusive, unstable and new only under ``strict``."""
        if self.outcome is Outcome.REGRESSED:
            return True
        if self.outcome in (Outcome.INCONCLUSIVE, Outcome.UNSTABLE, Outcome.NEW):
            return strict
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "outcome": self.outcome.value,
            "baseline": self.baseline,
            "current": self.current,
            "change": self.change,
            "low": self.low,
            "high": self.high,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "p_value": self.p_value,
            "n": self.n,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        p = data.get("p_value")

        def number(key: str) -> float:
            value = data.get(key)
            return math.nan if value is None else float(value)  # JSON writes NaN as null

        return cls(
            metric=str(data["metric"]),
            outcome=Outcome(data["outcome"]),
            baseline=number("baseline"),
            current=number("current"),
            change=number("change"),
            low=number("low"),
            high=number("high"),
            threshold=float(data["threshold"]),
            alpha=float(data["alpha"]),
            p_value=None if p is None else float(p),
            n=int(data["n"]),
            message=str(data["message"]),
        )


@dataclass(frozen=True)
class Judgement:
    """The verdicts of one measurement (``test``, ``name``) of a gated run."""

    test: str
    name: str
    verdicts: tuple[Verdict, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "name": self.name,
            "verdicts": [v.to_dict() for v in self.verdicts],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Judgement:
        return cls(
            test=str(data["test"]),
            name=str(data["name"]),
            verdicts=tuple(Verdict.from_dict(v) for v in data["verdicts"]),
        )


@dataclass(frozen=True)
class SessionInfo:
    """What a measured session was: model label and the settings that affect timings."""

    model: str
    providers: tuple[str, ...]
    optimization: str
    threads: int
    spinning: bool
    op_histogram: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "providers": list(self.providers),
            "optimization": self.optimization,
            "threads": self.threads,
            "spinning": self.spinning,
            "op_histogram": dict(self.op_histogram),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionInfo:
        return cls(
            model=str(data["model"]),
            providers=tuple(data["providers"]),
            optimization=str(data["optimization"]),
            threads=int(data["threads"]),
            spinning=bool(data["spinning"]),
            op_histogram=tuple(sorted((str(k), int(v)) for k, v in data["op_histogram"].items())),
        )


@dataclass(frozen=True)
class LatencyResult:
    """Latency of one target: raw block samples and their summary, in seconds per call.

    ``measured`` is False in smoke mode (plain ``pytest``): then the single sample comes from
    one call and is not a measurement. ``preempted`` counts the timed blocks (rounds, for a
    comparison's arm) that a preemption interrupted: they are left out of ``samples``,
    unless fewer than two blocks were clean, when ``samples`` keeps them all and
    ``preempted_kept`` is True (see :class:`~pytest_ortperf.measure.Samples`).
    """

    test: str
    name: str
    api: str
    samples: tuple[float, ...]
    calls_per_block: int
    measured: bool
    session: SessionInfo | None = None
    preempted: int = 0
    preempted_kept: bool = False
    control: LatencyResult | None = None
    """The control workload measured interleaved with the target (a normalized latency:
    its gate judges ``block_ratios``, target over control); None for an absolute one."""
    runs: tuple[int, ...] = ()
    """Block counts of the independent runs the samples come from, in order (several
    when ``--ortperf-update`` took a baseline; empty: one run)."""
    summary: Summary = field(init=False, repr=False, compare=False)

    kind = "latency"

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", summarize(self.samples))

    @property
    def median(self) -> float:
        return self.summary.median

    @property
    def mean(self) -> float:
        return self.summary.mean

    @property
    def std(self) -> float:
        return self.summary.std

    @property
    def min(self) -> float:
        return self.summary.min

    @property
    def max(self) -> float:
        return self.summary.max

    @property
    def p90(self) -> float:
        return self.summary.p90

    @property
    def p99(self) -> float:
        return self.summary.p99

    @property
    def iqr(self) -> float:
        return self.summary.iqr

    @property
    def n(self) -> int:
        return self.summary.n

    @property
    def block_ratios(self) -> tuple[float, ...]:
        """Target over control, per round (empty without a control)."""
        if self.control is None:
            return ()
        return tuple(t / c for t, c in zip(self.samples, self.control.samples, strict=True))

    @property
    def preempted_share(self) -> float:
        """Preempted blocks over all timed blocks, kept or not (0.0 without blocks)."""
        blocks = len(self.samples) + (0 if self.preempted_kept else self.preempted)
        return self.preempted / blocks if blocks else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "test": self.test,
            "name": self.name,
            "api": self.api,
            "samples": list(self.samples),
            "calls_per_block": self.calls_per_block,
            "measured": self.measured,
            "session": None if self.session is None else self.session.to_dict(),
            "preempted": self.preempted,
            "preempted_kept": self.preempted_kept,
            "summary": self.summary.to_dict(),
            **(
                {}
                if self.control is None
                else {"control": self.control.to_dict(), "block_ratios": list(self.block_ratios)}
            ),
            **({"runs": list(self.runs)} if self.runs else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyResult:
        session = data.get("session")
        return cls(
            test=str(data["test"]),
            name=str(data["name"]),
            api=str(data["api"]),
            samples=tuple(float(x) for x in data["samples"]),
            calls_per_block=int(data["calls_per_block"]),
            measured=bool(data["measured"]),
            session=None if session is None else SessionInfo.from_dict(session),
            # Records written before preemption was detected have neither key.
            preempted=int(data.get("preempted") or 0),
            preempted_kept=bool(data.get("preempted_kept", False)),
            control=LatencyResult.from_dict(data["control"]) if data.get("control") else None,
            runs=tuple(int(x) for x in data.get("runs") or ()),
        )


@dataclass(frozen=True)
class OutputDiff:
    """Largest absolute and relative difference of one output, candidate vs reference."""

    output: str
    max_abs: float
    max_rel: float

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "max_abs": self.max_abs, "max_rel": self.max_rel}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OutputDiff:
        return cls(str(data["output"]), float(data["max_abs"]), float(data["max_rel"]))


@dataclass(frozen=True)
class Comparison:
    """Candidate vs reference measured interleaved.

    ``ratio`` is the Hodges-Lehmann estimate of the paired block ratios candidate/reference
    (below 1: the candidate is faster; the gate's estimator), with its distribution-free
    interval ``[low, high]`` at ``confidence``. ``runs`` as for :class:`LatencyResult`.
    """

    test: str
    name: str
    api: str
    reference: LatencyResult
    candidate: LatencyResult
    block_ratios: tuple[float, ...]
    ratio: float
    low: float
    high: float
    confidence: float
    measured: bool
    output_diffs: tuple[OutputDiff, ...] = ()
    runs: tuple[int, ...] = ()

    kind = "compare"

    @property
    def speedup(self) -> float:
        """Reference time over candidate time (above 1: the candidate is faster)."""
        return 1.0 / self.ratio

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "test": self.test,
            "name": self.name,
            "api": self.api,
            "reference": self.reference.to_dict(),
            "candidate": self.candidate.to_dict(),
            "block_ratios": list(self.block_ratios),
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "measured": self.measured,
            "output_diffs": [d.to_dict() for d in self.output_diffs],
            **({"runs": list(self.runs)} if self.runs else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        return cls(
            test=str(data["test"]),
            name=str(data["name"]),
            api=str(data["api"]),
            reference=LatencyResult.from_dict(data["reference"]),
            candidate=LatencyResult.from_dict(data["candidate"]),
            block_ratios=tuple(float(x) for x in data["block_ratios"]),
            ratio=float(data["ratio"]),
            low=float(data["low"]),
            high=float(data["high"]),
            confidence=float(data["confidence"]),
            measured=bool(data["measured"]),
            output_diffs=tuple(OutputDiff.from_dict(d) for d in data["output_diffs"]),
            runs=tuple(int(x) for x in data.get("runs") or ()),
        )


@dataclass(frozen=True)
class MemoryResult:
    """Peak resident memory (RSS) of this process while calling a function, in bytes.

    ``peak_bytes[i]`` is the highest RSS reached during call ``i``, ``baseline_bytes`` the
    RSS before the first call. This is process-wide memory: it includes Python, other
    threads and every allocator; memory ORT keeps in its arena after the first call is not
    freed, so later calls usually show no growth. ``method`` is ``"vmhwm"`` (kernel
    high-water mark, exact) or ``"sampling"`` (VmRSS polled by a thread: short peaks can be
    missed). ``arena`` holds ORT's own allocator figures from a profile's ``mem_*`` keys
    (ORT >= 1.32), e.g. ``in_use_peak_max``, when a profile was given. ``test``, ``name``
    and ``api`` say what was measured when ``ortperf.memory`` recorded it.
    """

    peak_bytes: tuple[int, ...]
    baseline_bytes: int
    method: str
    arena: Mapping[str, int] = field(default_factory=dict)
    test: str = ""
    name: str = ""
    api: str = "call"
    measured: bool = True

    kind = "memory"

    @property
    def max_peak_bytes(self) -> int:
        return max(self.peak_bytes) if self.peak_bytes else self.baseline_bytes

    @property
    def growth_bytes(self) -> tuple[int, ...]:
        """Peak above the baseline, per call."""
        return tuple(max(0, p - self.baseline_bytes) for p in self.peak_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "test": self.test,
            "name": self.name,
            "api": self.api,
            "peak_bytes": list(self.peak_bytes),
            "baseline_bytes": self.baseline_bytes,
            "method": self.method,
            "arena": dict(self.arena),
            "measured": self.measured,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryResult:
        return cls(
            peak_bytes=tuple(int(x) for x in data["peak_bytes"]),
            baseline_bytes=int(data["baseline_bytes"]),
            method=str(data["method"]),
            arena={str(k): int(v) for k, v in (data.get("arena") or {}).items()},
            test=str(data["test"]),
            name=str(data["name"]),
            api=str(data["api"]),
            measured=bool(data["measured"]),
        )


Record = LatencyResult | Comparison | MemoryResult


def record_from_dict(data: Mapping[str, Any]) -> Record:
    """Rebuild a record from its ``to_dict`` form (kind-dispatched)."""
    kind = data.get("kind")
    if kind == LatencyResult.kind:
        return LatencyResult.from_dict(data)
    if kind == Comparison.kind:
        return Comparison.from_dict(data)
    if kind == MemoryResult.kind:
        return MemoryResult.from_dict(data)
    raise ValueError(f"unknown ortperf record kind {kind!r}")
