"""The timing engine: warm-up, block calibration, budgets and interleaving.

A *block* is ``k`` back-to-back calls timed as one, with ``k`` calibrated so a block lasts
about ``block_s``; a sample is the block's time divided by ``k`` (seconds per call). The
clock is injectable (``perf_counter_ns`` by default) so the logic is testable with a fake.

:class:`TimingEngine` is the one protocol the recorder times through: :class:`Engine` here,
and :class:`~pytest_ortperf.testing.ScriptedEngine`, which replays given samples.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

Call = Callable[[], object]
Clock = Callable[[], int]
StopRule = Callable[[Sequence[Sequence[float]]], bool]

CHECK_EVERY = 4
"""Rounds between two asks of an interleaved measurement's stop rule."""

NS = 1e-9


@dataclass(frozen=True)
class EngineConfig:
    """How long to measure. ``budget_s`` bounds the timed blocks of one measurement (for an
    interleaved measurement: all arms together); warm-up and calibration have their own
    bound, ``warmup_s``, per arm."""

    budget_s: float = 1.0
    block_s: float = 0.02
    min_blocks: int = 5
    warmup_s: float = 0.1
    settle_tolerance: float = 0.05
    max_calls_per_block: int = 1_000_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.budget_s <= 0:
            raise ValueError(f"budget must be positive, got {self.budget_s} s")
        if self.block_s <= 0:
            raise ValueError(f"block duration must be positive, got {self.block_s} s")
        if self.min_blocks < 2:
            raise ValueError(f"min_blocks must be >= 2, got {self.min_blocks}")


@dataclass(frozen=True)
class Samples:
    """Seconds per call, one value per timed block of ``calls_per_block`` calls."""

    values: tuple[float, ...]
    calls_per_block: int


def asks_stop_rule(rounds: int, min_blocks: int) -> bool:
    """Whether an interleaved measurement asks its stop rule after ``rounds`` rounds: every
    :data:`CHECK_EVERY` rounds once ``min_blocks`` rounds are done."""
    return rounds >= min_blocks and rounds % CHECK_EVERY == 0


class TimingEngine(Protocol):
    """What the recorder needs of a timing engine."""

    @property
    def clock(self) -> Clock:
        """Clock of smoke-mode calls (nanoseconds)."""
        ...

    def scaled(self, factor: float) -> TimingEngine:
        """The same engine with ``factor`` times the budget (the gate's confirmation)."""
        ...

    def measure(self, call: Call) -> Samples:
        """Samples of one target."""
        ...

    def interleave(
        self, calls: Sequence[Call], *, should_stop: StopRule | None = None
    ) -> list[Samples]:
        """Paired samples of several targets; ``should_stop`` may end the rounds early."""
        ...


class Engine:
    """Times zero-argument callables under an :class:`EngineConfig`."""

    def __init__(self, config: EngineConfig | None = None, clock: Clock = time.perf_counter_ns):
        self.config = config or EngineConfig()
        self.clock = clock

    def scaled(self, factor: float) -> Engine:
        """The same engine with ``factor`` times the budget (the gate's confirmation)."""
        budget = self.config.budget_s * factor
        return Engine(dataclasses.replace(self.config, budget_s=budget), self.clock)

    def time_block(self, call: Call, k: int) -> float:
        """Seconds per call of ``k`` back-to-back calls."""
        clock = self.clock
        t0 = clock()
        for _ in range(k):
            call()
        return (clock() - t0) * NS / k

    def calibrate(self, call: Call) -> int:
        """Warm ``call`` up and return ``k`` such that a block lasts about ``block_s``.

        The first call is never timed (lazy initialisation, arena growth); then ``k`` grows
        until a block reaches the target, and blocks are repeated until two in a row agree
        within ``settle_tolerance`` or the warm-up bound is spent.
        """
        cfg = self.config
        call()
        start = self.clock()
        k = 1
        per_call = self.time_block(call, k)
        while per_call * k < cfg.block_s / 2 and k < cfg.max_calls_per_block:
            k = min(cfg.max_calls_per_block, max(2 * k, int(cfg.block_s / max(per_call, NS)) // 2))
            per_call = self.time_block(call, k)
        k = max(1, min(cfg.max_calls_per_block, round(cfg.block_s / max(per_call, NS))))
        previous = per_call
        while (self.clock() - start) * NS < cfg.warmup_s:
            current = self.time_block(call, k)
            if abs(current - previous) <= cfg.settle_tolerance * previous:
                break
            previous = current
        return k

    def measure(self, call: Call) -> Samples:
        """Blocks of ``call`` until the budget is spent (at least ``min_blocks``)."""
        cfg = self.config
        k = self.calibrate(call)
        values: list[float] = []
        start = self.clock()
        while len(values) < cfg.min_blocks or (self.clock() - start) * NS < cfg.budget_s:
            values.append(self.time_block(call, k))
        return Samples(tuple(values), k)

    def interleave(
        self, calls: Sequence[Call], *, should_stop: StopRule | None = None
    ) -> list[Samples]:
        """Blocks of every call, in rounds, in a shuffled order per round (ABBA for two).

        Round ``i`` gives one sample per call, so samples of different calls pair up by
        index and machine drift hits every arm alike. ``should_stop(values_per_call)`` is
        asked every ``CHECK_EVERY`` rounds once ``min_blocks`` rounds are done: True ends the
        measurement before the budget is spent (the adaptive stop of the gate).
        """
        if len(calls) < 2:
            raise ValueError("interleave needs at least two calls")
        cfg = self.config
        ks = [self.calibrate(call) for call in calls]
        rng = random.Random(cfg.seed)
        order = list(range(len(calls)))
        values: list[list[float]] = [[] for _ in calls]
        start = self.clock()
        rounds = 0
        while rounds < cfg.min_blocks or (self.clock() - start) * NS < cfg.budget_s:
            if len(calls) == 2:
                order = [0, 1] if rounds % 2 == 0 else [1, 0]
            else:
                rng.shuffle(order)
            for i in order:
                values[i].append(self.time_block(calls[i], ks[i]))
            rounds += 1
            if (
                should_stop is not None
                and asks_stop_rule(rounds, cfg.min_blocks)
                and should_stop(values)
            ):
                break
        return [Samples(tuple(v), k) for v, k in zip(values, ks, strict=True)]


def smoke(call: Call, clock: Clock = time.perf_counter_ns) -> Samples:
    """One call, for plain ``pytest`` runs: its duration is kept but is no measurement
    (no warm-up, one sample)."""
    t0 = clock()
    call()
    return Samples(((clock() - t0) * NS,), 1)
