"""The timing engine: warm-up, block calibration, budgets and interleaving.

A *block* is ``k`` back-to-back calls, with ``k`` calibrated so a block lasts about
``block_s``. Its calls are timed in :data:`BLOCK_GROUPS` groups, and a sample is the
block's median group in seconds per call: a call an interrupt or a page fault held up moves
the block's sample no more than any other call does. The clock is injectable
(``perf_counter_ns`` by default) so the logic is testable with a fake.

Preemption: a block's wall time also counts the time its thread spent waiting while another
process had the core. Each timed block therefore also reads the calling thread's CPU clock
(``thread_time_ns``, injectable too); a block whose CPU time is below
:data:`PREEMPTED_BELOW` of its wall time was *preempted* and is left out of the samples (an
interleaved round, when any of its blocks was), and the engine measures on until it has
``min_blocks`` clean ones, within the budget and cap rules. This holds only where the work
runs on the calling thread: an ORT session with one intra-op thread and no spinning. With
more threads the calling thread mostly waits for the pool, so its CPU time says nothing of
the work's; callers then pass ``watch_cpu=False`` (the recorder does) and every block is
kept, as before.

:class:`TimingEngine` is the one protocol the recorder times through: :class:`Engine` here,
and :class:`~pytest_ortperf.testing.ScriptedEngine`, which replays given samples.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pytest_ortperf.measuring.providers import warmup_bound

Call = Callable[[], object]
Clock = Callable[[], int]
StopRule = Callable[[Sequence[Sequence[float]]], bool]

CHECK_EVERY = 4
"""Rounds between two asks of an interleaved measurement's stop rule, up to 64 rounds; the
gap doubles with each doubling of the rounds past that (see :func:`asks_stop_rule`)."""

CAP_BUDGETS = 3.0
"""The hard cap of one measurement, in budgets: no block starts once ``CAP_BUDGETS *
budget_s`` plus ``warmup_s`` per arm have passed since the measurement began, even when
fewer than ``min_blocks`` have been taken (see :meth:`EngineConfig.cap_s`)."""

CAPPED_MIN_BLOCKS = 2
"""Timed blocks (rounds) a measurement takes however slow its calls: the statistics need
two samples."""

PREEMPTED_BELOW = 0.97
"""A timed block is *preempted* when its thread CPU time is less than this share of its wall
time: the thread was off the core for more than 3% of the block. Uninterrupted blocks of a
one-thread ORT session read 0.99 and above (the clock reads and the kernel's own work on
the thread count as its CPU time); a preemption lasts a scheduler time slice (milliseconds),
far more than 3% of a block."""

BLOCK_GROUPS = 9
"""A block's calls are timed in this many groups (one call each in a block of fewer), and
its sample is the median group's seconds per call. Single calls are heavy-tailed: of the
attention block's 0.3 ms calls, one in ten reads 1.3 times its block's median or more, and
a block's mean call carries them, where its median group does not. On the compares of the
docs' "What a block's sample should be" (calls of 2 us to 0.3 ms), nine groups read 30
rounds' ratio 1.7 to 3.7 times as precisely as the blocks' mean calls, quiet and beside
busy neighbours, and agreed with it within 0.4%; groups of 20 us read the faster calls
less precisely than the mean. A handful of clock readings a block cost nothing."""

NS = 1e-9


class WarmupWarning(UserWarning):
    """A target's block times had not settled when its warm-up bound ran out."""


def unsettled_warning(name: str) -> WarmupWarning:
    """The :class:`WarmupWarning` of target ``name``, in words."""
    return WarmupWarning(
        f"ortperf: {name!r}: block times had not settled when the warm-up bound ran out "
        "(the last blocks' times still differed); the first samples may "
        "include warm-up. Run the target a few times before measuring, or check for "
        "load on the machine"
    )


def settled(times: Sequence[float], window: int, tolerance: float) -> bool:
    """Whether the last ``window`` block times (seconds per call) agree: the largest is
    within ``tolerance`` of the smallest. Fewer than ``window`` times: not settled."""
    if window < 1 or len(times) < window:
        return False
    last = times[-window:]
    low = min(last)
    return max(last) - low <= tolerance * low


