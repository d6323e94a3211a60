"""What the store and the ``ortperf`` command do when things go wrong: runs stopped by
Ctrl-C, files that are not stores, damaged rows, full disks, crashes and broken pipes."""

from __future__ import annotations

import errno
import io
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from ortperf_store_factories import comparison, latency, save
from sqlalchemy import event
from sqlalchemy.engine import Engine

from pytest_ortperf import cli
from pytest_ortperf.cli import main
from pytest_ortperf.store.connection import _sql_engine
from pytest_ortperf.store.errors import StoreError
from pytest_ortperf.store.history import read_history
from pytest_ortperf.store.read import (
    interrupted_runs,
    list_runs,
    load_records,
    read_results,
    resolve_run_id,
)
from pytest_ortperf.store.write import save_run

T0 = 1_700_000_000.0


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_ids(out: str) -> list[int]:
    """The run ids in the first column of the table rows of ``ortperf`` output."""
    return [int(line.split()[0]) for line in out.splitlines() if line[:5].strip().isdigit()]


# ------------------------------------------------------------------ 6. interrupted runs

CTRL_C_SUITE = """
import os

import pytest

from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

SAMPLES = [[1e-4 * (1 + 0.001 * i) for i in range(25)]]


@pytest.mark.parametrize("i", range(12))
def test_lr(i, ort_session, ort_feeds, ortperf):
    if i == 4 and os.environ.get("ORTPERF_TEST_CTRL_C"):
        raise KeyboardInterrupt  # Ctrl-C in the 5th test
    ortperf.engine = ScriptedEngine(measure=SAMPLES)
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")
"""

RUN = ("-p", "no:cacheprovider", "--ortperf")


