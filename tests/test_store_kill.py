"""SIGKILL at every write point of the store: before and after each SQL statement of
``save_run`` and around its commit, a child process that writes a run kills itself. After
each kill the store is readable, holds every earlier run whole, holds the killed run whole
or not at all, and takes the next run.

The kill points come from one traced run (the statements ``save_run`` executes), so the
test follows the store's code instead of a hand-kept list.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_ortperf.store.errors import StoreError
from pytest_ortperf.store.read import list_runs, load_records

HERE = Path(__file__).parent

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    sys.path.insert(0, {tests!r})
    import sqlalchemy as sa
    from sqlalchemy import event
    from ortperf_store_factories import comparison, latency, save
    from pytest_ortperf.store import connection

    point = os.environ.get("KILL_AT", "")  # "before:N", "after:N", "commit" or "" (trace)
    seen = []

    real_engine = connection._sql_engine

    def engine(url, *, write):
        eng = real_engine(url, write=write)

        @event.listens_for(eng, "before_cursor_execute")
        def before(conn, cursor, statement, params, context, many):
            seen.append(statement.split()[0].upper())
            if point == f"before:{{len(seen)}}":
                os.kill(os.getpid(), signal.SIGKILL)

        @event.listens_for(eng, "after_cursor_execute")
        def after(conn, cursor, statement, params, context, many):
            if point == f"after:{{len(seen)}}":
                os.kill(os.getpid(), signal.SIGKILL)

        @event.listens_for(eng, "commit")
        def commit(conn):
            if point == "commit":
                os.kill(os.getpid(), signal.SIGKILL)

        return eng

    connection._sql_engine = engine
    records = [latency("t.py::test_{{}}".format(i)) for i in range(3)]
    records.append(comparison("t.py::test_cmp"))
    save(sys.argv[1], records, started=float(sys.argv[2]))
    print(json.dumps(seen))
    """
).format(tests=str(HERE))


def _child(path: Path, started: float, kill_at: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KILL_AT": kill_at}
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(started)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _runs(path: Path) -> dict[int, int]:
    """Run id -> number of measurements stored with it."""
    frame = list_runs(path)
    return {int(r): int(n) for r, n in zip(frame["run_id"], frame["measurements"], strict=True)}


def test_a_kill_at_any_write_point_leaves_the_store_whole(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    first = _child(path, 1_700_000_000.0)
    assert first.returncode == 0, first.stderr
    expected = _runs(path)
    assert list(expected.values()) == [4]
    # The statements of a run stored into an existing store, traced on a copy of it.
    trace_path = tmp_path / "trace.sqlite"
    trace_path.write_bytes(path.read_bytes())
    trace = _child(trace_path, 1_700_000_001.0)
    assert trace.returncode == 0, trace.stderr
    statements = json.loads(trace.stdout.strip().splitlines()[-1])
    assert "INSERT" in statements  # the run's rows go in through SQL statements
    points = [f"{when}:{i}" for i in range(1, len(statements) + 1) for when in ("before", "after")]
    points.append("commit")
    for n, point in enumerate(points, start=1):
        killed = _child(path, 1_700_000_000.0 + n, point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        after = _runs(path)  # readable: list_runs raises StoreError on a broken store
        assert {k: v for k, v in after.items() if k in expected} == expected, point
        new = {k: v for k, v in after.items() if k not in expected}
        assert set(new.values()) <= {4}, f"{point}: a half-stored run {new}"
        expected = after
    # and the store still takes a run after all those kills
    last = _child(path, 1_800_000_000.0)
    assert last.returncode == 0, last.stderr
    assert len(_runs(path)) == len(expected) + 1
    records = load_records(path, max(_runs(path)))
    assert len(records) == 4


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_kill_points_cover_the_commit(tmp_path: Path) -> None:
    # A kill right at the commit must leave nothing of that run (all or nothing).
    path = tmp_path / "results.sqlite"
    killed = _child(path, 1_700_000_000.0, "commit")
    assert killed.returncode == -signal.SIGKILL
    if path.exists():
        try:
            runs = _runs(path)
        except StoreError:
            runs = {}  # killed before the schema itself was committed: nothing stored
        assert runs == {}
