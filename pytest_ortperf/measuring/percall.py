"""Single-call timing: every call timed on its own, for the tails of the latency distribution.

The engine (:mod:`pytest_ortperf.measuring.engine`) times *blocks* of back-to-back calls, each
sample a block's median group of calls: their medians are what the gate judges, and they
hide the slow single call. Here each call is
timed alone (``t0 = clock(); call(); t1 = clock()``), and what the timer itself adds is
measured and subtracted: the median of back-to-back empty timings (``t0 = clock(); t1 =
clock()``), which span the same two clock calls with nothing between them.

A measurement goes in *rounds*. Each round times, for every target in turn (ABBA order for
two), one engine block of ``k`` calls (``k`` calibrated so a block lasts ``block_s``, as the
engine does) and then ``m`` single calls: ``k`` itself, lowered where need be so that
``max_calls`` holds twice the rounds the slowest target needs (``min_calls``, in at least
``min_rounds`` rounds), but never below the slowest target's own ``m``. The blocks give a
block median measured beside the single calls, under the same conditions: the timer-cost
correction is checked against it (:attr:`PerCallSamples.block_median`). A round whose block
or single calls were preempted (thread CPU time below
:data:`~pytest_ortperf.measuring.engine.PREEMPTED_BELOW` of the wall time, looked for only with
``watch_cpu``) is left out of every target, as the engine does: the
tails are those of the model's own work on an undisturbed thread, not of the neighbours'.

Rounds go on until every target has ``min_calls`` clean single calls in ``min_rounds``
clean rounds and the budget is spent, or the hard cap ``cap_budgets * budget_s`` has
passed with ``min_rounds`` clean rounds taken (twice the cap without them). ``max_calls``
bounds the single calls *taken* per target, preempted rounds included: no round starts
that would pass it.

A *sized* measurement (``sized=True``: a tail verdict that needs ``min_calls`` and
``min_rounds``) stretches its cap to twice what they take at the pace of its *kept* rounds
so far (rounds lost to a busy machine's preemptions are made up for), up to
:data:`SIZED_CAP_BUDGETS` budgets. When that cannot hold them it says so with a
:class:`PerCallWarning`: at once when even undisturbed rounds would not fit, else when it
stops short (the verdict is then likely inconclusive, and says why).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_ortperf.measuring.engine import (
    NS,
    PREEMPTED_BELOW,
    Call,
    Clock,
    Engine,
    EngineConfig,
    keeps_preempted,
)
from pytest_ortperf.values import check_count

TIMER_PROBES = 2001
"""Empty timings whose median is the timer's cost (taken before and after the rounds)."""