def test_ctrl_c_stores_a_run_marked_interrupted_that_comparisons_leave_out(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytester.makepyfile(test_perf=CTRL_C_SUITE)
    db = pytester.path / ".ortperf" / "results.sqlite"
    for _ in range(2):
        pytester.runpytest(*RUN).assert_outcomes(passed=12)
    monkeypatch.setenv("ORTPERF_TEST_CTRL_C", "1")
    result = pytester.runpytest(*RUN, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["ortperf: 4 results stored in *results.sqlite (run 3, marked*"])
    monkeypatch.delenv("ORTPERF_TEST_CTRL_C")
    capsys.readouterr()

    runs = list_runs(db)
    assert list(runs["measurements"]) == [12, 12, 4]
    assert list(runs["interrupted"]) == [False, False, True]
    frame = read_results(db)
    assert frame.groupby("run_id")["interrupted"].first().to_dict() == {1: False, 2: False, 3: True}
    assert set(read_results(db, include_interrupted=False)["run_id"]) == {1, 2}
    assert interrupted_runs(db) == {3}

    # `ortperf runs` marks it
    code, out, _ = run(capsys, "runs", "--store", str(db))
    assert code == 0
    lines = {int(line.split()[0]): line for line in out.splitlines() if line[:3].strip().isdigit()}
    assert lines[3].split()[-1] == "interrupted"
    assert lines[1].split()[-1] == "complete"
    assert "interrupted: stopped before all its tests ran" in out

    # latest / latest~N count complete runs only
    assert resolve_run_id(db, "latest") == 2
    assert resolve_run_id(db, "latest~1") == 1
    assert resolve_run_id(db, "latest", include_interrupted=True) == 3
    with pytest.raises(StoreError, match="fewer runs: 2 complete, 1 interrupted"):
        resolve_run_id(db, "latest~2")
    code, out, err = run(capsys, "compare", "latest~1", "latest", "--store", str(db))
    assert code == 0, err
    assert "run 2 vs run 1: " in out

    # an interrupted run named by its id is refused, unless asked for
    code, out, err = run(capsys, "compare", "2", "3", "--store", str(db))
    assert code == cli.EXIT_USAGE
    assert out == ""
    assert "run 3 was interrupted" in err and "--include-interrupted" in err
    code, out, err = run(capsys, "compare", "2", "3", "--include-interrupted", "--store", str(db))
    assert code == 0, err
    # 4 latencies in both runs (reported, not judged: one earlier run), 8 only in run 2
    assert "run 3 vs run 2: 4 not gated, 8 in one run only" in out
    assert "run 3 was interrupted: its results are partial" in out

    # history: of the complete runs, unless asked for
    code, out, _ = run(capsys, "history", "test_lr[0]", "--store", str(db))
    assert code == 0
    assert run_ids(out) == [1, 2]
    code, out, _ = run(capsys, "history", "test_lr[0]", "--include-interrupted", "--store", str(db))
    assert run_ids(out) == [1, 2, 3]
    keys = [("test_perf.py::test_lr[0]", "lr", "latency", "run")]
    points = read_history(str(db), keys)[keys[0]]
    assert [p.run_id for p in points] == [1, 2]
    points = read_history(str(db), keys, last=1)[keys[0]]
    assert [p.run_id for p in points] == [2]  # the last complete run, not the interrupted one
    points = read_history(str(db), keys, include_interrupted=True)[keys[0]]
    assert [p.run_id for p in points] == [1, 2, 3]


def test_a_complete_run_is_not_marked(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    save(db, [latency("t::a")])
    save_run(
        db,
        started=T0 + 10,
        finished=T0 + 11,
        command_line="pytest --ortperf",
        git={},
        environment={},
        records=[latency("t::a")],
        interrupted=True,
    )
    assert list(list_runs(db)["interrupted"]) == [False, True]
    with sqlite3.connect(db) as conn:
        extras = [row[0] for row in conn.execute("SELECT extra FROM runs ORDER BY id")]
    assert extras == ["{}", '{"interrupted": true}']


# ------------------------------------------------------------------ 9. files that are not stores


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


def _foreign_db(path: Path, table: str) -> bytes:
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute(f"INSERT INTO {table} (body) VALUES ('keep me')")
    conn.commit()
    conn.close()
    assert _journal_mode(path) == "delete"
    return path.read_bytes()


@pytest.mark.parametrize("table", ["notes", "runs", "schema_version"])
def test_another_sqlite_database_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str
) -> None:
    path = tmp_path / "app.db"
    before = _foreign_db(path, table)
    with pytest.raises(StoreError, match="not a pytest-ortperf store") as info:
        save(path, [latency("t::a")])
    assert str(path) in str(info.value)
    with pytest.raises(StoreError, match="not a pytest-ortperf store"):
        read_results(path)
    code, _, err = run(capsys, "runs", "--store", str(path))
    assert code == cli.EXIT_USAGE
    assert str(path) in err and "not a pytest-ortperf store" in err
    assert path.read_bytes() == before
    assert _journal_mode(path) == "delete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm


@pytest.mark.parametrize(
    "content",
    [b"not a database", b"not a database at all, just text " * 200, b"SQLite format 3\x00" * 300],
    ids=["short", "text", "bad-sqlite"],
)
def test_a_file_that_is_not_sqlite_is_refused_and_left_as_it_was(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "results.sqlite"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="not a readable SQLite database") as info:
        save(path, [latency("t::a")])
    assert str(path) in str(info.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def test_an_empty_file_and_an_empty_database_are_taken(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert save(empty, [latency("t::a")]) == 1
    blank = tmp_path / "blank.sqlite"  # an SQLite database holding nothing
    conn = sqlite3.connect(blank)
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    assert blank.stat().st_size > 0
    assert save(blank, [latency("t::a")]) == 1
    assert len(read_results(blank)) == 1


def test_a_writer_switching_a_new_store_to_wal_waits_for_another_writers_lock(
    tmp_path: Path,
) -> None:
    # SQLite answers the switch to WAL "database is locked" at once, without its busy
    # handler, while another connection holds the write lock: writers that open a new
    # store together (CI shards, xdist workers) must take turns, not fail.
    path = tmp_path / "results.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, other.execute, ("COMMIT",))
    release.start()
    try:
        assert save(path, [latency("t::a")]) == 1
    finally:
        release.join()
        other.close()
    assert _journal_mode(path) == "wal"
    assert len(read_results(path)) == 1


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a file") as info:
        save(tmp_path, [latency("t::a")])
    assert str(tmp_path) in str(info.value)


def test_the_plugin_leaves_another_database_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=CTRL_C_SUITE)
    path = pytester.path / "app.db"
    before = _foreign_db(path, "notes")
    result = pytester.runpytest(*RUN, f"--ortperf-store={path}")
    result.assert_outcomes(passed=12)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ortperf: results NOT stored: *app.db: not a pytest-ortperf*"])
    assert path.read_bytes() == before
    assert _journal_mode(path) == "delete"


# ------------------------------------------------------------------ 10. damaged rows, exit codes


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.sqlite"
    save(path, [latency("t::lat"), comparison("t::cmp")])
    save(path, [latency("t::lat"), comparison("t::cmp", ratio=0.9)], started=T0 + 60)
    return path


def _damage(path: Path, sql: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql)
    conn.close()


def test_a_corrupt_samples_blob_names_the_row_and_column(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _damage(db, "UPDATE measurements SET samples = x'0102' WHERE id = 3")
    for argv in (["compare", "1", "2"], ["export", "--samples"]):
        code, _, err = run(capsys, *argv, "--store", str(db))
        assert code == cli.EXIT_USAGE, argv
        assert err.startswith("ortperf: error: ")
        assert len(err.strip().splitlines()) == 1
        for part in (str(db), "measurement 3 (run 2)", "column samples"):
            assert part in err, (argv, err)
    with pytest.raises(StoreError, match=r"measurement 3 \(run 2\), column samples"):
        load_records(db, 2)
    assert len(load_records(db, 1)) == 2  # the other run is still readable


@pytest.mark.parametrize(
    ("sql", "column", "where"),
    [
        ("UPDATE measurements SET session = '{bad' WHERE id = 3", "session", "measurement 3"),
        ("UPDATE measurements SET extra = 'nope' WHERE id = 4", "extra", "measurement 4"),
        ("UPDATE environments SET providers = '[' WHERE id = 1", "providers", "run 1"),
        ("UPDATE runs SET started = 'yesterday' WHERE id = 2", "started", "run 2"),
        ("UPDATE runs SET finished = 1e300 WHERE id = 1", "finished", "run 1"),
        ("UPDATE runs SET extra = '{oops' WHERE id = 2", "extra", "run 2"),
    ],
)
def test_bad_json_and_times_name_the_store_row_and_column(
    db: Path, capsys: pytest.CaptureFixture[str], sql: str, column: str, where: str
) -> None:
    _damage(db, sql)
    with pytest.raises(StoreError) as info:
        read_results(db, samples=True)
    message = str(info.value)
    assert str(db) in message and where in message and f"column {column}" in message
    code, _, err = run(capsys, "history", "--store", str(db))
    assert code == cli.EXIT_USAGE
    assert where in err and f"column {column}" in err and "Traceback" not in err


def test_damaged_comparison_record_names_its_row(db: Path) -> None:
    _damage(db, "UPDATE measurements SET extra = '{\"candidate\": {}}' WHERE id = 4")
    with pytest.raises(StoreError, match=r"measurement 4 \(run 2\), column extra"):
        load_records(db, 2)


def test_an_internal_error_exits_3_with_the_traceback(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("a bug")

    monkeypatch.setattr("pytest_ortperf.store.read.list_runs", broken)
    code, _, err = run(capsys, "runs", "--store", str(db))
    assert code == cli.EXIT_INTERNAL == 3
    assert "ortperf: internal error: ValueError: a bug" in err
    assert "Traceback (most recent call last)" in err
    assert "please report it" in err


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "exit status:" in out
    for line in (
        "0  success",
        "1  `compare` or `ab` found a regression",
        "2  usage or input error",
    ):
        assert line in out
    assert "3  internal error" in out


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_broken_pipe_exits_quietly_in_process(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    code = main(["export", "--store", str(db)])
    monkeypatch.undo()
    assert code == 0
    assert capsys.readouterr().err == ""


def test_broken_pipe_exits_quietly(db: Path) -> None:
    """``ortperf export | head``: the reader is gone before anything is written."""
    read, write = os.pipe()
    os.close(read)  # no reader: every write fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from pytest_ortperf.cli import main; "
             "sys.exit(main())", "export", "--store", str(db)],
            stdout=write,
            stderr=subprocess.PIPE,
            cwd=db.parent,  # the package installed, not one in the current directory
            text=True,
            timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 0


# ------------------------------------------------------------------ 11. full disks, exit status


def _engine_with(monkeypatch: pytest.MonkeyPatch, setup: Callable[[Engine], None]) -> None:
    real = _sql_engine

    def engine(url: Any, *, write: bool) -> Engine:
        eng = real(url, write=write)
        setup(eng)
        return eng

    monkeypatch.setattr("pytest_ortperf.store.connection._sql_engine", engine)


def _full_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's own SQLITE_FULL, for real: no page may be added to the database."""

    def setup(eng: Engine) -> None:
        @event.listens_for(eng, "connect")
        def limit(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            pages = cursor.execute("PRAGMA page_count").fetchone()[0]
            cursor.execute(f"PRAGMA max_page_count = {max(pages, 1)}")
            cursor.close()

    _engine_with(monkeypatch, setup)


def _io_error_on_insert(monkeypatch: pytest.MonkeyPatch) -> None:
    def setup(eng: Engine) -> None:
        @event.listens_for(eng, "before_cursor_execute")
        def fail(*args: Any) -> None:
            if args[2].lstrip().upper().startswith("INSERT"):
                raise sqlite3.OperationalError("disk I/O error")

    _engine_with(monkeypatch, setup)


BIG = [latency(f"t::{i}", n=2000) for i in range(40)]


def test_a_full_database_says_disk_full(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _full_database(monkeypatch)
    with pytest.raises(StoreError) as info:
        save(db, BIG, started=T0 + 120)
    assert str(db) in str(info.value)
    assert "disk full" in str(info.value)
    monkeypatch.undo()
    assert list(list_runs(db)["run_id"]) == [1, 2]  # nothing of the run, the rest intact


@pytest.mark.parametrize("free", [4096, 10 << 30])
def test_an_io_error_on_a_full_disk_says_disk_full(
    db: Path, monkeypatch: pytest.MonkeyPatch, free: int
) -> None:
    _io_error_on_insert(monkeypatch)
    usage = shutil.disk_usage(db.parent)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=free))
    with pytest.raises(StoreError) as info:
        save(db, [latency("t::a")], started=T0 + 120)
    message = str(info.value)
    assert "disk I/O error" in message
    if free < 1 << 20:  # store.connection.LOW_DISK_BYTES
        assert f"disk full: {free} bytes free in {db.parent}" in message
    else:
        assert "disk full" not in message


STORE_SUITE = """
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine


def test_lr(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[[1e-4 * (1 + 0.001 * i) for i in range(25)]])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")
"""


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("boom in the store code")


@pytest.mark.parametrize("failure", ["disk full", "save_run crashes", "git_info crashes"])
def test_a_store_failure_is_a_note_and_never_changes_the_exit_status(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    from pytest_ortperf import machine

    pytester.makepyfile(test_perf=STORE_SUITE)
    first = pytester.runpytest(*RUN)
    assert first.ret == 0
    if failure == "disk full":
        _full_database(monkeypatch)
        expected = "*results NOT stored: *results.sqlite: disk full*"
        pytester.makepyfile(test_perf=STORE_SUITE.replace("range(25)", "range(5000)"))
    elif failure == "save_run crashes":
        monkeypatch.setattr("pytest_ortperf.store.write.save_run", _boom)
        expected = (
            "*results NOT stored: unexpected RuntimeError: boom in the store code; spooled to *"
        )
    else:
        monkeypatch.setattr(machine, "git_info", _boom)  # before the run could be spooled
        expected = "*results NOT stored: unexpected RuntimeError: boom in the store code"
    # (the JSON file needs git_info too)
    json_file = () if failure == "git_info crashes" else ("--ortperf-json=out.json",)
    result = pytester.runpytest(*RUN, *json_file)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([expected])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    if json_file:
        assert (pytester.path / "out.json").is_file()  # the results kept elsewhere
    monkeypatch.undo()
    assert list(list_runs(pytester.path / ".ortperf" / "results.sqlite")["run_id"]) == [1]


def test_a_failing_test_keeps_its_status_when_the_store_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_perf=STORE_SUITE + "\n\ndef test_fails():\n    assert False\n")
    monkeypatch.setattr("pytest_ortperf.store.write.save_run", _boom)
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def disk_fills_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Files opened for writing under ``tmp_path`` take half of what is written to them,
    then fail with ENOSPC (whether opened by path or, as temp files are, by descriptor)."""
    real_open = io.open

    class Full:
        def __init__(self, fh: Any) -> None:
            self._fh = fh

        def write(self, data: Any) -> int:
            self._fh.write(data[: len(data) // 2])
            self._fh.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name: str) -> Any:
            return getattr(self._fh, name)

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self._fh.close()

    def under_tmp(file: Any) -> bool:
        if isinstance(file, int):
            file = os.readlink(f"/proc/self/fd/{file}")
        return str(file).startswith(str(tmp_path))

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        fh = real_open(file, mode, *args, **kwargs)
        if any(m in mode for m in "wax") and under_tmp(file):
            return Full(fh)
        return fh

    monkeypatch.setattr(io, "open", fake_open)
    yield
    monkeypatch.setattr(io, "open", real_open)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize("existing", [False, True])
def test_export_on_a_full_disk_leaves_no_partial_file(
    db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    fmt: str,
    existing: bool,
) -> None:
    target = tmp_path / f"out.{fmt}"
    if existing:
        target.write_text("the previous export\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    request.getfixturevalue("disk_fills_up")
    code, _, err = run(capsys, "export", "--format", fmt, "-o", str(target), "--store", str(db))
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no 0-byte file, no temp
    if existing:
        assert target.read_text() == "the previous export\n"
    assert code == cli.EXIT_USAGE
    assert f"cannot write {target}: disk full" in err


@pytest.fixture
def parquet_writer(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[..., None]], None]:
    """Installs a stand-in ``DataFrame.to_parquet`` and makes pyarrow look installed."""
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return real_find_spec("pandas") if name == "pyarrow" else real_find_spec(name, *args)

    def install(writer: Callable[..., None]) -> None:
        monkeypatch.setattr(importlib.util, "find_spec", find_spec)
        monkeypatch.setattr(pd.DataFrame, "to_parquet", writer)

    return install


def test_parquet_export_on_a_full_disk_leaves_no_partial_file(
    db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    parquet_writer: Callable[[Callable[..., None]], None],
) -> None:
    def to_parquet(frame: pd.DataFrame, path: Any, **kwargs: Any) -> None:
        with open(path, "wb") as fh:
            fh.write(b"PAR1" + b"x" * 1000)  # half a file, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    parquet_writer(to_parquet)
    target = tmp_path / "out.parquet"
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run(
        capsys, "export", "--format", "parquet", "-o", str(target), "--store", str(db)
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no partial file, no temp
    assert code == cli.EXIT_USAGE
    assert f"cannot write {target}: disk full" in err


def test_parquet_export_is_renamed_into_place(
    db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    parquet_writer: Callable[[Callable[..., None]], None],
) -> None:
    """Without pyarrow here: a stand-in writer shows the file arrives whole and readable."""
    written: list[str] = []

    def to_parquet(frame: pd.DataFrame, path: Any, **kwargs: Any) -> None:
        written.append(str(path))
        Path(path).write_bytes(b"PAR1 whole file PAR1")

    parquet_writer(to_parquet)
    target = tmp_path / "out.parquet"
    code, _, err = run(
        capsys, "export", "--format", "parquet", "-o", str(target), "--store", str(db)
    )
    assert code == 0, err
    assert target.read_bytes() == b"PAR1 whole file PAR1"
    assert written and written[0] != str(target)  # written elsewhere, then renamed
    assert Path(written[0]).parent == tmp_path
    assert not Path(written[0]).exists()
    umask = os.umask(0o022)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's private 0600
