"""Throughput under concurrency: ``N`` Python threads calling at once, calls per second.

ORT's ``run`` releases the GIL while it computes, so ``N`` threads calling one session (or
one session each) run ``N`` inferences at once, up to the cores there are. Each level of
concurrency runs for a while: the threads warm up, meet at a barrier, then call in a loop,
timing every call, until told to stop; the level's throughput is the calls completed over
the window from the first thread's start to the last thread's last call (so no call is
counted outside the window). Every thread completes at least one timed call, however
short the window or busy the machine (a smoke run's window is a millisecond). Levels are
taken in rounds, in forward then reverse order, so slow drift of the machine hits every
level alike.

Counts are bounded (:func:`check_levels`): at most :data:`MAX_CONCURRENCY` threads a
level, :data:`MAX_LEVELS` levels, :data:`MAX_ROUNDS` rounds, ``seconds`` finite and at
most :data:`~pytest_ortperf.values.MAX_BUDGET_S` a level. An interrupt (Ctrl-C) at any
point stops every thread after its call in flight and joins it before propagating.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_ortperf.measuring.engine import NS, Call, Clock
from pytest_ortperf.results import ThroughputLevel
from pytest_ortperf.stats import quantile
from pytest_ortperf.values import MAX_BUDGET_S, check_count, check_seconds

if TYPE_CHECKING:
    from pytest_ortperf.measuring.session import SessionSettings

WARM_CALLS = 3
"""Calls each thread makes before the barrier (first runs, per-thread arenas)."""

MAX_CONCURRENCY = 256
"""The most threads one level runs: far past the cores of any one machine, where more
threads only queue (10,000 threads once ran for minutes and lifted the load to 200)."""

MAX_LEVELS = 32
"""The most levels of concurrency one measurement takes."""

MAX_ROUNDS = 100
"""The most rounds (windows per level) one measurement takes."""


def check_levels(concurrency: Sequence[int], seconds: float, rounds: int) -> list[int]:
    """The levels of ``concurrency``, after checking them, ``seconds`` and ``rounds``
    against their bounds: a ``ValueError`` naming the argument at fault."""
    levels = list(concurrency)
    if not 1 <= len(levels) <= MAX_LEVELS:
        raise ValueError(
            f"concurrency must list 1 to {MAX_LEVELS} levels, got {len(levels)}: {concurrency!r}"
        )
    for n in levels:
        check_count(f"concurrency level {n!r}", n, 1, MAX_CONCURRENCY)
    if len(set(levels)) != len(levels):
        raise ValueError(f"concurrency has repeated levels: {concurrency!r}")
    check_seconds("seconds", seconds, MAX_BUDGET_S)
    check_count("rounds", rounds, 1, MAX_ROUNDS)
    return levels


@dataclass(frozen=True)
class LevelRun:
    """One timed window of one level: calls completed, its seconds, every call's ns."""

    concurrency: int
    calls: int
    seconds: float
    latencies_ns: tuple[int, ...]


class ThroughputError(RuntimeError):
    """A calling thread raised: the message names the level and the thread."""


def run_level(
    calls: Sequence[Call],
    seconds: float,
    *,
    clock: Clock = time.perf_counter_ns,
    warm: int = WARM_CALLS,
) -> LevelRun:
    """``len(calls)`` threads, thread ``i`` calling ``calls[i]`` for about ``seconds``."""
    n = len(calls)
    if n < 1:
        raise ValueError("a level needs at least one call")
    barrier = threading.Barrier(n + 1)
    stop = threading.Event()
    starts = [0] * n
    ends = [0] * n
    counts = [0] * n
    spans: list[list[int]] = [[] for _ in range(n)]
    errors: list[tuple[int, BaseException]] = []

    def worker(i: int) -> None:
        call, out = calls[i], spans[i]
        try:
            for _ in range(warm):
                if stop.is_set():
                    return
                call()
        except BaseException as exc:  # reported by the caller, never lost in a thread
            errors.append((i, exc))
            barrier.abort()
            return
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return
        try:
            t = starts[i] = clock()
            while True:  # at least one call, however short the window
                t0 = t
                call()
                t = clock()
                out.append(t - t0)
                if stop.is_set():
                    break
            ends[i] = t
            counts[i] = len(out)
        except BaseException as exc:
            errors.append((i, exc))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    released = False
    try:
        for thread in threads:
            thread.start()
        barrier.wait()
        released = True
        time.sleep(seconds)
    except threading.BrokenBarrierError:
        pass
    finally:
        stop.set()
        if not released:
            # Interrupted before the barrier filled: threads waiting at it, or still warming
            # up, would wait for good. (Never after it filled: a thread not yet woken from it
            # would then see it broken and time nothing.)
            barrier.abort()
        for thread in threads:
            if thread.ident is not None:
                thread.join()
    if errors:
        i, exc = errors[0]
        raise ThroughputError(f"thread {i} of {n} raised {type(exc).__name__}: {exc}") from exc
    window = max(ends) - min(starts)
    return LevelRun(n, sum(counts), window * NS, tuple(x for s in spans for x in s))


def measure_levels(
    calls_for: Callable[[int], Sequence[Call]],
    levels: Sequence[int],
    *,
    seconds: float,
    rounds: int = 3,
    clock: Clock = time.perf_counter_ns,
) -> dict[int, list[LevelRun]]:
    """Each level's windows: ``rounds`` of ``seconds / rounds`` each, levels in forward then
    reverse order by round. ``calls_for(n)`` gives the ``n`` calls of level ``n`` (built
    once per level)."""
    levels = check_levels(levels, seconds, rounds)
    prepared = {n: calls_for(n) for n in levels}
    runs: dict[int, list[LevelRun]] = {n: [] for n in levels}
    for r in range(rounds):
        for n in levels if r % 2 == 0 else list(reversed(levels)):
            runs[n].append(run_level(prepared[n], seconds / rounds, clock=clock))
    return runs


def level_figures(runs: Mapping[int, Sequence[LevelRun]], what: str) -> tuple[ThroughputLevel, ...]:
    """Each level's figures, pooled over its windows: calls, seconds, the rate of each
    window, and p50/p90/p99/mean of every call's latency; a ``RuntimeError`` naming
    ``what`` and the level where no call finished."""
    levels = []
    for n, windows in runs.items():
        spans = sorted(x * NS for w in windows for x in w.latencies_ns)
        if not spans:
            raise RuntimeError(f"{what}: no call finished at {n} threads")
        levels.append(
            ThroughputLevel(
                concurrency=n,
                calls=sum(w.calls for w in windows),
                seconds=sum(w.seconds for w in windows),
                rates=tuple(w.calls / w.seconds for w in windows if w.seconds > 0),
                p50=quantile(spans, 0.5),
                p90=quantile(spans, 0.9),
                p99=quantile(spans, 0.99),
                mean=sum(spans) / len(spans),
            )
        )
    return tuple(levels)


def thread_counts(settings: SessionSettings) -> tuple[int, int]:
    """The intra-op and inter-op threads a session with ``settings`` runs with (its
    ``options`` win over ``threads``; 0: onnxruntime's default)."""
    options = dict(settings.options)
    intra = int(options.get("intra_op_num_threads", settings.threads))
    inter = int(options.get("inter_op_num_threads", 1 if settings.threads == 1 else 0))
    return intra, inter


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS tells it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
