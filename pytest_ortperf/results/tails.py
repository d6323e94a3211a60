"""The records of single calls timed one by one (latency tails) and of throughput under
concurrency."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_ortperf.results.codec import Decoded, session_dict, slo_dict
from pytest_ortperf.results.measurements import SessionInfo
from pytest_ortperf.results.verdicts import SloVerdict

TAIL_QUANTILES: Mapping[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999}
"""The quantiles of single calls every report shows, by label."""
MIN_TAIL_CALLS = 10
"""Calls that must lie beyond a quantile for it to be shown (p99 needs 1000 calls, p99.9
10000): fewer, and the figure is one or two stray calls."""


@dataclass(frozen=True)
class PerCallResult(Decoded):
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
    _ordered: tuple[float, ...] = field(init=False, repr=False, compare=False, default=())

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
        """The median over rounds of the mean corrected single call: on a skewed
        distribution it sits above the single-call median and :attr:`block_median` (a
        block's median group of calls) by as much as the skew."""
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
            "session": session_dict(self.session),
            "preempted": self.preempted,
            "preempted_kept": self.preempted_kept,
            "watched": self.watched,
            # Derived, for readers of the JSON; from_dict recomputes them.
            "n": self.n,
            "quantiles": self.quantiles,
            "block_median": self.block_median,
            **({} if self.reference is None else {"reference": self.reference.to_dict()}),
            **slo_dict(self.slo),
        }


@dataclass(frozen=True)
class ThroughputLevel(Decoded):
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


@dataclass(frozen=True)
class ThroughputResult(Decoded):
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
            "session": session_dict(self.session),
            **slo_dict(self.slo),
        }
