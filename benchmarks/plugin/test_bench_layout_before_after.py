"""A restructuring costs nothing at run time: plugin load and ``read_results`` on 10,000
measurements, this tree against an older checkout, side by side in one run.

Each figure is taken in fresh Python processes, alternating old and new (ABAB...), so a
machine that gets busier during the run weighs on both. The times are printed and recorded
with ``record_property``, never asserted; the test checks only that both trees read the same
rows. Run::

    git worktree add /tmp/ortperf-before 618e702
    ORTPERF_BEFORE_TREE=/tmp/ortperf-before pytest -p no:cacheprovider -s \\
        benchmarks/plugin/test_bench_layout_before_after.py
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ortperf.machine import collect_environment, git_info
from pytest_ortperf.results import LatencyResult, SessionInfo
from pytest_ortperf.store.write import save_run

ROUNDS = 7
NEW_TREE = Path(__file__).resolve().parents[2]
SESSION = SessionInfo("model.onnx", ("CPUExecutionProvider",), "all", 1, False, (("Add", 1),))

# Run in each tree's own process: the import time of the plugin, then the best of three
# read_results of the whole store (its import path moved from store to store.read).
PROBE = """
import sys, time, json
t0 = time.perf_counter()
import pytest_ortperf.plugin
load = time.perf_counter() - t0
try:
    from pytest_ortperf.store.read import read_results
except ImportError:
    from pytest_ortperf.store import read_results
best, rows = float("inf"), 0
for _ in range(3):
    t0 = time.perf_counter()
    frame = read_results(sys.argv[1])
    best = min(best, time.perf_counter() - t0)
    rows = len(frame)
print(json.dumps({"load_s": load, "read_s": best, "rows": rows}))
"""


def _store(path: Path) -> str:
    store = str(path / "results.sqlite")
    environment, git = collect_environment(), git_info(NEW_TREE)
    for run in range(10):
        rng = random.Random(run)
        records = [
            LatencyResult(
                test=f"benchmarks/test_models.py::test_model[{i}]",
                name="latency",
                api="run",
                samples=tuple(rng.lognormvariate(-7.0, 0.1) for _ in range(200)),
                calls_per_block=10,
                measured=True,
                session=SESSION,
            )
            for i in range(1000)
        ]
        save_run(
            store, started=1e9 + run, finished=1e9 + run + 1.0, command_line="pytest",
            git=git, environment=environment, records=records,
        )  # fmt: skip
    return store


def _probe(tree: Path, store: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, store],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
        env=env,
        timeout=300,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def test_plugin_load_and_read_results_before_and_after(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    before = os.environ.get("ORTPERF_BEFORE_TREE", "").strip()
    if not before:
        pytest.skip("set ORTPERF_BEFORE_TREE to a checkout of the older commit")
    old_tree = Path(before)
    store = _store(tmp_path)
    old: list[dict[str, float]] = []
    new: list[dict[str, float]] = []
    for _ in range(ROUNDS):
        old.append(_probe(old_tree, store))
        new.append(_probe(NEW_TREE, store))
    assert {f["rows"] for f in old} == {f["rows"] for f in new} == {10_000}
    figures = {}
    for key in ("load_s", "read_s"):
        o = statistics.median(f[key] for f in old)
        n = statistics.median(f[key] for f in new)
        figures[f"{key}_before"] = round(o, 4)
        figures[f"{key}_after"] = round(n, 4)
        figures[f"{key}_after_over_before"] = round(n / o, 3)
    for name, value in figures.items():
        record_property(name, value)
    print(f"\n{ROUNDS} rounds, medians, fresh processes alternating: {figures}")
