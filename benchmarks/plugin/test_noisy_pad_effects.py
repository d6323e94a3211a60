"""What two noisy neighbours do to a slowdown the gate-quality benchmark plants: its zero pads
measured quiet and beside the neighbours, each process fresh.

Run (about 5 minutes; skipped without ``--ortperf``)::

    pytest --ortperf -s -p no:cacheprovider benchmarks/plugin/test_noisy_pad_effects.py

The checks of ``test_gate_quality.py`` and ``test_gate_quality_conditions.py`` judge the ratio
of ``attention(dim=256, zero_pad=P)`` (optimized) to ``attention(dim=256)`` with optimizations
disabled against a baseline of that ratio, and beside the neighbours they can only see what the
ratio does there. Each process here creates, in turn, fresh session pairs of three kinds
(IOBinding, interleaved by the engine at a 1 s budget) and reports the mean log-ratio of each:

- ``direct P``: the candidate padded with ``P`` against the unpadded one;
- ``ratio 0``: the unpadded candidate against the reference (what a baseline stores);
- ``ratio P``: the padded candidate against the reference. ``ratio P`` less ``ratio 0`` is the
  pad's effect as the check's ratio shows it; the shift of ``ratio 0`` from quiet to noisy is
  what every check beside the neighbours reads off a quiet baseline, slowed or not.

Processes alternate quiet and noisy (the neighbours, :func:`noise.noisy_neighbours`, started
for each noisy one), so that drift hits both conditions alike. Prints means over processes
with their standard errors (the spread between processes is the one that counts); asserts
only that every process reported every figure.

Settings: ``ORTPERF_PADFX_PROCESSES`` [12 per condition], ``ORTPERF_PADFX_PAIRS`` [2 pairs of
each kind per process], ``ORTPERF_PADFX_PADS`` [``15,16,32``].
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DIM, BATCH = 256, 2
CONDITIONS = ("quiet", "noisy")


def measure_in_this_process(pads: list[int], pairs: int) -> dict[str, float]:
    """Mean log-ratio of each kind of session pair (see the module docstring), ``pairs``
    fresh pairs of each, kinds taken in turn."""
    from bench import pair_log_ratio

    from pytest_ortperf import models
    from pytest_ortperf.measuring.engine import Engine, EngineConfig
    from pytest_ortperf.measuring.feeds import input_specs, make_feeds
    from pytest_ortperf.measuring.session import OrtSession

    engine = Engine(EngineConfig(budget_s=1.0, min_blocks=9))
    unpadded = models.attention(dim=DIM)
    padded = {p: models.attention(dim=DIM, zero_pad=p) for p in pads}
    probe = OrtSession.create(unpadded, name="probe")
    feeds = make_feeds(input_specs(probe.sess), dims={"B": BATCH}, seed=0)
    kinds: dict[str, tuple[Any, Any, str]] = {"ratio 0": (unpadded, unpadded, "disable")}
    for p in pads:
        kinds[f"direct {p}"] = (unpadded, padded[p], "all")
        kinds[f"ratio {p}"] = (unpadded, padded[p], "disable")
    logs: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(pairs):
        for kind, (first, second, optimization) in kinds.items():
            logs[kind].append(
                pair_log_ratio(
                    engine,
                    OrtSession.create(first, name="first", optimization=optimization),
                    OrtSession.create(second, name="second"),
                    feeds,
                )
            )
    return {k: statistics.fmean(v) for k, v in logs.items()}


def _child(pads: list[int], pairs: int, noisy: bool) -> dict[str, float]:
    from noise import noisy_neighbours

    cmd = [sys.executable, str(Path(__file__).resolve()), ",".join(map(str, pads)), str(pairs)]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    with noisy_neighbours(spinners=1, streamers=1) if noisy else contextlib.nullcontext():
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _mean_se(values: list[float]) -> str:
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return f"{math.expm1(mean):+.2%} (SE {se:.2%})"


def test_noisy_pad_effects(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], record_property: Any
) -> None:
    from bench import narrator, timing_settings

    timing_settings(request)
    say = narrator(capsys)
    processes = int(os.environ.get("ORTPERF_PADFX_PROCESSES", "12"))
    pairs = int(os.environ.get("ORTPERF_PADFX_PAIRS", "2"))
    pads = [int(p) for p in os.environ.get("ORTPERF_PADFX_PADS", "15,16,32").split(",")]
    assert 1 <= processes <= 200 and 1 <= pairs <= 20, "processes 1-200, pairs 1-20"
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in CONDITIONS}
    for i in range(processes):
        order = CONDITIONS if i % 2 == 0 else CONDITIONS[::-1]
        for condition in order:
            runs[condition].append(_child(pads, pairs, noisy=condition == "noisy"))
        say(f"  {i + 1}/{processes} processes per condition")
    lines = [
        f"\npad effects over {processes} fresh processes per condition, {pairs} session pairs "
        "of each kind in each (mean, standard error over processes)",
        "",
        "| figure | quiet | beside the neighbours |",
        "|---|---|---|",
    ]
    rows = ["ratio 0"] + [f"{kind} {p}" for p in pads for kind in ("direct", "ratio")]
    for row in rows:
        cells = []
        for condition in CONDITIONS:
            values = [r[row] for r in runs[condition]]
            if row.startswith("ratio ") and row != "ratio 0":  # the pad's effect in the ratio
                values = [r[row] - r["ratio 0"] for r in runs[condition]]
            cells.append(_mean_se(values))
        label = row if row.startswith("direct") or row == "ratio 0" else f"{row} less ratio 0"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    shift = statistics.fmean(r["ratio 0"] for r in runs["noisy"]) - statistics.fmean(
        r["ratio 0"] for r in runs["quiet"]
    )
    lines.append(f"\nratio 0 moved {math.expm1(shift):+.2%} from quiet to noisy")
    say("\n".join(lines))
    record_property("noisy_pad_effects", "\n".join(lines))
    for condition in CONDITIONS:
        assert len(runs[condition]) == processes
        assert all(set(r) == set(rows) for r in runs[condition])


if __name__ == "__main__":
    print(json.dumps(measure_in_this_process([int(p) for p in sys.argv[1].split(",")],
                                             int(sys.argv[2]))))  # fmt: skip
