"""Speed of the results store: saving a large run and reading a long history.

Targets: storing 1,000 measurements of 200 samples each, and reading 10,000 measurements
back as a DataFrame, take under a second each. The times are printed against the target and
recorded with ``record_property``, never asserted: a loaded machine cannot fail these tests,
which check only that what was stored is what is read back.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_ortperf import store
from pytest_ortperf.env import collect_environment, git_info
from pytest_ortperf.results import LatencyResult, SessionInfo

TARGET_S = 1.0
SESSION = SessionInfo("model.onnx", ("CPUExecutionProvider",), "all", 1, False, (("Add", 1),))


def _run_records(run: int, count: int = 1000, samples: int = 200) -> list[LatencyResult]:
    rng = random.Random(run)
    return [
        LatencyResult(
            test=f"benchmarks/test_models.py::test_model[{i}]",
            name="latency",
            api="run",
            samples=tuple(rng.lognormvariate(-7.0, 0.1) for _ in range(samples)),
            calls_per_block=10,
            measured=True,
            session=SESSION,
        )
        for i in range(count)
    ]


def _save(path: Path, records: list[LatencyResult], started: float) -> int:
    return store.save_run(
        path,
        started=started,
        finished=started + 1.0,
        command_line="pytest --ortperf benchmarks",
        git=git_info(Path.cwd()),
        environment=collect_environment(),
        records=records,
    )


def _best_of(repeat: int, action: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def test_save_1000_measurements(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    path = tmp_path / "results.sqlite"
    runs = [_run_records(i) for i in range(4)]
    start = time.perf_counter()
    _save(path, runs[0], 0.0)  # a new store: schema creation included
    first = time.perf_counter() - start
    later = iter(runs[1:])
    best = _best_of(3, lambda: _save(path, next(later), time.time()))
    print(
        f"\nsave_run, 1,000 measurements x 200 samples: first {first:.3f} s, best {best:.3f} s "
        f"(target < {TARGET_S:g} s each)"
    )
    record_property("store_save_first_s", round(first, 4))
    record_property("store_save_best_s", round(best, 4))
    assert len(store.list_runs(path)) == 4
    assert len(store.read_results(path)) == 4 * 1000


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "results.sqlite"
    for run in range(10):
        _save(path, _run_records(run), 1_700_000_000.0 + run)
    return path


def test_read_10000_measurements(
    history: Path, record_property: Callable[[str, object], None]
) -> None:
    frames = []
    best = _best_of(3, lambda: frames.append(store.read_results(history)))
    filtered_frames = []
    filtered = _best_of(
        3, lambda: filtered_frames.append(store.read_results(history, test="test_model[7]"))
    )
    print(
        f"\nread_results, 10,000 measurements: best {best:.3f} s; filtered {filtered:.3f} s "
        f"(target < {TARGET_S:g} s)"
    )
    record_property("store_read_10000_s", round(best, 4))
    record_property("store_read_filtered_s", round(filtered, 4))
    assert all(len(frame) == 10_000 for frame in frames)
    # Each of the 10 runs holds test_model[7] once.
    assert all(len(frame) == 10 for frame in filtered_frames)
