"""The results store on a real SQLite file, with records built from injected samples."""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa
from ortperf_store_factories import (
    ENV,
    GIT,
    comparison,
    latency,
    measured_comparison,
    memory,
    noisy,
    save,
)

from pytest_ortperf import machine
from pytest_ortperf.results import LatencyResult, MemoryResult, Record, record_from_dict
from pytest_ortperf.store.errors import StoreError
from pytest_ortperf.store.location import DEFAULT_STORE, resolve_store
from pytest_ortperf.store.read import (
    list_runs,
    load_records,
    read_profiles,
    read_results,
    resolve_run_id,
)
from pytest_ortperf.store.schema import MIGRATIONS, SCHEMA_VERSION
from pytest_ortperf.store.write import prune

T0 = 1_700_000_000.0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "results.sqlite"


# -- resolve_store ------------------------------------------------------------------------


def test_resolve_store(tmp_path: Path) -> None:
    assert resolve_store(None, tmp_path) == str(tmp_path / ".ortperf/results.sqlite")
    assert resolve_store("", tmp_path) == str(tmp_path / ".ortperf/results.sqlite")
    assert resolve_store("none", tmp_path) is None
    assert resolve_store("NONE", tmp_path) is None
    assert resolve_store("out/r.db", tmp_path) == str(tmp_path / "out/r.db")
    assert resolve_store("/abs/r.db", tmp_path) == "/abs/r.db"
    url = "postgresql://user:pw@host/db"
    assert resolve_store(url, tmp_path) == url
    assert resolve_store("sqlite:///x.db", tmp_path) == "sqlite:///x.db"


# -- round trip and queries -----------------------------------------------------------------


def test_round_trip(db: Path) -> None:
    lat = latency("tests/test_a.py::test_one")
    records: list[Record] = [lat, comparison("tests/test_a.py::test_two")]
    run_id = save(db, records)
    assert run_id == 1
    assert db.is_file()
    assert load_records(db, run_id) == records

    frame = read_results(db, samples=True)
    assert list(frame["test"]) == ["tests/test_a.py::test_one", "tests/test_a.py::test_two"]
    assert list(frame["kind"]) == ["latency", "compare"]
    one, two = frame.to_dict("records")
    assert one["median"] == pytest.approx(lat.median)
    assert one["n"] == 20
    assert one["samples"] == lat.samples
    assert pd.isna(one["ratio"])
    assert one["session"]["op_histogram"] == {"Add": 1, "MatMul": 2}
    assert two["ratio"] == 0.8
    assert two["ref_median"] == pytest.approx(1e-3)
    assert two["extra"]["output_diffs"][0]["output"] == "y"
    assert one["commit"] == GIT["commit"]
    assert one["cpu_model"] == ENV["cpu_model"]
    assert one["fingerprint"] == machine.machine_fingerprint(ENV)
    assert one["providers"] == ["CPUExecutionProvider"]
    assert one["started"] == pd.Timestamp(T0, unit="s", tz="UTC")


def test_memory_records_round_trip(db: Path) -> None:
    records: list[Record] = [
        memory("t::m"),
        latency("t::a"),
        MemoryResult((1 << 20,), 0, "sampling"),  # defaults: no test, name or arena
        memory("t::m", name="second"),
    ]
    run_id = save(db, records)
    assert load_records(db, run_id) == records
    row = read_results(db).to_dict("records")[0]
    assert row["kind"] == "memory"
    assert pd.isna(row["median"])
    assert row["extra"] == {
        "peak_bytes": [300 << 20, 310 << 20, 310 << 20],
        "baseline_bytes": 250 << 20,
        "method": "vmhwm",
        "arena": {"in_use_peak_max": 12 << 20},
    }


