"""The timing engine: warm-up, block calibration, budgets and interleaving.

A *block* is ``k`` back-to-back calls timed as one, with ``k`` calibrated so a block lasts
about ``block_s``; a sample is the block's time divided by ``k`` (seconds per call). The
clock is injectable (``perf_counter_ns`` by default) so the logic is testable with a fake.

:class:`TimingEngine` is the one protocol the recorder times through: :class:`Engine` here,
and :class:`~pytest_ortperf.testing.ScriptedEngine`, which replays given samples.
"""

from __future__ import annotations

import dataclasses
import math
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

CAP_BUDGETS = 3.0
"""The hard cap of one measurement, in budgets: no block starts once ``CAP_BUDGETS *
budget_s`` plus ``warmup_s`` per arm have passed since the measurement began, even when
fewer than ``min_blocks`` have been taken (see :meth:`EngineConfig.cap_s`)."""

CAPPED_MIN_BLOCKS = 2
"""Timed blocks (rounds) a measurement takes however slow its calls: the statistics need
two samples."""

NS = 1e-9


@dataclass(frozen=True)
class EngineConfig:
    """How long to measure. ``budget_s`` bounds the timed blocks of one measurement (for an
    interleaved measurement: all arms together); warm-up and calibration have their own
    bound, ``warmup_s``, per arm. Whatever ``min_blocks`` asks, a measurement starts no
    block past its hard cap, :meth:`cap_s`."""

    budget_s: float = 1.0
    block_s: float = 0.02
    min_blocks: int = 5
    warmup_s: float = 0.1
    settle_tolerance: float = 0.05
    max_calls_per_block: int = 1_000_000
    seed: int = 0

    def __post_init__(self) -> None:
        # ``not x > 0`` also refuses NaN; an infinite budget would never end.
        if not (self.budget_s > 0 and math.isfinite(self.budget_s)):
            raise ValueError(f"budget must be positive and finite, got {self.budget_s} s")
        if not (self.block_s > 0 and math.isfinite(self.block_s)):
            raise ValueError(f"block duration must be positive and finite, got {self.block_s} s")
        if not (self.warmup_s >= 0 and math.isfinite(self.warmup_s)):
            raise ValueError(f"warmup_s must be >= 0 and finite, got {self.warmup_s} s")
        if self.min_blocks < CAPPED_MIN_BLOCKS:
            raise ValueError(f"min_blocks must be >= 2, got {self.min_blocks}")

    def cap_s(self, arms: int = 1) -> float:
        """The hard cap of a measurement of ``arms`` targets: ``CAP_BUDGETS`` budgets plus
        the warm-up bound of every arm. No block starts past it (beyond each arm's first
        call, one calibration block and two timed rounds), so the measurement ends
        within it plus one round (a block per arm, or one call where a call is slower)."""
        return CAP_BUDGETS * self.budget_s + arms * self.warmup_s


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

    def calibrate(self, call: Call, *, deadline: int | None = None) -> int:
        """Warm ``call`` up and return ``k`` such that a block lasts about ``block_s``.

        The first call is never timed (lazy initialisation, arena growth); then ``k`` grows
        until a block reaches the target, and blocks are repeated until two in a row agree
        within ``settle_tolerance`` or the warm-up bound is spent. Past ``deadline`` (a
        clock reading), no further block starts: ``k`` comes from the blocks timed so far.
        """
        cfg = self.config
        call()
        start = self.clock()
        k = 1
        per_call = self.time_block(call, k)
        while (
            per_call * k < cfg.block_s / 2
            and k < cfg.max_calls_per_block
            and self._before(deadline)
        ):
            k = min(cfg.max_calls_per_block, max(2 * k, int(self._calls_per_block(per_call)) // 2))
            per_call = self.time_block(call, k)
        k = max(1, round(self._calls_per_block(per_call)))
        previous = per_call
        while (self.clock() - start) * NS < cfg.warmup_s and self._before(deadline):
            current = self.time_block(call, k)
            if abs(current - previous) <= cfg.settle_tolerance * previous:
                break
            previous = current
        return k

    def _calls_per_block(self, per_call: float) -> float:
        """Calls of ``per_call`` seconds that fill a block, at most ``max_calls_per_block``
        (bounded before any rounding: a huge ``block_s`` overflows no int)."""
        cfg = self.config
        return min(float(cfg.max_calls_per_block), cfg.block_s / max(per_call, NS))

    def _before(self, deadline: int | None) -> bool:
        return deadline is None or self.clock() < deadline

    def _deadline(self, arms: int) -> int:
        """The clock reading past which a measurement of ``arms`` targets starting now
        starts no block (:meth:`EngineConfig.cap_s`)."""
        return self.clock() + round(self.config.cap_s(arms) / NS)

    def _another(self, done: int, start: int, deadline: int) -> bool:
        """Whether to time another block (round) after ``done`` of them, timed since
        ``start``: until the budget is spent and ``min_blocks`` are done, but none past
        the deadline once ``CAPPED_MIN_BLOCKS`` are done."""
        if done < CAPPED_MIN_BLOCKS:
            return True
        now = self.clock()
        if now >= deadline:
            return False
        return done < self.config.min_blocks or (now - start) * NS < self.config.budget_s

    def measure(self, call: Call) -> Samples:
        """Blocks of ``call`` until the budget is spent (at least ``min_blocks``, unless
        the hard cap :meth:`EngineConfig.cap_s` comes first)."""
        deadline = self._deadline(1)
        k = self.calibrate(call, deadline=deadline)
        values: list[float] = []
        start = self.clock()
        while self._another(len(values), start, deadline):
            values.append(self.time_block(call, k))
        return Samples(tuple(values), k)

    def interleave(
        self, calls: Sequence[Call], *, should_stop: StopRule | None = None
    ) -> list[Samples]:
        """Blocks of every call, in rounds, in a shuffled order per round (ABBA for two).

        Round ``i`` gives one sample per call, so samples of different calls pair up by
        index and machine drift hits every arm alike. ``should_stop(values_per_call)`` is
        asked every ``CHECK_EVERY`` rounds once ``min_blocks`` rounds are done: True ends the
        measurement before the budget is spent (the adaptive stop of the gate). The hard
        cap :meth:`EngineConfig.cap_s` ends it, at the end of a round, even before
        ``min_blocks`` rounds.
        """
        if len(calls) < 2:
            raise ValueError("interleave needs at least two calls")
        cfg = self.config
        deadline = self._deadline(len(calls))
        ks = [self.calibrate(call, deadline=deadline) for call in calls]
        rng = random.Random(cfg.seed)
        order = list(range(len(calls)))
        values: list[list[float]] = [[] for _ in calls]
        start = self.clock()
        rounds = 0
        while self._another(rounds, start, deadline):
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
