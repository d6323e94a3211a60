"""Speed of the results store: saving a large run and reading a long history, on SQLite
and, when ``$ORTPERF_TEST_POSTGRES`` names a server, on PostgreSQL in the same run.

Targets: storing 1,000 measurements of 200 samples each, and reading 10,000 measurements
back as a DataFrame, take under a second each. The times are printed against the target and
recorded with ``record_property``, never asserted: a loaded machine cannot fail these tests,
which check only that what was stored is what is read back. Run::

    eval "$(python tests/pg_server.py start /tmp/ortperf-pg)"
    pytest -s benchmarks/plugin/test_bench_store.py
    python tests/pg_server.py stop /tmp/ortperf-pg
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_ortperf.machine import collect_environment, git_info
from pytest_ortperf.results import LatencyResult, SessionInfo
from pytest_ortperf.store.read import list_runs, read_results
from pytest_ortperf.store.write import save_run

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


BACKENDS = ["sqlite", "postgresql"]


def _new_store(backend: str, directory: Path) -> str:
    """A new empty store: an SQLite file in ``directory``, or a new database on the server
    of ``$ORTPERF_TEST_POSTGRES`` (skipped without it)."""
    if backend == "sqlite":
        return str(directory / "results.sqlite")
    url = os.environ.get("ORTPERF_TEST_POSTGRES", "").strip()
    if not url:
        pytest.skip("no PostgreSQL server: set ORTPERF_TEST_POSTGRES (tests/pg_server.py)")
    import sqlalchemy as sa

    name = f"bench_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    engine.dispose()
    return sa.make_url(url).set(database=name).render_as_string(hide_password=False)


def _save(path: str, records: list[LatencyResult], started: float) -> int:
    return save_run(
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_1000_measurements(
    backend: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    path = _new_store(backend, tmp_path)
    runs = [_run_records(i) for i in range(4)]
    start = time.perf_counter()
    _save(path, runs[0], 0.0)  # a new store: schema creation included
    first = time.perf_counter() - start
    later = iter(runs[1:])
    best = _best_of(3, lambda: _save(path, next(later), time.time()))
    print(
        f"\n{backend}: save_run, 1,000 measurements x 200 samples: first {first:.3f} s, "
        f"best {best:.3f} s "
        f"(target < {TARGET_S:g} s each)"
    )
    record_property("store_save_first_s", round(first, 4))
    record_property("store_save_best_s", round(best, 4))
    assert len(list_runs(path)) == 4
    assert len(read_results(path)) == 4 * 1000


@pytest.fixture(scope="module", params=BACKENDS)
def history(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = _new_store(request.param, tmp_path_factory.mktemp("store"))
    for run in range(10):
        _save(path, _run_records(run), 1_700_000_000.0 + run)
    return path


def test_read_10000_measurements(
    history: str, record_property: Callable[[str, object], None]
) -> None:
    frames = []
    best = _best_of(3, lambda: frames.append(read_results(history)))
    filtered_frames = []
    filtered = _best_of(
        3, lambda: filtered_frames.append(read_results(history, test="test_model[7]"))
    )
    print(
        f"\n{history.split(':', 1)[0] if '://' in history else 'sqlite'}: read_results, "
        f"10,000 measurements: best {best:.3f} s; filtered {filtered:.3f} s "
        f"(target < {TARGET_S:g} s)"
    )
    record_property("store_read_10000_s", round(best, 4))
    record_property("store_read_filtered_s", round(filtered, 4))
    assert all(len(frame) == 10_000 for frame in frames)
    # Each of the 10 runs holds test_model[7] once.
    assert all(len(frame) == 10 for frame in filtered_frames)


def _timed_save(path: str, run: int, started: float, barrier: Any = None, out: Any = None) -> float:
    """Seconds ``save_run`` takes for a run of 250 measurements (what it is given, the
    machine's environment included, made before the clock starts; with ``barrier``, once
    every writer is ready)."""
    records = _run_records(run, count=250)
    environment, git = collect_environment(), git_info(Path.cwd())
    if barrier is not None:
        barrier.wait()
    begin = time.perf_counter()
    save_run(path, started=started, finished=started + 1.0, command_line="pytest",
                   git=git, environment=environment, records=records)  # fmt: skip
    took = time.perf_counter() - begin
    if out is not None:
        out.put(took)
    return took


@pytest.mark.parametrize("backend", BACKENDS)
def test_four_concurrent_writers(
    backend: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """Four processes store a run of 250 measurements each, released together by a
    barrier once their runs are built, beside one writer alone: how long a writer waits for
    the others (SQLite queues them; PostgreSQL takes them side by side, on this machine's
    2 cores shared by 4 clients and their server processes)."""
    import multiprocessing

    path = _new_store(backend, tmp_path)
    _save(path, _run_records(99, count=1), 0.0)  # the schema exists before the race
    alone = min(_timed_save(path, 100 + i, float(i)) for i in range(2))
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [
        ctx.Process(target=_timed_save, args=(path, 200 + i, 10.0 + i, barrier, out))
        for i in range(4)
    ]
    for proc in procs:
        proc.start()
    times = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    print(
        f"\n{backend}: one writer alone {alone:.3f} s; four at once: slowest {max(times):.3f} s "
        f"({max(times) / alone:.1f}x), mean {sum(times) / 4:.3f} s"
    )
    record_property("store_concurrent_slowest_ratio", round(max(times) / alone, 2))
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    frame = read_results(path)
    assert len(frame) == 1 + 2 * 250 + 4 * 250
    assert frame["run_id"].nunique() == 7
