"""The results store on a real PostgreSQL server (issue 13), beside SQLite where both apply.

The suite's server comes from ``$ORTPERF_TEST_POSTGRES`` (the ``postgres`` fixture: ``bash
.ci/run`` starts one); each test makes its own database. The outage test starts a private
server of its own (tests/pg_server.py), to stop it in the middle of a run.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from ortperf_store_factories import ENV, GIT, comparison, latency, memory, save
from pg_server import PASSWORD, Postgres, Server, ServerError, start

from pytest_ortperf.cli import main as ortperf_cli
from pytest_ortperf.store.errors import StoreError
from pytest_ortperf.store.read import load_records, read_profiles, read_results
from pytest_ortperf.store.schema import MEASUREMENTS_VIEW, SCHEMA_VERSION
from pytest_ortperf.store.write import _environment_row, save_run

DATA = Path(__file__).parent / "data"
SUITE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("ORTPERF_")}
ORTPERF = str(Path(sys.executable).with_name("ortperf"))
"""The ``ortperf`` command of this environment."""


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(dialect, a new empty store of it)."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "results.sqlite")
        return
    server: Postgres = request.getfixturevalue("postgres")
    yield "postgresql", server.url(server.new_database())


def _v1_store(dialect: str, url: str) -> None:
    """A store as pytest-ortperf 0.1 left it: the version-1 schema and one run."""
    lines = (DATA / f"store_schema_v1.{dialect}.sql").read_text().splitlines()
    ddl = "\n".join(line for line in lines if not line.startswith("--"))
    engine = sa.create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.begin() as conn:
        for statement in ddl.split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)
        conn.exec_driver_sql(
            "INSERT INTO environments (digest, fingerprint, cpu_model, cores)"
            " VALUES ('d1', 'f00dfeedbeef', 'Old CPU', 2)"
        )
        conn.exec_driver_sql(
            'INSERT INTO runs (started, finished, "commit", branch, environment_id)'
            " VALUES (1600000000, 1600000005, 'aaaaaaaa', 'main', 1)"
        )
        conn.exec_driver_sql(
            "INSERT INTO measurements (run_id, test, name, kind, api, measured, median)"
            " VALUES (1, 't::old', 'latency', 'latency', 'run', true, 0.002)"
        )
    engine.dispose()


def _version(url: str) -> int:
    engine = sa.create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.connect() as conn:
        version = conn.execute(sa.text("SELECT max(version) FROM schema_version")).scalar()
    engine.dispose()
    return int(version or 0)


def _view(url: str) -> list[dict[str, object]]:
    engine = sa.create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.connect() as conn:
        query = f"SELECT * FROM {MEASUREMENTS_VIEW} ORDER BY measurement_id"
        rows = [dict(row) for row in conn.execute(sa.text(query)).mappings()]
    engine.dispose()
    return rows


def test_a_new_store_has_the_current_schema_and_the_view(backend: tuple[str, str]) -> None:
    _, url = backend
    save(url, [latency("t::a"), comparison("t::b"), memory("t::c")])
    assert _version(url) == SCHEMA_VERSION == 2
    rows = _view(url)
    assert [row["test"] for row in rows] == ["t::a", "t::b", "t::c"]
    assert {row["machine_class"] for row in rows} == {_environment_row(ENV)["fingerprint"]}
    assert rows[0]["branch"] == "main" and rows[0]["commit"] == GIT["commit"]
    assert rows[1]["ratio"] == pytest.approx(0.8)


def test_a_version_1_store_is_read_as_it_is_and_migrated_by_the_next_write(
    backend: tuple[str, str],
) -> None:
    dialect, url = backend
    _v1_store(dialect, url)
    assert list(read_results(url)["test"]) == ["t::old"]  # read without migrating
    assert _version(url) == 1
    save(url, [latency("t::new")])
    assert _version(url) == 2
    frame = read_results(url)
    assert list(frame["test"]) == ["t::old", "t::new"]
    assert next(row["machine_class"] for row in _view(url)) == "f00dfeedbeef"
    assert [row["run_uid"] for row in _view(url)] == [None, None]


def test_a_store_of_a_newer_version_is_refused(backend: tuple[str, str]) -> None:
    _, url = backend
    save(url, [latency("t::a")])
    engine = sa.create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO schema_version (version) VALUES (99)")
    engine.dispose()
    for action in (lambda: save(url, [latency("t::b")]), lambda: read_results(url)):
        with pytest.raises(StoreError, match="newer pytest-ortperf: schema 99 > 2"):
            action()


def test_a_run_with_a_known_uid_is_stored_once(backend: tuple[str, str]) -> None:
    _, url = backend
    kwargs = dict(
        started=1.7e9, finished=1.7e9 + 5, command_line="pytest --ortperf", git=GIT,
        environment=ENV, records=[latency("t::a"), latency("t::b")], uid="run-uid-1",
    )  # fmt: skip
    first = save_run(url, **kwargs)  # type: ignore[arg-type]
    again = save_run(url, **kwargs)  # type: ignore[arg-type]
    assert first == again
    assert len(read_results(url)) == 2


# ------------------------------------------------------------------ a whole run, both ways

SUITE = """
import pytest
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