@dataclass(frozen=True)
class EngineConfig:
    """How long to measure. ``budget_s`` bounds the timed blocks of one measurement (for an
    interleaved measurement: all arms together); warm-up and calibration have their own
    bound, ``warmup_s``, per arm. Whatever ``min_blocks`` asks, a measurement starts no
    block past its hard cap, :meth:`cap_s`.

    ``block_s`` is 2 ms, shorter than a scheduler time slice (a few ms): a block that spans
    a slice boundary while other processes are runnable is preempted, and such blocks are
    dropped, so long blocks under load leave almost none. With two busy neighbours on two
    cores, 20 ms and 5 ms blocks were preempted 60-100% of the time, 2 ms blocks 8-19%
    (issue 10). Calls slower than a block are timed one per block."""

    budget_s: float = 1.0
    block_s: float = 0.002
    min_blocks: int = 5
    warmup_s: float = 0.1
    settle_tolerance: float = 0.05
    settle_blocks: int = 3
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
    """Seconds per call, one value per timed block of ``calls_per_block`` calls (its median
    group of calls, :meth:`Engine.time_block`).

    ``preempted`` counts the timed blocks (rounds, in an interleaved measurement) that a
    preemption interrupted; ``values`` leaves them out, unless fewer than
    :data:`CAPPED_MIN_BLOCKS` clean ones were taken before the hard cap: then ``values``
    holds every block and ``preempted_kept`` is True. ``watched`` says whether preemption
    was looked for at all (``watch_cpu``); when not, ``preempted`` is 0.
    """

    values: tuple[float, ...]
    calls_per_block: int
    preempted: int = 0
    watched: bool = False
    preempted_kept: bool = False
    control: Samples | None = None
    """The control workload's samples, paired by index, of a normalized measurement."""
    settled: bool = True
    """False when the warm-up bound ran out before the block times settled (see
    :meth:`Engine.warm_up`): the samples may still hold warm-up."""

    @property
    def blocks(self) -> int:
        """Timed blocks (rounds) taken, preempted ones included."""
        return len(self.values) + (0 if self.preempted_kept else self.preempted)

    @property
    def preempted_share(self) -> float:
        """Preempted blocks over all timed blocks (0.0 when none were taken)."""
        return self.preempted / self.blocks if self.blocks else 0.0


