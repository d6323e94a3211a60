"""Remote sessions measured interleaved from this process.

:func:`interleave` measures several remote sessions (:mod:`pytest_ortperf.remote.sessions`)
interleaved: the parent picks the order of the blocks (ABBA: each round reverses the
previous one) and asks one worker at a time for one block; the worker times its own ``k``
calls with ``perf_counter_ns`` and returns the time, so no message crosses a process
boundary inside a timed region. :func:`measure_pairs` does it for several worker-process
pairs at once, :class:`Arms` for the two arms of a comparison.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ortperf import scratch
from pytest_ortperf.measuring.engine import (
    CAPPED_MIN_BLOCKS,
    NS,
    PREEMPTED_BELOW,
    EngineConfig,
    Samples,
    StopRule,
    asks_stop_rule,
    keeps_preempted,
)
from pytest_ortperf.measuring.records import latency_result
from pytest_ortperf.remote.sessions import Feeds, RemoteSession, WorkerError, write_feeds
from pytest_ortperf.results import LatencyResult


@contextlib.contextmanager
def all_or_none(sessions: Sequence[RemoteSession]) -> Iterator[None]:
    """When one worker fails (dies, hangs, errs mid-measurement), stop the others too:
    an A/B with one arm gone is over, and no worker is left behind."""
    try:
        yield
    except WorkerError:
        for session in sessions:
            session.close()
        raise


@contextlib.contextmanager
def shared_feeds(sessions: Sequence[RemoteSession], feeds: Feeds, api: str) -> Iterator[None]:
    """Bind the same ``feeds`` (one file, the same bytes) in every session's worker."""
    directory = scratch.mkdtemp("ortperf-feeds-")
    try:
        with all_or_none(sessions):
            path = write_feeds(feeds, directory)
            for session in sessions:
                session.bind(feeds, api, path=path)
            yield
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def pin_together(sessions: Sequence[RemoteSession]) -> int | None:
    """Pin the workers of one-thread sessions to one and the same CPU (the last one this
    process may use): they run one at a time, so they share it at no cost, and neither
    arm sits on a core that a neighbour keeps busier. Returns the CPU (None where the
    platform cannot pin, or a session uses more threads)."""
    if not hasattr(os, "sched_setaffinity") or not all(s.settings.threads == 1 for s in sessions):
        return None
    cpu = max(os.sched_getaffinity(0))
    for session in sessions:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(session.pid, {cpu})
    return cpu


def order(round_index: int, arms: int) -> list[int]:
    """The arms' order in a round: forward in even rounds, reversed in odd ones (ABBA)."""
    forward = list(range(arms))
    return forward if round_index % 2 == 0 else forward[::-1]


def interleave(
    sessions: Sequence[RemoteSession],
    config: EngineConfig,
    *,
    should_stop: StopRule | None = None,
    watch_cpu: bool = True,
    pin: bool = True,
    clock: Any = time.perf_counter_ns,
    group: int = 0,
    same_k: bool = False,
) -> list[Samples]:
    """Paired samples of remote sessions (their feeds bound), measured in ABBA rounds.

    Each worker warms up and calibrates its own ``k`` first; then rounds of one block per
    worker, until the budget is spent and ``min_blocks`` clean rounds are taken, or the
    hard cap (:meth:`EngineConfig.cap_s`), as
    :meth:`pytest_ortperf.measuring.engine.Engine.interleave` does. A round with a preempted block
    (with ``watch_cpu``) is left out. With ``pin``,
    the workers of one-thread sessions share one CPU (:func:`pin_together`): unpinned,
    A/B of two onnxruntime versions read 0.90 in one run and 1.11 in the next on a busy
    2-core machine (each arm on another core), pinned 0.997 and 0.993, and A/A intervals
    narrowed from +-2% to +-0.6%.

    ``group`` (a divisor of the number of sessions; 0: all of them) splits the sessions into
    consecutive groups measured independently within the same rounds (the worker-process
    pairs of an A/B, :func:`measure_pairs`): a preempted block leaves out its group's
    blocks of that round only. ``should_stop`` is asked only without groups. With
    ``same_k``, the members of each group (all sessions, without groups) time the same
    number of calls per block, the largest any of them calibrated (the arms of an A/B of
    one model)."""
    arms = len(sessions)
    size = group or arms
    if size < 1 or arms % size:
        raise ValueError(f"group={group}: not a divisor of {arms} sessions")
    groups = [range(g, g + size) for g in range(0, arms, size)]
    if pin:
        pin_together(sessions)
    start_all = clock()
    calibrated = [s.warm_up(config) for s in sessions]
    ks = [k for k, _ in calibrated]
    if same_k:
        # One k for the members of a group: each block pays a fixed cost after the worker
        # wakes (caches a neighbour emptied), and a worker whose calibration was disturbed
        # takes a smaller k, so its blocks read slower per call: under two neighbours, pairs
        # with k 39 against 170 read B/A 0.83, with one k 1.00. The largest k is the one
        # calibrated least disturbed.
        for members in groups:
            common = max(ks[i] for i in members)
            for i in members:
                ks[i] = common
    deadline = start_all + round(config.cap_s(arms) / NS)
    values: list[list[float]] = [[] for _ in sessions]
    all_values: list[list[float]] = [[] for _ in sessions]
    preempted = [0] * len(groups)
    start = clock()
    rounds = 0
    while True:
        if rounds >= CAPPED_MIN_BLOCKS:
            now = clock()
            clean = min(len(values[g[0]]) for g in groups)
            if now >= deadline:
                break
            if clean >= config.min_blocks and (now - start) * NS >= config.budget_s:
                break
        times: list[float] = [0.0] * arms
        hits = [False] * arms
        for i in order(rounds, arms):
            times[i], ns, cpu_ns = sessions[i].block(ks[i])
            hits[i] = watch_cpu and cpu_ns < PREEMPTED_BELOW * ns
        rounds += 1
        for i in range(arms):
            all_values[i].append(times[i])
        hit = False
        for g, members in enumerate(groups):
            if any(hits[i] for i in members):
                preempted[g] += 1
                hit = True
            else:
                for i in members:
                    values[i].append(times[i])
        if (
            should_stop is not None
            and not group
            and not hit
            and asks_stop_rule(len(values[0]), config.min_blocks)
            and should_stop(values)
        ):
            break
    out = []
    for i in range(arms):
        g = i // size
        kept = keeps_preempted(rounds, preempted[g])
        chosen = all_values if kept else values
        out.append(
            Samples(tuple(chosen[i]), ks[i], preempted[g], watch_cpu, kept,
                    settled=calibrated[i][1])
        )  # fmt: skip
    return out