BASE = 1e-4


@pytest.mark.parametrize("i", range({n}))
def test_latency(i, ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[[BASE * (1 + 0.001 * k) for k in range(25)]])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={{"N": 1}}), name=f"lr{{i}}")


def test_compare(ort_session, ort_feeds, ortperf):
    ref = [BASE * (1 + 0.002 * (i % 7)) for i in range(25)]
    ortperf.engine = ScriptedEngine(interleave=[[ref, [r * 0.9 for r in ref]]])
    a = ort_session(models.attention(), optimization="disable")
    b = ort_session(models.attention())
    ortperf.compare(a, b, ort_feeds(a, dims={{"B": 1}}), name="attention")
{extra}
"""


def _pytest(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=cwd,
        env={**SUITE_ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 300) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return out


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    # a server and a file decode JSON into equal objects but not equal text
    return frame.reset_index(drop=True)


def test_a_full_run_reads_back_the_same_from_postgresql_and_sqlite(
    postgres: Postgres, tmp_path: Path
) -> None:
    """One ``--ortperf`` run, spooled (its server unreachable), then synced to a database
    on the server and to an SQLite file: both read back the same."""
    (tmp_path / "test_perf.py").write_text(SUITE.format(n=3, extra=""))
    unreachable = Postgres(port=1).url("perf")
    out = _finish(_pytest(tmp_path, "--ortperf", f"--ortperf-store={unreachable}"))
    assert "results NOT stored" in out and "spooled to" in out
    spool = tmp_path / ".ortperf" / "spool"
    (spooled,) = spool.iterdir()
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / spooled.name).write_text(spooled.read_text())

    pg_url = postgres.url(postgres.new_database())
    sqlite_path = str(tmp_path / "results.sqlite")
    for url, directory in ((pg_url, spool), (sqlite_path, copy)):
        code = ortperf_cli(["sync", "--store", url, "--spool", str(directory), "--any-store"])
        assert code == 0
        assert list(directory.iterdir()) == []
    from_pg = read_results(pg_url, samples=True)
    from_sqlite = read_results(sqlite_path, samples=True)
    assert len(from_pg) == 4 and set(from_pg["kind"]) == {"latency", "compare"}
    pd.testing.assert_frame_equal(_comparable(from_pg), _comparable(from_sqlite))
    assert load_records(pg_url, 1) == load_records(sqlite_path, 1)
    pd.testing.assert_frame_equal(read_profiles(pg_url), read_profiles(sqlite_path))


def test_four_concurrent_pytest_processes_lose_nothing(postgres: Postgres, tmp_path: Path) -> None:
    url = postgres.url(postgres.new_database())  # empty: the four race to create the schema
    (tmp_path / "test_perf.py").write_text(SUITE.format(n=25, extra="").replace(
        "\ndef test_compare", "\ndef _unused"))  # fmt: skip
    began = time.perf_counter()
    procs = [_pytest(tmp_path, "--ortperf", f"--ortperf-store={url}") for _ in range(4)]
    outputs = [_finish(proc) for proc in procs]
    took = time.perf_counter() - began
    for out in outputs:
        assert "25 results stored in" in out, out
    frame = read_results(url)
    assert len(frame) == 100 and frame["run_id"].nunique() == 4
    assert frame.groupby("run_id").size().tolist() == [25, 25, 25, 25]
    assert postgres.count(url.rsplit("/", 1)[1], "runs") == 4
    print(f"4 processes x 25 measurements stored in {took:.1f} s")


# ------------------------------------------------------------------ the server goes away

OUTAGE = """

