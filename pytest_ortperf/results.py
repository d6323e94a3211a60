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
ATTRIBUTION_PROPERTY = "ortperf-attribution"
"""Entry that carries the op types a regression's attribution found moving
(``{test, name, lines: [...]}``, the lines its failure message shows)."""
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


SLO_OUTCOMES = ("violated", "inconclusive", "met", "not_gated")
"""What a latency budget's verdict says (:mod:`pytest_ortperf.gating.slo`), most urgent
first; only ``violated`` fails a test."""


@dataclass(frozen=True)
class SloVerdict:
    """A latency budget (``slo=``) judged on one figure: its quantile's ``estimate`` and
    distribution-free bounds ``low``/``high`` at ``confidence`` (NaN or infinite where the
    values are too few), against ``budget`` (seconds; calls per second, a minimum, when
    ``floor``). ``n`` values of ``unit`` (calls, blocks, windows, launches), ``over`` of
    them on the wrong side of the budget (``over_preempted`` of those preempted); ``more``:
    how many more, all within the budget, would decide an inconclusive one. ``machine``:
    the machine class whose budget applied."""

    figure: str
    outcome: str
    budget: float
    floor: bool
    estimate: float
    low: float
    high: float
    n: int
    unit: str
    over: int
    over_preempted: int
    more: int
    confidence: float
    machine: str
    message: str

    @property
    def headroom(self) -> float:
        """The share of the budget left at the estimate (0.25: a quarter to spare; below
        0: over budget); NaN where not gated."""
        if not (math.isfinite(self.budget) and math.isfinite(self.estimate)) or not self.budget:
            return math.nan
        if self.floor:
            return self.estimate / self.budget - 1.0
        return 1.0 - self.estimate / self.budget

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: a missing bound or estimate (NaN, infinite) is None, as PostgreSQL's
        JSON and strict readers take no NaN."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["headroom"] = self.headroom  # derived, for readers of the JSON
        return {
            k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SloVerdict:
        def field_value(name: str) -> Any:
            value = data[name]
            floats = ("budget", "estimate", "low", "high", "confidence")
            return math.nan if value is None and name in floats else value

        return cls(**{name: field_value(name) for name in cls.__dataclass_fields__})


def slo_verdicts(data: Mapping[str, Any]) -> tuple[SloVerdict, ...]:
    """The ``slo`` verdicts of a record's dict (none in records written before budgets)."""
    return tuple(SloVerdict.from_dict(v) for v in data.get("slo") or ())


@dataclass(frozen=True)
class SessionInfo:
    """What a measured session was: model label and the settings that affect timings."""

    model: str
    providers: tuple[str, ...]
    optimization: str
    threads: int
    spinning: bool
    op_histogram: tuple[tuple[str, int], ...] = ()
    placement: tuple[tuple[str, str, str], ...] = ()
    """``(node, op type, provider)`` per node, sorted (empty where not recorded)."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "model": self.model,
            "providers": list(self.providers),
            "optimization": self.optimization,
            "threads": self.threads,
            "spinning": self.spinning,
            "op_histogram": dict(self.op_histogram),
        }
        if self.placement:
            out["placement"] = {name: [op, provider] for name, op, provider in self.placement}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionInfo:
        return cls(
            model=str(data["model"]),
            providers=tuple(data["providers"]),
            optimization=str(data["optimization"]),
            threads=int(data["threads"]),
            spinning=bool(data["spinning"]),
            op_histogram=tuple(sorted((str(k), int(v)) for k, v in data["op_histogram"].items())),
            placement=tuple(
                sorted((str(k), str(v[0]), str(v[1])) for k, v in data.get("placement", {}).items())
            ),
        )


@dataclass(frozen=True)
class LatencyResult:
    """Latency of one target: raw block samples and their summary, in seconds per call.

    ``measured`` is False in smoke mode (plain ``pytest``): then the single sample comes from
    one call and is not a measurement. ``preempted`` counts the timed blocks (rounds, for a
    comparison's arm) that a preemption interrupted: they are left out of ``samples``,
    unless fewer than two blocks were clean, when ``samples`` keeps them all and
    ``preempted_kept`` is True (see :class:`~pytest_ortperf.measuring.engine.Samples`).
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
    slo: tuple[SloVerdict, ...] = ()
    """Its latency budgets' verdicts (``slo=``; empty without a budget)."""
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
            **({"slo": [v.to_dict() for v in self.slo]} if self.slo else {}),
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
            slo=slo_verdicts(data),
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
    """Memory of one target, in bytes: the process's resident memory (RSS) while calling
    it, and ORT's own allocator figures where ORT reports them.

    - ``peak_bytes[i]``: the highest RSS of the whole process during call ``i``
      (:attr:`max_peak_bytes`: the highest of all). Process-wide: Python, other threads,
      everything loaded before (other tests, imports) and every allocator.
    - ``baseline_bytes``: the RSS just before the first call; :attr:`growth_bytes` per
      call and :attr:`max_growth_bytes` are the peaks above it: what the calls themselves
      allocated. ORT keeps its arena after the first run, so warm calls usually show none.
    - ``method``: ``"vmhwm"`` (the kernel's high-water mark, reset before each call:
      exact) or ``"sampling"`` (VmRSS polled by a thread: short peaks can be missed).
    - ``arena``: ORT's allocator figures from a short profile (the ``mem_*`` keys of
      ORT >= 1.32; empty on older versions or without a profile): ``in_use_peak_max``
      (peak bytes in use during a run: the arena-held weights plus the run's activations,
      :attr:`arena_peak_bytes`), ``arena_held_max`` (bytes the arena reserved) and
      ``bytes_in_use_max``.
    - ``test``, ``name``, ``api``: what ``ortperf.memory`` measured; ``measured`` is False
      in smoke mode (one call, not a measurement).

    Gated figures: ``memory.growth`` and ``memory.arena_peak``
    (:mod:`pytest_ortperf.gating.memory_rule`); the process peak is reported only.
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

    @property
    def max_growth_bytes(self) -> int:
        """The largest peak above the baseline (0 without calls)."""
        return max(self.growth_bytes, default=0)

    @property
    def arena_peak_bytes(self) -> int | None:
        """ORT's peak bytes in use during a run (None where ORT did not report it)."""
        return self.arena.get("in_use_peak_max")

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


COLD_START_FIGURES = ("create", "first_run", "new_shape")
"""The figures of a cold start, in the order they happen in each fresh process."""


@dataclass(frozen=True)
class ColdStartResult:
    """Cold start of one model: each launch a fresh Python process (nothing warm: imports,
    allocator, thread pools, caches), in seconds, one value per launch.

    ``create`` is the ``InferenceSession`` construction (graph load, optimization, kernel
    creation); ``first_run`` the first ``run`` on the feeds; ``new_shape`` the first run at
    another input shape after a few warm-up runs at the first (empty when the model has no
    dynamic dim to vary: ``new_shape_note`` says why); ``imports`` the import of
    onnxruntime and this package in the child (reported, not gated); ``shapes`` the input
    shapes of the first and of the new-shape run (``"X[1,10]"``). ``api`` is always
    ``"cold_start"``.
    """

    test: str
    name: str
    create: tuple[float, ...]
    first_run: tuple[float, ...]
    new_shape: tuple[float, ...] = ()
    imports: tuple[float, ...] = ()
    shapes: tuple[str, ...] = ()
    new_shape_note: str = ""
    measured: bool = True
    session: SessionInfo | None = None
    api: str = "cold_start"
    slo: tuple[SloVerdict, ...] = ()
    """Its latency budgets' verdicts (``slo=``; empty without a budget)."""
    summaries: Mapping[str, Summary] = field(init=False, repr=False, compare=False)

    kind = "cold_start"

    def __post_init__(self) -> None:
        summaries = {f: summarize(v) for f, v in self.figures.items()}
        object.__setattr__(self, "summaries", summaries)

    @property
    def figures(self) -> dict[str, tuple[float, ...]]:
        """The measured figures by name (``new_shape`` only where applicable)."""
        values = {"create": self.create, "first_run": self.first_run, "new_shape": self.new_shape}
        return {f: v for f, v in values.items() if v}

    @property
    def launches(self) -> int:
        return len(self.create)

    def median(self, figure: str = "create") -> float:
        """Median over launches of one figure (seconds)."""
        return self.summaries[figure].median

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "test": self.test,
            "name": self.name,
            "api": self.api,
            "create": list(self.create),
            "first_run": list(self.first_run),
            "new_shape": list(self.new_shape),
            "imports": list(self.imports),
            "shapes": list(self.shapes),
            "new_shape_note": self.new_shape_note,
            "measured": self.measured,
            "session": None if self.session is None else self.session.to_dict(),
            "summaries": {f: s.to_dict() for f, s in self.summaries.items()},
            **({"slo": [v.to_dict() for v in self.slo]} if self.slo else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ColdStartResult:
        session = data.get("session")

        def floats(key: str) -> tuple[float, ...]:
            return tuple(float(x) for x in data.get(key) or ())

        return cls(
            test=str(data["test"]),
            name=str(data["name"]),
            create=floats("create"),
            first_run=floats("first_run"),
            new_shape=floats("new_shape"),
            imports=floats("imports"),
            shapes=tuple(str(s) for s in data.get("shapes") or ()),
            new_shape_note=str(data.get("new_shape_note") or ""),
            measured=bool(data["measured"]),
            session=None if session is None else SessionInfo.from_dict(session),
            api=str(data.get("api") or "cold_start"),
            slo=slo_verdicts(data),
        )


# ---------------------------------------------------------------- per-call tails, throughput

TAIL_QUANTILES: Mapping[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999}
"""The quantiles of single calls every report shows, by label."""
MIN_TAIL_CALLS = 10
"""Calls that must lie beyond a quantile for it to be shown (p99 needs 1000 calls, p99.9
10000): fewer, and the figure is one or two stray calls."""


@dataclass(frozen=True)
class PerCallResult:
    """Single calls timed one by one (``ortperf.per_call``), for the latency tails.

    ``calls`` are the raw single-call times in seconds, timer included, in rounds of
    ``calls_per_round``; ``timer_cost`` is what the timer adds to each (the median of
    back-to-back empty timings), subtracted in :attr:`corrected` and every quantile.
    ``blocks`` are the seconds per call of the engine blocks measured in the same rounds
    (``calls_per_block`` calls each): :attr:`block_median` is the figure the gate's
    latencies use, beside the single calls' median. ``preempted``, ``preempted_kept`` and
    ``watched`` as for :class:`LatencyResult` (rounds, not blocks). ``reference``: the
    other arm of a tail comparison, measured interleaved with this one.
    """

    test: str
    name: str
    api: str
    calls: tuple[float, ...]
    timer_cost: float
    calls_per_round: int
    blocks: tuple[float, ...]
    calls_per_block: int
    measured: bool
    session: SessionInfo | None = None
    preempted: int = 0
    preempted_kept: bool = False
    watched: bool = False
    reference: PerCallResult | None = None
    slo: tuple[SloVerdict, ...] = ()
    """Its latency budgets' verdicts (``slo=``; empty without a budget)."""
    _ordered: tuple[float, ...] = field(init=False, repr=False, compare=False)

    kind = "per_call"

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError(f"per-call result {self.name!r} has no calls")
        object.__setattr__(self, "_ordered", tuple(sorted(self.corrected)))

    @property
    def corrected(self) -> tuple[float, ...]:
        """Seconds per single call less the timer's cost (never below 0)."""
        return tuple(max(0.0, x - self.timer_cost) for x in self.calls)

    @property
    def n(self) -> int:
        return len(self.calls)

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the corrected single calls (linear interpolation)."""
        from pytest_ortperf.stats import quantile

        return quantile(self._ordered, q)

    def beyond(self, q: float) -> int:
        """Calls above the ``q`` quantile (how much data the tail figure rests on)."""
        return int(self.n * (1.0 - q))

    @property
    def quantiles(self) -> dict[str, float | None]:
        """:data:`TAIL_QUANTILES` by label; None where fewer than :data:`MIN_TAIL_CALLS`
        calls lie beyond (the median is always given)."""
        return {
            label: self.quantile(q) if q == 0.5 or self.beyond(q) >= MIN_TAIL_CALLS else None
            for label, q in TAIL_QUANTILES.items()
        }

    @property
    def p50(self) -> float:
        return self.quantile(0.5)

    @property
    def p90(self) -> float:
        return self.quantile(0.9)

    @property
    def p99(self) -> float:
        return self.quantile(0.99)

    @property
    def p999(self) -> float:
        return self.quantile(0.999)

    @property
    def block_median(self) -> float:
        """Median seconds per call of the blocks timed beside the single calls."""
        from pytest_ortperf.stats import median

        return median(self.blocks) if self.blocks else math.nan

    @property
    def agreement(self) -> float:
        """Corrected single-call median over the block median, less 1 (0.01: 1% above)."""
        block = self.block_median
        return self.p50 / block - 1.0 if block > 0 else math.nan

    @property
    def round_mean_median(self) -> float:
        """The median over rounds of the mean corrected single call: like for like with
        :attr:`block_median` (a block's time per call is the mean of its calls, so on a
        skewed distribution the block median sits above the single-call median)."""
        from pytest_ortperf.stats import median

        return median([sum(r) / len(r) for r in self.rounds()])

    def rounds(self) -> list[tuple[float, ...]]:
        """The corrected single calls, one tuple per round (the tail rule resamples them)."""
        m, c = self.calls_per_round, self.corrected
        return [c[i : i + m] for i in range(0, len(c), m)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "test": self.test,
            "name": self.name,
            "api": self.api,
            "calls": list(self.calls),
            "timer_cost": self.timer_cost,
            "calls_per_round": self.calls_per_round,
            "blocks": list(self.blocks),
            "calls_per_block": self.calls_per_block,
            "measured": self.measured,
            "session": None if self.session is None else self.session.to_dict(),
            "preempted": self.preempted,
            "preempted_kept": self.preempted_kept,
            "watched": self.watched,
            # Derived, for readers of the JSON; from_dict recomputes them.
            "n": self.n,
            "quantiles": self.quantiles,
            "block_median": self.block_median,
            **({} if self.reference is None else {"reference": self.reference.to_dict()}),
            **({"slo": [v.to_dict() for v in self.slo]} if self.slo else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PerCallResult:
        session, reference = data.get("session"), data.get("reference")
        return cls(
            test=str(data["test"]),
            name=str(data["name"]),
            api=str(data["api"]),
            calls=tuple(float(x) for x in data["calls"]),
            timer_cost=float(data["timer_cost"]),
            calls_per_round=int(data["calls_per_round"]),
            blocks=tuple(float(x) for x in data["blocks"]),
            calls_per_block=int(data["calls_per_block"]),
            measured=bool(data["measured"]),
            session=None if session is None else SessionInfo.from_dict(session),
            preempted=int(data.get("preempted") or 0),
            preempted_kept=bool(data.get("preempted_kept", False)),
            watched=bool(data.get("watched", False)),
            reference=None if not reference else PerCallResult.from_dict(reference),
            slo=slo_verdicts(data),
        )


@dataclass(frozen=True)
class ThroughputLevel:
    """One level of concurrency: ``calls`` completed by ``concurrency`` threads in
    ``seconds`` (all rounds together), each round's calls per second in ``rates``, and the
    seconds per call each caller saw (``p50``, ``p90``, ``p99``, ``mean``)."""

    concurrency: int
    calls: int
    seconds: float
    rates: tuple[float, ...]
    p50: float
    p90: float
    p99: float
    mean: float

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "calls": self.calls,
            "seconds": self.seconds,
            "calls_per_s": self.calls_per_s,
            "rates": list(self.rates),
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "mean": self.mean,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ThroughputLevel:
        def number(key: str) -> float:
            value = data.get(key)
            return math.nan if value is None else float(value)

        return cls(
            concurrency=int(data["concurrency"]),
            calls=int(data["calls"]),
            seconds=float(data["seconds"]),
            rates=tuple(float(x) for x in data.get("rates") or ()),
            p50=number("p50"),
            p90=number("p90"),
            p99=number("p99"),
            mean=number("mean"),
        )


@dataclass(frozen=True)
class ThroughputResult:
    """Throughput of one model under concurrency (``ortperf.throughput``): one
    :class:`ThroughputLevel` per number of calling threads.

    ``sessions`` is ``shared`` (every thread calls one session) or ``per_thread`` (one
    session each). The threading the figures depend on is explicit: ``intra_op_threads``
    per session (0: onnxruntime's default, one per core), ``inter_op_threads``,
    ``spinning``, and ``cores``, the logical cores this process could use. Recorded and
    stored, not gated (README, "Throughput under concurrency")."""

    test: str
    name: str
    api: str
    levels: tuple[ThroughputLevel, ...]
    sessions: str
    intra_op_threads: int
    inter_op_threads: int
    spinning: bool
    cores: int
    measured: bool
    session: SessionInfo | None = None
    slo: tuple[SloVerdict, ...] = ()
    """Its latency budgets' verdicts (``slo=``; empty without a budget)."""

    kind = "throughput"

    def level(self, concurrency: int) -> ThroughputLevel:
        """The level of ``concurrency`` threads (KeyError naming the levels if none)."""
        for level in self.levels:
            if level.concurrency == concurrency:
                return level
        known = ", ".join(str(x.concurrency) for x in self.levels)
        raise KeyError(f"{self.name!r} has no level of {concurrency} threads (levels: {known})")

    @property
    def scaling(self) -> dict[int, float]:
        """Calls per second of each level over those of the fewest threads."""
        if not self.levels:
            return {}
        first = min(self.levels, key=lambda x: x.concurrency).calls_per_s
        return {x.concurrency: x.calls_per_s / first for x in self.levels}

    def busy_threads(self, concurrency: int) -> int:
        """Threads that compute at once at a level: callers times each session's intra-op
        threads (a shared session's pool is shared: then the pool's size, at least the
        callers)."""
        intra = self.intra_op_threads or self.cores
        if self.sessions == "shared":
            return max(concurrency, intra)
        return concurrency * intra

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "test": self.test,
            "name": self.name,
            "api": self.api,
            "levels": [x.to_dict() for x in self.levels],
            "sessions": self.sessions,
            "intra_op_threads": self.intra_op_threads,
            "inter_op_threads": self.inter_op_threads,
            "spinning": self.spinning,
            "cores": self.cores,
            "measured": self.measured,
            "session": None if self.session is None else self.session.to_dict(),
            **({"slo": [v.to_dict() for v in self.slo]} if self.slo else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ThroughputResult:
        session = data.get("session")
        return cls(
            test=str(data["test"]),
            name=str(data["name"]),
            api=str(data["api"]),
            levels=tuple(ThroughputLevel.from_dict(x) for x in data["levels"]),
            sessions=str(data["sessions"]),
            intra_op_threads=int(data["intra_op_threads"]),
            inter_op_threads=int(data["inter_op_threads"]),
            spinning=bool(data["spinning"]),
            cores=int(data["cores"]),
            measured=bool(data["measured"]),
            session=None if session is None else SessionInfo.from_dict(session),
            slo=slo_verdicts(data),
        )


Record = (
    LatencyResult | Comparison | MemoryResult | ColdStartResult | PerCallResult | ThroughputResult
)


RECORD_TYPES: dict[str, type[Record]] = {
    record_type.kind: record_type
    for record_type in (
        LatencyResult,
        Comparison,
        MemoryResult,
        ColdStartResult,
        PerCallResult,
        ThroughputResult,
    )
}
"""Every record type by its ``kind``: what :func:`record_from_dict` rebuilds and the store
keeps."""


def record_from_dict(data: Mapping[str, Any]) -> Record:
    """Rebuild a record from its ``to_dict`` form (kind-dispatched)."""
    kind = data.get("kind")
    record_type = RECORD_TYPES.get(str(kind))
    if record_type is not None:
        return record_type.from_dict(data)
    raise ValueError(f"unknown ortperf record kind {kind!r}")
