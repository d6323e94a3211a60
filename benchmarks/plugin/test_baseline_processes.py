"""How far apart independent baselines read the same ratio, taken in one process each or in
several (``--ortperf-update-processes``).

Run (about 10 minutes quiet; skipped without ``--ortperf``)::

    pytest --ortperf -s -p no:cacheprovider benchmarks/plugin/test_baseline_processes.py

Every later check of a compare is judged against its baseline's estimate of the ratio, so
how far that estimate sits from the true ratio decides which slowdowns near the threshold
are caught. The gate-quality benchmark's model (``attention(dim=256)``, optimized against
unoptimized, IOBinding, 1 s budget) gets ``ORTPERF_BP_BASELINES`` [8] baselines of each
kind, each taken by ``pytest --ortperf-update`` in a fresh process, the kinds alternating:

- ``1 process``: the update's own process takes every run (the default);
- ``N processes``: ``--ortperf-update-processes=N`` (``ORTPERF_BP_PROCESSES`` [3]).

Prints each baseline's estimate (the mean log-ratio of its runs, what the gate compares
against), the standard deviation of the estimates of each kind (with a 90% interval from the
chi-square distribution), and each kind's mean update time. With ``ORTPERF_BP_NOISY=1`` every
update runs beside two noisy neighbours (:func:`noise.noisy_neighbours`). Asserts only that
every update exited 0 and wrote an entry of the expected number of processes.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from pathlib import Path

import pytest
from bench import narrator, timing_settings
from gate_quality import COMPARE_NAME, Bench
from scipy import stats as scipy_stats

from pytest_ortperf.gating.baseline import load_baseline
from pytest_ortperf.gating.rules import ratio_baseline
from pytest_ortperf.results import PROCESSES


def _sd_interval(values: list[float], level: float = 0.90) -> tuple[float, float, float]:
    """The sample standard deviation of ``values`` and its ``level`` chi-square interval."""
    n = len(values)
    sd = statistics.stdev(values)
    tail = (1.0 - level) / 2.0
    low = sd * math.sqrt((n - 1) / scipy_stats.chi2.ppf(1.0 - tail, n - 1))
    high = sd * math.sqrt((n - 1) / scipy_stats.chi2.ppf(tail, n - 1))
    return sd, low, high


def test_baseline_processes(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from noise import noisy_neighbours

    timing_settings(request)  # skips without --ortperf
    n = int(os.environ.get("ORTPERF_BP_BASELINES", "8"))
    processes = int(os.environ.get("ORTPERF_BP_PROCESSES", "3"))
    noisy = os.environ.get("ORTPERF_BP_NOISY", "") not in ("", "0")
    assert n >= 2 and processes >= 2, "ORTPERF_BP_BASELINES and ORTPERF_BP_PROCESSES: 2 or more"
    say = narrator(capsys)
    bench = Bench(tmp_path / "runs", dim=256, batch=2, threshold=0.05, budget=1.0)
    kinds = {1: "1 process", processes: f"{processes} processes"}
    estimates: dict[int, list[float]] = {1: [], processes: []}
    walls: dict[int, list[float]] = {1: [], processes: []}
    say(
        f"\nbaselines of one ratio, {n} of each kind, "
        f"{'beside two noisy neighbours' if noisy else 'quiet'}:"
    )
    neighbours = noisy_neighbours(spinners=1, streamers=1) if noisy else contextlib.nullcontext()
    with neighbours:
        for i in range(n):
            order = (1, processes) if i % 2 == 0 else (processes, 1)
            for p in order:
                directory = bench.make_dir(f"p{p}_{i:02d}", bench.module())
                started = time.perf_counter()
                rc, _, _, tail = bench.pytest(
                    directory, "--ortperf-update", f"--ortperf-update-processes={p}"
                )
                walls[p].append(time.perf_counter() - started)
                assert rc == 0, f"{kinds[p]} baseline {i}: exited {rc}:\n{tail}"
                baseline = load_baseline(directory / "__ortperf__" / "test_gq.json")
                entry = baseline.entries[f"test_gate::{COMPARE_NAME}"]
                assert len(entry.get(PROCESSES) or [1]) == p, entry.get(PROCESSES)
                estimate = ratio_baseline(entry["block_ratios"], entry.get("runs")).estimate
                estimates[p].append(estimate)
                say(f"  {kinds[p]:>12} #{i}: ratio {math.exp(estimate):.4f}")
    lines = [
        "",
        "| baselines | n | mean ratio | SD of the log-ratio estimates [90%] | mean update s |",
        "|---|---|---|---|---|",
    ]
    for p, label in kinds.items():
        sd, low, high = _sd_interval(estimates[p])
        mean = math.exp(statistics.fmean(estimates[p]))
        lines.append(
            f"| {label} | {n} | {mean:.4f} | {sd:.2%} [{low:.2%}, {high:.2%}] | "
            f"{statistics.fmean(walls[p]):.1f} |"
        )
    ratio = statistics.stdev(estimates[processes]) / statistics.stdev(estimates[1])
    lines.append(
        f"SD with {processes} processes / SD with 1: {ratio:.2f} "
        f"(1/sqrt({processes}) = {1 / math.sqrt(processes):.2f} if what differs is the process)"
    )
    say("\n".join(lines))