def measure_pairs(
    pairs: Sequence[tuple[RemoteSession, RemoteSession]],
    feeds: Feeds,
    api: str,
    config: EngineConfig,
) -> list[tuple[Samples, Samples]]:
    """Each worker-process pair's samples (reference, candidate), all pairs measured in
    the same ABBA rounds (``A1 B1 A2 B2 ...``, then reversed), so that whatever the machine
    does in a stretch of time reaches every pair alike; a preempted block leaves out its
    own pair's round only, and the two workers of a pair time the same number of calls
    per block (:func:`interleave` with groups of two)."""
    from pytest_ortperf.measuring.session import watches_cpu

    sessions = [s for pair in pairs for s in pair]
    with shared_feeds(sessions, feeds, api):
        samples = interleave(
            sessions, config, watch_cpu=watches_cpu(*sessions), group=2, same_k=True
        )
    return [(samples[2 * j], samples[2 * j + 1]) for j in range(len(pairs))]


def start_sessions(makers: Sequence[Callable[[], RemoteSession]]) -> list[RemoteSession]:
    """The sessions ``makers`` start, started at once, one thread each (a worker's start is
    mostly waiting: for its interpreter, its imports, the model's load). When one fails,
    the others are closed and the first failure (in ``makers``' order) is raised."""
    made: list[RemoteSession | None] = [None] * len(makers)
    errors: list[BaseException | None] = [None] * len(makers)

    def start(i: int) -> None:
        try:
            made[i] = makers[i]()
        except BaseException as exc:  # reraised below, in the caller's thread
            errors[i] = exc

    threads = [threading.Thread(target=start, args=(i,), daemon=True) for i in range(len(makers))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException:
        # Interrupted (Ctrl-C): the threads still starting workers finish alone; their
        # workers end with this process (atexit) or when their stdin closes.
        for session in made:
            if session is not None:
                session.close()
        raise
    failed = next((e for e in errors if e is not None), None)
    if failed is not None:
        for session in made:
            if session is not None:
                session.close()
        raise failed
    return [s for s in made if s is not None]


def smoke(sessions: Sequence[RemoteSession]) -> list[Samples]:
    """One call of each session, timed in its worker (smoke mode)."""
    out = []
    for session in sessions:
        per_call, _, _ = session.block(1)
        out.append(Samples((per_call,), 1))
    return out


@dataclass(frozen=True)
class Arms:
    """What the recorder needs of two remote arms: outputs, measuring, session records."""

    reference: RemoteSession
    candidate: RemoteSession
    feeds: Feeds
    api: str

    def outputs(self) -> tuple[list[Any], list[Any]]:
        with shared_feeds([self.reference, self.candidate], self.feeds, self.api):
            return self.reference.outputs(), self.candidate.outputs()

    def measure(
        self, config: EngineConfig | None, stop: StopRule | None, measured: bool
    ) -> tuple[Samples, Samples]:
        from pytest_ortperf.measuring.session import watches_cpu

        sessions = [self.reference, self.candidate]
        with shared_feeds(sessions, self.feeds, self.api):
            if not measured or config is None:
                ref, cand = smoke(sessions)
            else:
                ref, cand = interleave(
                    sessions, config, should_stop=stop, watch_cpu=watches_cpu(*sessions),
                    same_k=True,
                )  # fmt: skip
        return ref, cand


def arm_result(
    test: str, name: str, api: str, samples: Samples, session: RemoteSession, measured: bool
) -> LatencyResult:
    """The record of one remote arm's samples (its optimized graph's op types when
    ``measured``)."""
    info = session.info(with_histogram=measured)
    return latency_result(test, name, api, samples, info, measured)


def both_remote(reference: object, candidate: object) -> tuple[RemoteSession, RemoteSession]:
    """The two arms of a remote comparison; a TypeError when one of them is local."""
    if isinstance(reference, RemoteSession) and isinstance(candidate, RemoteSession):
        return reference, candidate
    local = "reference" if not isinstance(reference, RemoteSession) else "candidate"
    raise TypeError(
        f"compare got a remote session and a local one (the {local}): both arms of a "
        "remote comparison run in workers so that neither has an advantage; make the "
        f"{local} with ort_env too (ort_env(sys.executable) is this environment)"
    )
