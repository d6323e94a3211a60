"""What a block's sample should be: its mean call, its median group of calls (the engine's
nine groups), or its median group of about 20 us.

Run (about 1 minute; skipped without ``--ortperf``)::

    pytest --ortperf -s -p no:cacheprovider benchmarks/plugin/test_bench_block_statistic.py

Three compares, each a model with optimizations disabled against the optimized one through
IOBinding: ``attention(dim=256)`` (the gate-quality benchmark's, about 0.3 ms a call),
``attention(dim=32)`` (tens of microseconds) and ``linear_regression(features=10)`` (a few
microseconds). Their blocks are timed as the engine times them (``k`` calls calibrated to
2 ms, rounds A B B A, a round left out when either block's thread CPU time is under 97% of
its wall time), with a clock reading after each of the finest groups: each of the engine's
groups (:func:`~pytest_ortperf.measuring.engine.group_sizes`) split into groups of about
20 us or single calls. From the same blocks it computes three samples: the block's mean
call (the engine's sample before), its median group of the engine's nine, and its median
finest group. Chunks of 30 clean rounds stand for a session pair's measurement; their
Hodges-Lehmann log-ratio estimates' spread is the precision of each sample, side by side
on the same calls.

Prints, per condition (quiet, and beside one spinning and one memory-streaming neighbour)
and compare: the calls a block and its finest groups, the blocks' log-ratio standard
deviation, the chunks' mean estimate and their spread for each sample, and how many times
as precise the nine groups are as the mean. Asserts only that every chunk measured.

Settings: ``ORTPERF_BLOCKSTAT_CHUNKS`` [30 per compare and condition, 3 to 1000],
``ORTPERF_BLOCKSTAT_PHASES`` [``quiet,noisy``].
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import pytest
from bench import conditions, in_condition, narrator, timing_settings

ROUNDS_A_CHUNK = 30
PREEMPTED_BELOW = 0.97
FINEST_S = 20e-6
STATISTICS = ("mean", "nine groups", "finest groups")


def _partition(k: int) -> tuple[list[int], list[int]]:
    """The finest groups of a block of ``k`` calls (each of the engine's groups split into
    groups of about FINEST_S of a 2 ms block, or single calls), and how many of them each
    engine group holds."""
    from pytest_ortperf.measuring.engine import group_sizes

    per_fine = max(1, math.ceil(k * FINEST_S / 0.002))
    fine: list[int] = []
    counts: list[int] = []
    for size in group_sizes(k):
        parts = max(1, size // per_fine)
        small, extra = divmod(size, parts)
        fine += [small + 1] * extra + [small] * (parts - extra)
        counts.append(parts)
    return fine, counts


def _block(call: Any, fine: list[int], counts: list[int]) -> tuple[tuple[float, ...], bool]:
    """One block timed with a clock reading after each finest group: its three samples
    (seconds per call, as STATISTICS), and whether it was preempted."""
    import statistics

    clock, cpu = time.perf_counter_ns, time.thread_time_ns
    c0 = cpu()
    marks = [clock()]
    for size in fine:
        for _ in range(size):
            call()
        marks.append(clock())
    cpu_ns = cpu() - c0
    wall = marks[-1] - marks[0]
    finest = [(marks[i + 1] - marks[i]) / size for i, size in enumerate(fine)]
    groups, at = [], 0
    for n in counts:
        groups.append((marks[at + n] - marks[at]) / sum(fine[at : at + n]))
        at += n
    samples = (wall / sum(fine), statistics.median(groups), statistics.median(finest))
    return tuple(x * 1e-9 for x in samples), cpu_ns < PREEMPTED_BELOW * wall


def _chunks(calls: list[Any], k: int, chunks: int) -> list[list[list[float]]]:
    """``chunks`` runs of ROUNDS_A_CHUNK clean A B B A rounds: each statistic's log-ratios
    of the rounds' blocks."""
    fine, counts = _partition(k)
    for call in calls:  # one untimed block each, as the engine's even warmth does
        _block(call, fine, counts)
    out = []
    rounds = 0
    for _ in range(chunks):
        logs: list[list[float]] = [[] for _ in STATISTICS]
        while len(logs[0]) < ROUNDS_A_CHUNK:
            order = (0, 1) if rounds % 2 == 0 else (1, 0)
            rounds += 1
            timed = {i: _block(calls[i], fine, counts) for i in order}
            if timed[0][1] or timed[1][1]:
                continue
            for j, column in enumerate(logs):
                column.append(math.log(timed[1][0][j] / timed[0][0][j]))
        out.append(logs)
    return out


def _row(phase: str, name: str, k: int, per_call: float, out: Any) -> str:
    import numpy as np

    from pytest_ortperf.stats import run_estimate

    sds, estimates, spreads = [], [], []
    for j in range(len(STATISTICS)):
        blocks = np.concatenate([c[j] for c in out])
        chunk = [run_estimate(c[j]).estimate for c in out]
        sds.append(f"{float(np.std(blocks, ddof=1)):.1%}")
        estimates.append(f"{math.expm1(float(np.mean(chunk))):+.2%}")
        spreads.append(float(np.std(chunk, ddof=1)))
    gain = spreads[0] / spreads[1] if spreads[1] > 0 else math.inf
    return (
        f"| {phase} | {name} | {per_call * 1e6:.1f} | {k} | {len(_partition(k)[0])} | "
        f"{len(out)} | {' / '.join(sds)} | {' / '.join(estimates)} | "
        f"{' / '.join(f'{x:.2%}' for x in spreads)} | {gain:.1f} |"
    )


def test_block_statistic(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], record_property: Any
) -> None:
    from pytest_ortperf import models
    from pytest_ortperf.measuring.calls import make_call
    from pytest_ortperf.measuring.engine import Engine, EngineConfig
    from pytest_ortperf.measuring.feeds import input_specs, make_feeds
    from pytest_ortperf.measuring.session import OrtSession

    timing_settings(request)
    say = narrator(capsys)
    n = int(os.environ.get("ORTPERF_BLOCKSTAT_CHUNKS", "30"))
    assert 3 <= n <= 1000, "ORTPERF_BLOCKSTAT_CHUNKS: 3 to 1000 chunks a compare"
    phases = conditions("ORTPERF_BLOCKSTAT_PHASES")
    compares = [
        ("attention 256", models.attention(dim=256), {"B": 2}),
        ("attention 32", models.attention(dim=32), {"B": 2}),
        ("linear 10", models.linear_regression(features=10), {"N": 1}),
    ]
    lines = [
        "",
        "| condition | compare | us a call | calls a block | finest groups | chunks | "
        "block SD: mean / nine / finest | estimate: mean / nine / finest | chunks' spread: "
        "mean / nine / finest | nine groups: times as precise |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for phase in phases:
        for name, model, dims in compares:
            reference = OrtSession.create(model, name="reference", optimization="disable")
            candidate = OrtSession.create(model, name="candidate")
            feeds = make_feeds(input_specs(reference.sess), dims=dims, seed=0)
            calls = [make_call(s, feeds, "iobinding")[0] for s in (reference, candidate)]
            engine = Engine(EngineConfig())
            k = min(engine.calibrate(call) for call in calls)
            per_call = 0.002 / k
            with in_condition(phase):
                out = _chunks(calls, k, n)
            assert len(out) == n and all(len(c[0]) == ROUNDS_A_CHUNK for c in out)
            lines.append(_row(phase, name, k, per_call, out))
            del calls, reference, candidate
    say("\n".join(lines))
    record_property("block_statistic", "\n".join(lines))