def timer_cost_ns(clock: Clock = time.perf_counter_ns, probes: int = TIMER_PROBES) -> float:
    """The timer's own cost in nanoseconds: the median of ``probes`` back-to-back empty
    timings ``t0 = clock(); t1 = clock()`` (the very statements that frame a timed call)."""
    if probes < 1:
        raise ValueError(f"probes must be >= 1, got {probes}")
    spans = [0] * probes
    for i in range(probes):
        t0 = clock()
        t1 = clock()
        spans[i] = t1 - t0
    spans.sort()
    return float(spans[probes // 2])


MAX_CALLS = 200_000
"""The most single calls one per-call measurement takes per target (``max_calls``): every
call's time is kept in the record."""

SIZED_CAP_BUDGETS = 30.0
"""How far a sized measurement may stretch its cap, in budgets (30 s at the default 1 s
budget)."""

SIZED_MARGIN = 2.0
"""A sized cap allows this many times the estimated duration, for preempted rounds."""


class PerCallError(ValueError):
    """A per-call measurement cannot reach what it was asked for."""


class PerCallWarning(UserWarning):
    """A sized per-call measurement will likely not reach its calls within its bound."""


@dataclass(frozen=True)
class PerCallConfig:
    """How long a per-call measurement runs (see the module docstring)."""

    budget_s: float = 1.0
    min_calls: int = 1000
    max_calls: int = 20_000
    cap_budgets: float = 5.0
    block_s: float = 0.002
    warmup_s: float = 0.1
    min_rounds: int = 2
    sized: bool = False

    def __post_init__(self) -> None:
        if not (self.budget_s > 0 and math.isfinite(self.budget_s)):
            raise ValueError(f"budget_s must be positive and finite, got {self.budget_s}")
        check_count("min_calls", self.min_calls, 1, MAX_CALLS)
        check_count("max_calls", self.max_calls, 1, MAX_CALLS)
        check_count("min_rounds", self.min_rounds, 2, MAX_CALLS)
        if self.max_calls < self.min_calls:
            raise ValueError(
                f"max_calls ({self.max_calls}) must be >= min_calls ({self.min_calls})"
            )
        if self.max_calls < self.min_rounds:
            raise ValueError(
                f"max_calls ({self.max_calls}) must be >= min_rounds ({self.min_rounds}): "
                "a round takes at least one call"
            )

    @classmethod
    def from_engine(cls, config: EngineConfig, **changes: float | int) -> PerCallConfig:
        """The engine's budget, block duration and warm-up bound; ``changes`` override."""
        values: dict[str, float | int] = {
            "budget_s": config.budget_s,
            "block_s": config.block_s,
            "warmup_s": config.warmup_s,
        }
        values.update(changes)
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class PerCallSamples:
    """One target's single calls and blocks.

    ``calls_ns`` are the raw single-call timings in nanoseconds (timer included), in rounds
    of ``calls_per_round``; ``blocks`` the seconds per call of the block of each kept round
    (``calls_per_block`` calls); ``timer_ns`` the timer's cost; ``preempted`` the rounds
    left out (all kept, ``preempted_kept``, when fewer than two were clean)."""

    calls_ns: tuple[int, ...]
    calls_per_round: int
    blocks: tuple[float, ...]
    calls_per_block: int
    timer_ns: float
    preempted: int = 0
    watched: bool = False
    preempted_kept: bool = False
    preempted_ns: tuple[int, ...] = ()
    """The single calls of the rounds left out (empty when they were kept): a latency
    budget counts them, since a busy machine really does answer late."""


def measure_per_call(
    calls: Sequence[Call],
    *,
    config: PerCallConfig | None = None,
    watch_cpu: bool = True,
    clock: Clock = time.perf_counter_ns,
    cpu_clock: Clock | None = None,
) -> list[PerCallSamples]:
    """Single calls and blocks of each of ``calls``, interleaved in rounds (module
    docstring). ``cpu_clock`` defaults to ``thread_time_ns`` beside the default clock."""
    if not calls:
        raise ValueError("measure_per_call needs at least one call")
    cfg = config or PerCallConfig()
    if cpu_clock is None:
        cpu_clock = time.thread_time_ns if clock is time.perf_counter_ns else clock
    engine = Engine(
        EngineConfig(budget_s=cfg.budget_s, block_s=cfg.block_s, warmup_s=cfg.warmup_s),
        clock,
        cpu_clock,
    )
    timer_before = timer_cost_ns(clock)
    ks = [engine.warm_up(call)[0] for call in calls]
    # single calls per round: as many for every target, and min_rounds rounds in max_calls
    ms = _singles_per_round(cfg, ks)
    m = min(ms)  # the slowest target's: it decides the rounds
    singles: list[list[int]] = [[] for _ in calls]
    blocks: list[list[float]] = [[] for _ in calls]
    hit: list[bool] = []
    start = clock()
    cap = start + round((cfg.cap_budgets * cfg.budget_s) / NS)
    give_up = cap + round(cfg.cap_budgets * cfg.budget_s / NS)
    order = list(range(len(calls)))
    warned = False
    while True:
        rounds = len(hit)
        clean = rounds - sum(hit)
        now = clock()
        if rounds and cfg.sized:
            cap, give_up, short = _sized_cap(cfg, m, (now - start) * NS, rounds, clean, start)
            warned = warned or short
        if rounds >= 2:
            if (rounds + 1) * max(ms) > cfg.max_calls:
                break  # max_calls bounds the calls taken, preempted rounds included
            enough = clean * m >= cfg.min_calls
            spent = (now - start) * NS >= cfg.budget_s
            if clean >= cfg.min_rounds and ((enough and spent) or now >= cap):
                break
            if now >= give_up:
                break  # too few clean rounds: give up at twice the cap
        if len(calls) == 2 and rounds % 2:
            order = [1, 0]
        elif len(calls) == 2:
            order = [0, 1]
        interrupted = False
        for i in order:
            per_call, block_hit = engine.timed_block(calls[i], ks[i], watch_cpu)
            blocks[i].append(per_call)
            single_hit = _time_singles(calls[i], ms[i], singles[i], clock, cpu_clock, watch_cpu)
            interrupted = interrupted or block_hit or single_hit
        hit.append(interrupted)
    timer = (timer_before + timer_cost_ns(clock)) / 2
    dropped = sum(hit)
    if cfg.sized and not warned and (len(hit) - dropped) * m < cfg.min_calls:
        warnings.warn(
            f"per_call: stopped at its bound with {(len(hit) - dropped) * m} clean single "
            f"calls per target of the {cfg.min_calls} asked ({dropped} of {len(hit)} rounds "
            "preempted): the verdict will likely be inconclusive; raise the budget "
            "(--ortperf-budget), measure on a quieter machine, or ask for a less extreme "
            "quantile",
            PerCallWarning,
            stacklevel=2,
        )
    keep_all = keeps_preempted(len(hit), dropped)
    out = []
    for i, (k, m) in enumerate(zip(ks, ms, strict=True)):
        kept_rounds = [r for r, h in enumerate(hit) if keep_all or not h]
        out.append(
            PerCallSamples(
                calls_ns=tuple(x for r in kept_rounds for x in singles[i][r * m : (r + 1) * m]),
                calls_per_round=m,
                blocks=tuple(blocks[i][r] for r in kept_rounds),
                calls_per_block=k,
                timer_ns=timer,
                preempted=dropped,
                watched=watch_cpu,
                preempted_kept=keep_all,
                preempted_ns=()
                if keep_all
                else tuple(
                    x for r, h in enumerate(hit) if h for x in singles[i][r * m : (r + 1) * m]
                ),
            )
        )
    return out


def _singles_per_round(cfg: PerCallConfig, ks: Sequence[int]) -> list[int]:
    """Single calls a round of each target (blocks of ``ks`` calls): the slowest target's
    ``m`` is its ``k`` with ``min_rounds`` rounds in ``max_calls``; each other target's is its
    ``k`` with twice the rounds the slowest needs in ``max_calls``, and at least that ``m``.
    Many single calls a round for a fast target keep the one call right after its block (on
    a busy machine, sometimes slower) from weighing on its tail."""
    slowest = max(1, min(min(ks), cfg.max_calls // cfg.min_rounds))
    rounds = max(cfg.min_rounds, math.ceil(cfg.min_calls / slowest))
    return [max(slowest, min(k, cfg.max_calls // (2 * rounds))) for k in ks]


def _sized_cap(
    cfg: PerCallConfig, m: int, elapsed_s: float, rounds: int, clean: int, start: int
) -> tuple[int, int, bool]:
    """The cap and give-up readings of a sized measurement (``m`` single calls a round)
    after ``rounds`` rounds, ``clean`` of them kept: what the rounds still needed take at
    the pace so far, preempted rounds included, twice over, within
    :data:`SIZED_CAP_BUDGETS` budgets. After the first round, a :class:`PerCallWarning`
    when even undisturbed rounds at its pace would not fit (and True: warned)."""
    need = max(cfg.min_rounds, math.ceil(cfg.min_calls / m))
    needed_s = need * elapsed_s / max(clean, 1)
    limit_s = SIZED_CAP_BUDGETS * cfg.budget_s
    if rounds == 1 and needed_s > limit_s:
        warnings.warn(
            f"per_call: {cfg.min_calls} single calls per target in {need} rounds would take "
            f"about {needed_s:.3g} s (the first round took {elapsed_s:.3g} s), more than the "
            f"{limit_s:g} s ({SIZED_CAP_BUDGETS:g} budgets) a measurement may stretch to: the "
            "verdict will likely be inconclusive; raise the budget (--ortperf-budget) or ask "
            "for a less extreme quantile",
            PerCallWarning,
            stacklevel=3,
        )
    short = rounds == 1 and needed_s > limit_s
    cap_s = min(limit_s, max(cfg.cap_budgets * cfg.budget_s, SIZED_MARGIN * needed_s))
    give_up_s = cap_s + cfg.cap_budgets * cfg.budget_s
    return start + round(cap_s / NS), start + round(give_up_s / NS), short


def _time_singles(
    call: Call, m: int, out: list[int], clock: Clock, cpu_clock: Clock, watch_cpu: bool
) -> bool:
    """Time ``m`` calls one by one into ``out``; whether the run of them was preempted."""
    c0 = cpu_clock() if watch_cpu else 0
    w0 = clock()
    for _ in range(m):
        t0 = clock()
        call()
        t1 = clock()
        out.append(t1 - t0)
    wall = clock() - w0
    if not watch_cpu:
        return False
    return cpu_clock() - c0 < PREEMPTED_BELOW * wall


def smoke_per_call(call: Call, clock: Clock = time.perf_counter_ns) -> PerCallSamples:
    """One timed call (plain ``pytest``): no measurement."""
    t0 = clock()
    call()
    span = clock() - t0
    return PerCallSamples((span,), 1, (span * NS,), 1, 0.0)