def test_server_goes_away():
    import os, pathlib, time
    flags = pathlib.Path(os.environ["OUTAGE_FLAGS"])
    (flags / "reached").touch()
    for _ in range(600):
        if (flags / "stopped").exists():
            return
        time.sleep(0.1)
    raise AssertionError("the server was not stopped")
"""


@pytest.fixture
def private_server(postgres: Postgres) -> Iterator[Server]:
    """A server of this test's own (it is stopped and started again), beside the suite's;
    durable (what it acknowledged must outlive it); in /tmp, where the ``postgres`` user
    can enter when the tests run as root."""
    top = Path(tempfile.mkdtemp(prefix="ortperf-pg-", dir="/tmp"))
    try:
        try:
            server = start(top, durable=True)
        except ServerError as exc:
            pytest.fail(f"cannot start a private PostgreSQL server: {exc}", pytrace=False)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_run_whose_server_stops_is_spooled_then_synced_exactly_once(
    private_server: Server, tmp_path: Path
) -> None:
    server = private_server
    dbname = server.new_database()
    url = server.url(dbname)
    flags = tmp_path / "flags"
    flags.mkdir()
    (tmp_path / "test_perf.py").write_text(SUITE.format(n=4, extra=OUTAGE))
    proc = _pytest(tmp_path, "--ortperf", env={"ORTPERF_STORE": url, "OUTAGE_FLAGS": str(flags)})
    deadline = time.monotonic() + 120
    while not (flags / "reached").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended early"
        time.sleep(0.05)
    server.stop()
    (flags / "stopped").touch()
    out = _finish(proc)  # the tests pass: the store is history
    assert "6 passed" in out
    assert "results NOT stored" in out and "spooled to" in out
    spool = tmp_path / ".ortperf" / "spool"
    (spooled,) = spool.iterdir()
    spooled_text = spooled.read_text()
    assert PASSWORD not in spooled_text and "s3cr3t" not in out

    server.start()
    env = {**SUITE_ENV, "ORTPERF_STORE": url}
    sync = subprocess.run(
        [ORTPERF, "sync"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert "1 spooled run written" in sync.stdout
    assert "s3cr3t" not in sync.stdout + sync.stderr
    assert list(spool.iterdir()) == []
    frame = read_results(url)
    assert len(frame) == 5 and frame["run_id"].nunique() == 1  # 4 latencies, 1 comparison

    # the same spool file again (a sync killed before it removed the file): still once
    spooled.write_text(spooled_text)
    again = subprocess.run(
        [ORTPERF, "sync"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert list(spool.iterdir()) == []
    assert len(read_results(url)) == 5


def test_sqlite_store_file_is_untouched_by_the_view(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    save(path, [latency("t::a")])
    with sqlite3.connect(path) as conn:
        kinds = dict(
            conn.execute("SELECT name, type FROM sqlite_master WHERE name LIKE 'ortperf%'")
        )
    assert kinds == {MEASUREMENTS_VIEW: "view"}
