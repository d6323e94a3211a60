"""Immutable result records and their plain-dict form.

Records travel as plain dicts (``to_dict``) through ``user_properties`` so that pytest-xdist
workers can hand them to the controller; ``record_from_dict`` rebuilds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ortperf.stats import Summary, summarize

USER_PROPERTY = "ortperf"
"""Name of the ``user_properties`` entry that carries one record."""


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
    one call and is not a measurement.
    """

    test: str
    name: str
    api: str
    samples: tuple[float, ...]
    calls_per_block: int
    measured: bool
    session: SessionInfo | None = None
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
            "summary": self.summary.to_dict(),
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

    ``ratio`` is the median of the paired block ratios candidate/reference (below 1: the
    candidate is faster), with a distribution-free interval ``[low, high]``.
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
        )


@dataclass(frozen=True)
class MemoryRecord:
    """Peak resident memory of the process during each measured call, in bytes."""

    test: str
    name: str
    api: str
    peak_bytes: tuple[int, ...]
    baseline_bytes: int
    method: str
    measured: bool

    kind = "memory"

    @property
    def peak(self) -> int:
        return max(self.peak_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "test": self.test,
            "name": self.name,
            "api": self.api,
            "peak_bytes": list(self.peak_bytes),
            "baseline_bytes": self.baseline_bytes,
            "method": self.method,
            "measured": self.measured,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryRecord:
        return cls(
            test=str(data["test"]),
            name=str(data["name"]),
            api=str(data["api"]),
            peak_bytes=tuple(int(x) for x in data["peak_bytes"]),
            baseline_bytes=int(data["baseline_bytes"]),
            method=str(data["method"]),
            measured=bool(data["measured"]),
        )


Record = LatencyResult | Comparison | MemoryRecord


def record_from_dict(data: Mapping[str, Any]) -> Record:
    """Rebuild a record from its ``to_dict`` form (kind-dispatched)."""
    kind = data.get("kind")
    if kind == LatencyResult.kind:
        return LatencyResult.from_dict(data)
    if kind == Comparison.kind:
        return Comparison.from_dict(data)
    if kind == MemoryRecord.kind:
        return MemoryRecord.from_dict(data)
    raise ValueError(f"unknown ortperf record kind {kind!r}")


def records_from_properties(properties: Sequence[tuple[str, object]]) -> list[Record]:
    """The records carried in a test report's ``user_properties``."""
    out: list[Record] = []
    for key, value in properties:
        if key == USER_PROPERTY and isinstance(value, Mapping):
            out.append(record_from_dict(value))
    return out
