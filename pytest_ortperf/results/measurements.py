"""The records of a measurement: what the session was (:class:`SessionInfo`), a latency,
a comparison of two arms, memory, and a cold start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_ortperf.results.codec import NO_SUMMARY, Decoded, session_dict, slo_dict
from pytest_ortperf.results.verdicts import SloVerdict
from pytest_ortperf.stats import Summary, summarize


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
class LatencyResult(Decoded):
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
    summary: Summary = field(init=False, repr=False, compare=False, default=NO_SUMMARY)

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
            "session": session_dict(self.session),
            "preempted": self.preempted,
            "preempted_kept": self.preempted_kept,
            "summary": self.summary.to_dict(),
            **(
                {}
                if self.control is None
                else {"control": self.control.to_dict(), "block_ratios": list(self.block_ratios)}
            ),
            **({"runs": list(self.runs)} if self.runs else {}),
            **slo_dict(self.slo),
        }


@dataclass(frozen=True)
class OutputDiff(Decoded):
    """Largest absolute and relative difference of one output, candidate vs reference."""

    output: str
    max_abs: float
    max_rel: float

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "max_abs": self.max_abs, "max_rel": self.max_rel}


@dataclass(frozen=True)
class Comparison(Decoded):
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


@dataclass(frozen=True)
class MemoryResult(Decoded):
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


COLD_START_FIGURES = ("create", "first_run", "new_shape")
"""The figures of a cold start, in the order they happen in each fresh process."""


@dataclass(frozen=True)
class ColdStartResult(Decoded):
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
    summaries: Mapping[str, Summary] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

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
            "session": session_dict(self.session),
            "summaries": {f: s.to_dict() for f, s in self.summaries.items()},
            **slo_dict(self.slo),
        }