def test_records_come_back_through_from_dict(db: Path) -> None:
    """What the store keeps is each record's ``to_dict`` form (less its derived summary):
    rebuilding it with ``from_dict`` gives the record, block ratios and arms included."""
    records: list[Record] = [
        measured_comparison("t::c", noisy(1.1, 30)),
        comparison("t::d"),
        latency("t::l", samples=noisy(2e-3, 7)),
    ]
    run_id = save(db, records)
    loaded = load_records(db, run_id)
    assert loaded == records
    assert loaded == [record_from_dict(r.to_dict()) for r in records]
    assert [r.to_dict() for r in loaded] == [r.to_dict() for r in records]
    extra = read_results(db)["extra"][0]
    arm = records[0].to_dict()["candidate"]
    assert extra["candidate"] == {k: arm[k] for k in arm.keys() - {"kind", "samples", "summary"}}


def test_load_records_skips_unknown_kinds(db: Path) -> None:
    run_id = save(db, [latency("t::a"), memory("t::m"), latency("t::b")])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE measurements SET kind = 'energy' WHERE test = 't::m'")
    assert [r.test for r in load_records(db, run_id)] == ["t::a", "t::b"]


def test_url_form_and_wal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'r.db'}"
    save(url, [latency("t::a")])
    assert len(read_results(url)) == 1
    with sqlite3.connect(tmp_path / "sub" / "r.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_two_runs_and_filters(db: Path) -> None:
    save(db, [latency("tests/test_a.py::test_x"), latency("tests/test_b.py::test_y")], started=T0)
    save(
        db,
        [latency("tests/test_a.py::test_x", median=2e-3), comparison("tests/test_c.py::t_%")],
        started=T0 + 3600,
    )
    frame = read_results(db)
    assert list(frame["run_id"]) == [1, 1, 2, 2]
    assert list(frame["test"]) == [
        "tests/test_a.py::test_x",
        "tests/test_b.py::test_y",
        "tests/test_a.py::test_x",
        "tests/test_c.py::t_%",
    ]
    assert list(read_results(db, test="test_a")["run_id"]) == [1, 2]
    assert list(read_results(db, test="t_%")["run_id"]) == [2]  # wildcards are literal
    assert list(read_results(db, name="fused")["test"]) == ["tests/test_c.py::t_%"]
    assert len(read_results(db, since=2)) == 2
    assert len(read_results(db, since="2")) == 2
    assert len(read_results(db, run=1)) == 2
    after = datetime.fromtimestamp(T0 + 1800, tz=timezone.utc)
    assert list(read_results(db, since=after)["run_id"]) == [2, 2]
    assert list(read_results(db, since=after.isoformat())["run_id"]) == [2, 2]
    assert read_results(db, test="nothing-like-this").empty
    with pytest.raises(ValueError, match="since"):
        read_results(db, since="yesterday")


def test_environment_rows_deduplicated(db: Path) -> None:
    save(db, [latency("t::a")])
    save(db, [latency("t::a")])
    save(db, [latency("t::a")], env={**ENV, "ort_version": "1.33.0"})
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        assert conn.execute(sa.text("select count(*) from environments")).scalar() == 2
    engine.dispose()
    runs = list_runs(db)
    assert list(runs["measurements"]) == [1, 1, 1]
    assert list(runs["ort_version"]) == ["1.32.0", "1.32.0", "1.33.0"]


def test_empty_run_is_stored(db: Path) -> None:
    assert save(db, []) == 1
    assert len(list_runs(db)) == 1
    assert read_results(db).empty


def test_profiles(db: Path) -> None:
    ops = pd.DataFrame({"op_type": ["MatMul", "Add"], "total_us": [300.0, 100.0], "count": [2, 1]})
    by_index = ops.set_index("op_type")
    run_id = save(
        db,
        [comparison("t::a"), latency("t::b")],
        profiles={
            ("t::a", "fused"): ops,
            ("t::b", "latency"): by_index,
            ("t::missing", "x"): [{"op_type": "Relu", "total_us": 1.0}],
        },
    )
    prof = read_profiles(db, run_id=run_id)
    assert list(prof["test"]) == ["t::a", "t::a", "t::b", "t::b"]
    assert list(prof["op_type"]) == ["MatMul", "Add", "MatMul", "Add"]
    assert list(prof["share"]) == [0.75, 0.25, 0.75, 0.25]


def test_prune(db: Path) -> None:
    for i in range(5):
        save(
            db,
            [latency(f"t::{i}"), comparison(f"t::{i}")],
            started=T0 + i,
            profiles={(f"t::{i}", "fused"): [{"op_type": "Add", "total_us": 1.0}]},
        )
    assert prune(db, 2) == (3, 6)
    assert list(list_runs(db)["run_id"]) == [4, 5]
    assert set(read_results(db)["test"]) == {"t::3", "t::4"}
    assert len(read_profiles(db)) == 2
    assert prune(db, 2) == (0, 0)
    assert prune(db, 0) == (2, 4)
    assert list_runs(db).empty


def test_resolve_run_id(db: Path) -> None:
    for i in range(3):
        save(db, [latency("t::a")], started=T0 + i)
    assert resolve_run_id(db, "latest") == 3
    assert resolve_run_id(db, "latest~2") == 1
    assert resolve_run_id(db, 2) == 2
    with pytest.raises(StoreError, match="no run with id 9"):
        resolve_run_id(db, "9")
    with pytest.raises(StoreError, match="fewer runs"):
        resolve_run_id(db, "latest~3")
    with pytest.raises(StoreError, match="bad run"):
        resolve_run_id(db, "yesterday")


# -- errors ---------------------------------------------------------------------------------


def test_corrupt_file(db: Path) -> None:
    db.write_bytes(b"this is not a database, just some text " * 200)
    with pytest.raises(StoreError, match="not a readable SQLite database") as info:
        save(db, [latency("t::a")])
    assert str(db) in str(info.value)
    with pytest.raises(StoreError, match="not a readable SQLite database") as info:
        read_results(db)
    assert str(db) in str(info.value)


def test_newer_schema(db: Path) -> None:
    save(db, [latency("t::a")])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(StoreError) as info:
        save(db, [latency("t::a")])
    message = str(info.value)
    assert str(db) in message
    assert f"written by a newer pytest-ortperf: schema 99 > {SCHEMA_VERSION}" in message
    with pytest.raises(StoreError, match="newer pytest-ortperf"):
        read_results(db)


def test_foreign_database(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (x INTEGER)")
    with pytest.raises(StoreError, match="not a pytest-ortperf store"):
        save(db, [latency("t::a")])


def test_unwritable_location(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be")
    target = blocker / "sub" / "results.sqlite"
    with pytest.raises(StoreError, match="cannot create its directory") as info:
        save(target, [latency("t::a")])
    assert str(target) in str(info.value)


def test_missing_store_on_read(tmp_path: Path) -> None:
    missing = tmp_path / "nope.sqlite"
    with pytest.raises(StoreError, match="no results store here") as info:
        read_results(missing)
    assert str(missing) in str(info.value)
    assert not missing.exists()


def test_default_store_is_under_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    save(tmp_path / DEFAULT_STORE, [latency("t::a")])
    assert len(read_results()) == 1


class _BadRecord:
    """Looks like a record until it is converted."""

    kind = "latency"
    test = "t::bad"
    name = "bad"
    api = "run"
    measured = True

    def to_dict(self) -> dict[str, Any]:
        raise ValueError("cannot convert this record")


def test_failed_write_keeps_earlier_runs(db: Path) -> None:
    save(db, [latency("t::a")])
    bad: Any = _BadRecord()
    with pytest.raises(StoreError, match="cannot store a record") as info:
        save(db, [latency("t::b"), bad])
    assert str(db) in str(info.value)
    with pytest.raises(StoreError, match="cannot store a profile"):
        save(db, [latency("t::c")], profiles={("t::c", "latency"): [{"op_type": "Add"}]})
    assert list(list_runs(db)["run_id"]) == [1]
    assert list(read_results(db)["test"]) == ["t::a"]
    assert save(db, [latency("t::d")]) >= 2  # the store is still usable


def test_migration_mechanism(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save(db, [latency("t::a")])
    applied: list[int] = []

    def to_v3(conn: sa.Connection) -> None:
        applied.append(2)
        conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN note TEXT")

    monkeypatch.setattr("pytest_ortperf.store.schema.SCHEMA_VERSION", 3)
    monkeypatch.setitem(MIGRATIONS, 2, to_v3)
    assert len(read_results(db)) == 1
    assert applied == []  # reading takes an older store as it is
    save(db, [latency("t::b")])
    assert applied == [2]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(3,)]
        assert "note" in [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    save(db, [latency("t::c")])
    assert applied == [2]  # migrated once


def test_missing_migration_is_an_error(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save(db, [latency("t::a")])
    monkeypatch.setattr("pytest_ortperf.store.schema.SCHEMA_VERSION", 4)
    with pytest.raises(StoreError, match="no migration from schema 2"):
        save(db, [latency("t::b")])


# -- concurrency ----------------------------------------------------------------------------


def _writer(path: str, worker: int, runs: int) -> None:
    for i in range(runs):
        recs: list[LatencyResult] = [latency(f"t::w{worker}_{i}_{j}") for j in range(50)]
        save(path, recs, started=T0 + i)


def test_concurrent_writers(db: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(db), w, 5)) for w in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0]
    frame = read_results(db)
    assert frame["run_id"].nunique() == 10
    assert len(frame) == 10 * 50
    assert {t.split("_")[0] for t in frame["test"]} == {"t::w0", "t::w1"}


# -- machine facts ----------------------------------------------------------------------------


def test_collect_environment() -> None:
    data = machine.collect_environment()
    for key in ("ort_version", "providers", "onnx_version", "numpy_version", "python_version"):
        assert key in data
    assert "CPUExecutionProvider" in data["providers"]
    assert data["logical_cores"] >= 1
    assert data["fingerprint"] == machine.machine_fingerprint(data)


def test_fingerprint_ignores_software() -> None:
    base = machine.machine_fingerprint(ENV)
    assert len(base) == 12
    assert (
        machine.machine_fingerprint({**ENV, "ort_version": "9.9", "python_version": "3.99"}) == base
    )
    assert machine.machine_fingerprint({**ENV, "memory_bytes": (16 << 30) + 12345}) == base
    assert machine.machine_fingerprint({**ENV, "logical_cores": 8}) != base
    assert machine.machine_fingerprint({**ENV, "cpu_model": "Other"}) != base


def test_git_info_outside_repo(tmp_path: Path) -> None:
    assert machine.git_info(tmp_path / "does-not-exist") == {
        "commit": None,
        "branch": None,
        "dirty": None,
    }


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_info_in_repo(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "trunk")
    (tmp_path / "f.txt").write_text("1")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    info = machine.git_info(tmp_path)
    assert info["branch"] == "trunk"
    assert info["dirty"] is False
    assert info["commit"] is not None and len(info["commit"]) == 40
    (tmp_path / "f.txt").write_text("2")
    assert machine.git_info(tmp_path)["dirty"] is True
    assert machine.git_info(tmp_path, {"CI_COMMIT_BRANCH": "main"})["branch"] == "trunk"

    # CI checks out a detached commit and names the branch in its variables
    git("checkout", "-q", "--detach")
    assert machine.git_info(tmp_path, {})["branch"] is None
    assert machine.git_info(tmp_path, {"CI_COMMIT_BRANCH": "main"})["branch"] == "main"
    pull_request = {"GITHUB_REF_NAME": "12/merge", "GITHUB_HEAD_REF": "fix-gemm"}
    assert machine.git_info(tmp_path, pull_request)["branch"] == "fix-gemm"
    assert machine.git_info(tmp_path, {"GITHUB_REF_NAME": "12/merge"})["branch"] is None