def asks_stop_rule(rounds: int, min_blocks: int) -> bool:
    """Whether an interleaved measurement asks its stop rule after ``rounds`` rounds: every
    :data:`CHECK_EVERY` rounds once ``min_blocks`` rounds are done, up to 64; then every 8
    up to 128, every 16 up to 256, and so on. Short blocks make many rounds: this keeps the
    number of looks (and the cost of the rule, which grows with the rounds) logarithmic."""
    step = CHECK_EVERY << max(0, (rounds // (8 * CHECK_EVERY)).bit_length() - 1)
    return rounds >= min_blocks and rounds % step == 0


class TimingEngine(Protocol):
    """What the recorder needs of a timing engine."""

    @property
    def clock(self) -> Clock:
        """Clock of smoke-mode calls (nanoseconds)."""
        ...

    def scaled(self, factor: float) -> TimingEngine:
        """The same engine with ``factor`` times the budget (the gate's confirmation)."""
        ...

    def for_providers(self, providers: Sequence[str]) -> TimingEngine:
        """The same engine with the warm-up bound of targets running on ``providers``."""
        ...

    def measure(
        self,
        call: Call,
        *,
        watch_cpu: bool = True,
        control: Call | None = None,
        should_stop: StopRule | None = None,
    ) -> Samples:
        """Samples of one target; with ``watch_cpu``, preempted blocks left out. With a
        ``control``, the target is measured interleaved with it (``Samples.control``), and
        ``should_stop`` sees ``[control, target]`` values."""
        ...

    def interleave(
        self,
        calls: Sequence[Call],
        *,
        should_stop: StopRule | None = None,
        watch_cpu: bool = True,
    ) -> list[Samples]:
        """Paired samples of several targets; ``should_stop`` may end the rounds early;
        with ``watch_cpu``, rounds with a preempted block left out."""
        ...


def config_of(engine: object) -> EngineConfig:
    """The :class:`EngineConfig` of a timing engine; the defaults for one without (a
    scripted engine), for what sizes itself from a config (single calls, throughput, the
    workers of remote sessions)."""
    config = getattr(engine, "config", None)
    return config if isinstance(config, EngineConfig) else EngineConfig()


class Engine:
    """Times zero-argument callables under an :class:`EngineConfig`.

    ``clock`` is the wall clock, ``cpu_clock`` the calling thread's CPU clock (both in
    nanoseconds). Without a ``cpu_clock``: ``thread_time_ns`` beside the default wall clock,
    and the wall clock itself beside an injected one, so that a fake wall clock alone sees
    no preemption.
    """

    def __init__(
        self,
        config: EngineConfig | None = None,
        clock: Clock = time.perf_counter_ns,
        cpu_clock: Clock | None = None,
    ):
        self.config = config or EngineConfig()
        self.clock = clock
        if cpu_clock is None:
            cpu_clock = time.thread_time_ns if clock is time.perf_counter_ns else clock
        self.cpu_clock = cpu_clock

    def scaled(self, factor: float) -> Engine:
        """The same engine with ``factor`` times the budget (the gate's confirmation)."""
        budget = self.config.budget_s * factor
        config = dataclasses.replace(self.config, budget_s=budget)
        return Engine(config, self.clock, self.cpu_clock)

    def for_providers(self, providers: Sequence[str]) -> Engine:
        """The same engine with a warm-up bound of at least the providers' own
        (:data:`pytest_ortperf.measuring.providers.WARMUP_BOUND_S`: 0.1 s on the CPU, 2 s on CUDA,
        60 s on TensorRT). A warm-up ends as soon as the block times settle."""
        bound = max(self.config.warmup_s, warmup_bound(providers))
        if bound == self.config.warmup_s:
            return self
        config = dataclasses.replace(self.config, warmup_s=bound)
        return type(self)(config, self.clock, self.cpu_clock)

    def time_block(self, call: Call, k: int) -> float:
        """Seconds per call of ``k`` back-to-back calls: the median of their groups'
        (:func:`group_sizes`)."""
        clock = self.clock
        sizes = group_sizes(k)
        marks = [clock()]
        for size in sizes:
            for _ in range(size):
                call()
            marks.append(clock())
        return (
            statistics.median(
                (end - begin) / size
                for begin, end, size in zip(marks[:-1], marks[1:], sizes, strict=True)
            )
            * NS
        )

    def timed_block(self, call: Call, k: int, watch_cpu: bool) -> tuple[float, bool]:
        """One timed block of a measurement (:meth:`time_block`): seconds per call, and
        whether the block was preempted, its thread CPU time below :data:`PREEMPTED_BELOW`
        of its wall time (never without ``watch_cpu``: the CPU clock is then not read)."""
        if not watch_cpu:
            return self.time_block(call, k), False
        c0, w0 = self.cpu_clock(), self.clock()
        per_call = self.time_block(call, k)
        wall_ns = self.clock() - w0
        cpu_ns = self.cpu_clock() - c0
        return per_call, cpu_ns < PREEMPTED_BELOW * wall_ns

    def calibrate(self, call: Call, *, deadline: int | None = None) -> int:
        """Warm ``call`` up and return ``k`` such that a block lasts about ``block_s``
        (:meth:`warm_up` without its verdict)."""
        return self.warm_up(call, deadline=deadline)[0]

    def warm_up(self, call: Call, *, deadline: int | None = None) -> tuple[int, bool]:
        """Warm ``call`` up: ``k`` such that a block lasts about ``block_s``, and whether
        the block times settled.

        The first call is never timed (lazy initialisation, arena growth, a TensorRT engine
        build); then ``k`` grows until a block reaches the target, and blocks are repeated
        until the last ``settle_blocks`` agree within ``settle_tolerance`` (settled) or the
        warm-up bound ``warmup_s`` is spent (not settled; a bound of 0 asks for no warm-up
        and claims nothing: settled). Past ``deadline`` (a clock reading), no further block
        starts: ``k`` comes from the blocks timed so far.
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
        times = [per_call]
        while (self.clock() - start) * NS < cfg.warmup_s and self._before(deadline):
            times.append(self.time_block(call, k))
            if settled(times, cfg.settle_blocks, cfg.settle_tolerance):
                return k, True
        return k, cfg.warmup_s == 0 or settled(times, cfg.settle_blocks, cfg.settle_tolerance)

    def _even_warmth(self, calls: Sequence[Call], ks: Sequence[int], deadline: int) -> None:
        """One untimed round each way (ABBA for two) after the arms' own warm-ups.

        The arms warm up in turn, so the first sits idle while the others warm and its
        caches go to them: its first timed blocks read slow, which biases short session
        pairs (a check's, stopped early) against long ones (a baseline's). The figures, on
        the attention block, are in the docs' "How a measurement is timed". Skipped where a
        call fills a block on its own (``k`` of 1): a call that long warms what it uses, and
        four of them could spend a small budget's cap."""
        if min(ks) < 2:
            return
        for order in (range(len(calls)), reversed(range(len(calls)))):
            for i in order:
                if not self._before(deadline):
                    return
                self.time_block(calls[i], ks[i])

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

    def _another(self, clean: int, done: int, start: int, deadline: int) -> bool:
        """Whether to time another block (round) after ``done`` of them, ``clean`` of them
        not preempted, timed since ``start``: until the budget is spent and ``min_blocks``
        clean ones are done, but none past the deadline once ``CAPPED_MIN_BLOCKS`` are done
        (clean or not: the cap holds however busy the machine)."""
        if done < CAPPED_MIN_BLOCKS:
            return True
        now = self.clock()
        if now >= deadline:
            return False
        return clean < self.config.min_blocks or (now - start) * NS < self.config.budget_s

    def measure(
        self,
        call: Call,
        *,
        watch_cpu: bool = True,
        control: Call | None = None,
        should_stop: StopRule | None = None,
    ) -> Samples:
        """Blocks of ``call`` until the budget is spent (at least ``min_blocks`` clean ones,
        unless the hard cap :meth:`EngineConfig.cap_s` comes first). With ``watch_cpu``,
        preempted blocks are left out (see :class:`Samples`); pass False where the work
        does not run on the calling thread. With a ``control`` workload, the rounds
        interleave it with ``call`` (a normalized latency): the result carries the
        control's samples, and ``should_stop`` is asked as by :meth:`interleave`."""
        if control is not None:
            reference, target = self.interleave(
                [control, call], should_stop=should_stop, watch_cpu=watch_cpu
            )
            return dataclasses.replace(target, control=reference)
        deadline = self._deadline(1)
        k, warm = self.warm_up(call, deadline=deadline)
        values: list[float] = []
        preempted: list[bool] = []
        clean = 0
        start = self.clock()
        while self._another(clean, len(preempted), start, deadline):
            value, interrupted = self.timed_block(call, k, watch_cpu)
            values.append(value)
            preempted.append(interrupted)
            clean += not interrupted
        return dataclasses.replace(_kept([values], [k], preempted, watch_cpu)[0], settled=warm)

    def interleave(
        self,
        calls: Sequence[Call],
        *,
        should_stop: StopRule | None = None,
        watch_cpu: bool = True,
    ) -> list[Samples]:
        """Blocks of every call, in rounds, in a shuffled order per round (ABBA for two).

        Round ``i`` gives one sample per call, so samples of different calls pair up by
        index and machine drift hits every arm alike. With ``watch_cpu``, a round any of
        whose blocks was preempted is left out of every arm (the pairs stay pairs), and
        rounds go on until ``min_blocks`` clean ones are done. ``should_stop(values_per_call)``
        is asked with the clean rounds, when their count is one :func:`asks_stop_rule` names:
        True ends the measurement before the budget is spent (the adaptive stop of
        the gate). The hard cap :meth:`EngineConfig.cap_s` ends it, at the end of a round,
        even before ``min_blocks`` rounds.
        """
        if len(calls) < 2:
            raise ValueError("interleave needs at least two calls")
        cfg = self.config
        deadline = self._deadline(len(calls))
        warmed = [self.warm_up(call, deadline=deadline) for call in calls]
        ks = [k for k, _ in warmed]
        self._even_warmth(calls, ks, deadline)
        rng = random.Random(cfg.seed)
        order = list(range(len(calls)))
        values: list[list[float]] = [[] for _ in calls]
        clean: list[list[float]] = [[] for _ in calls]
        preempted: list[bool] = []
        looked = False
        start = self.clock()
        while self._another(len(clean[0]), len(preempted), start, deadline):
            if len(calls) == 2:
                order = [0, 1] if len(preempted) % 2 == 0 else [1, 0]
            else:
                rng.shuffle(order)
            if looked and min(ks) > 1:
                # The stop rule's statistics evicted the arms' data, and the round's first
                # arm timed cold: in the gate's checks the round after a look read the ratio
                # 2.5% low (other A B rounds +1.7%, B A rounds -0.7%). One untimed call
                # each, the first arm last, restores a round's usual state.
                for i in reversed(order):
                    calls[i]()
            looked = False
            interrupted = False
            for i in order:
                value, hit = self.timed_block(calls[i], ks[i], watch_cpu)
                values[i].append(value)
                interrupted = interrupted or hit
            preempted.append(interrupted)
            if interrupted:
                continue
            for arm, arm_values in zip(clean, values, strict=True):
                arm.append(arm_values[-1])
            if should_stop is not None and asks_stop_rule(len(clean[0]), cfg.min_blocks):
                if should_stop(clean):
                    break
                looked = True
        kept = _kept(values, ks, preempted, watch_cpu)
        return [
            dataclasses.replace(samples, settled=warm)
            for samples, (_, warm) in zip(kept, warmed, strict=True)
        ]


@functools.lru_cache(maxsize=256)
def group_sizes(k: int) -> tuple[int, ...]:
    """The sizes of the groups a block of ``k`` calls is timed in: :data:`BLOCK_GROUPS` of
    them, as equal as may be (``k`` single calls where ``k`` is fewer)."""
    groups = max(1, min(k, BLOCK_GROUPS))
    small, extra = divmod(k, groups)
    return (small + 1,) * extra + (small,) * (groups - extra)


def keeps_preempted(rounds: int, dropped: int) -> bool:
    """Whether a measurement of ``rounds`` timed rounds (blocks), ``dropped`` of them
    preempted, keeps them all: where some were preempted and fewer than
    :data:`CAPPED_MIN_BLOCKS` were clean (:class:`Samples`)."""
    return dropped > 0 and rounds - dropped < CAPPED_MIN_BLOCKS


def _kept(
    values: Sequence[Sequence[float]], ks: Sequence[int], preempted: Sequence[bool], watched: bool
) -> list[Samples]:
    """The samples of each arm: ``values[arm][round]`` less the preempted rounds, or all of
    them where fewer than ``CAPPED_MIN_BLOCKS`` rounds were clean."""
    dropped = sum(preempted)
    kept_all = keeps_preempted(len(preempted), dropped)
    return [
        Samples(
            tuple(v for v, hit in zip(arm, preempted, strict=True) if kept_all or not hit),
            k,
            preempted=dropped,
            watched=watched,
            preempted_kept=kept_all,
        )
        for arm, k in zip(values, ks, strict=True)
    ]


def smoke(call: Call, clock: Clock = time.perf_counter_ns) -> Samples:
    """One call, for plain ``pytest`` runs: its duration is kept but is no measurement
    (no warm-up, one sample)."""
    t0 = clock()
    call()
    return Samples(((clock() - t0) * NS,), 1)
