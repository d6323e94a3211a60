"""Never lose a run (issue 13, item 2): the spool, the next run's sync, ``ortperf sync``;
and the fleet's CLI views ``ortperf machines`` and ``ortperf history --machine/--branch``.

SQLite stores here; tests/test_store_postgres.py stops a real PostgreSQL server mid-run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ortperf_store_factories import ENV, GIT, OTHER_ENV, comparison, latency, memory, save

from pytest_ortperf.cli import main as ortperf_cli
from pytest_ortperf.store import spool
from pytest_ortperf.store.connection import store_label
from pytest_ortperf.store.location import STORE_ENV
from pytest_ortperf.store.read import read_profiles, read_results
from pytest_ortperf.store.write import _environment_row

SUITE = """
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine


def test_latency(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[[1e-4 * (1 + 0.001 * k) for k in range(25)]])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")
"""


def _run(
    store_args: str, spooled: int, *, uid: str = "u-1", target: str = "db.sqlite"
) -> spool.SpooledRun:
    return spool.SpooledRun(
        uid=uid,
        store=store_args,
        started=1.7e9 + spooled,
        finished=1.7e9 + spooled + 5,
        command_line="pytest --ortperf",
        git=GIT,
        environment=ENV,
        records=[latency("t::a"), comparison("t::b"), memory("t::c")],
        profiles={("t::a", "latency"): [{"op_type": "Add", "total_us": 3.0, "count": 2}]},
    )


def test_a_spooled_run_round_trips_through_its_file(tmp_path: Path) -> None:
    run = _run(store_label(tmp_path / "db.sqlite"), 0)
    path = spool.spool_run(tmp_path / "spool", run)
    assert path == tmp_path / "spool" / "run-u-1.json"
    assert spool.load(path) == run
    assert [p.name for p in (tmp_path / "spool").iterdir()] == ["run-u-1.json"]  # no temp left


def test_sync_writes_each_run_once_and_removes_its_file(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    directory = tmp_path / "spool"
    label = store_label(db)
    for i, uid in enumerate(["u-1", "u-2"]):
        spool.spool_run(directory, _run(label, i, uid=uid))
    done = spool.sync(db, directory)
    assert [run_id for _, run_id in done.written] == [1, 2]
    assert done.error is None and not done.other_store and not done.damaged
    assert spool.pending(directory) == []
    assert len(read_results(db)) == 6
    assert len(read_profiles(db)) == 2

    spool.spool_run(directory, _run(label, 0, uid="u-1"))  # again: a sync killed mid-way
    assert [run_id for _, run_id in spool.sync(db, directory).written] == [1]
    assert len(read_results(db)) == 6


def test_sync_leaves_runs_meant_for_another_store_unless_asked(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    meant = "postgresql+psycopg://ci:***@db.example:5432/perf"
    spool.spool_run(directory, _run(meant, 0))
    done = spool.sync(tmp_path / "db.sqlite", directory)
    assert done.written == [] and done.other_store == [(directory / "run-u-1.json", meant)]
    done = spool.sync(tmp_path / "db.sqlite", directory, any_store=True)
    assert [run_id for _, run_id in done.written] == [1]


def test_a_damaged_spool_file_is_named_with_its_line_and_set_aside(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    directory.mkdir()
    bad = directory / "run-bad.json"
    bad.write_text('{"format": 1,\n "uid": oops}\n')
    done = spool.sync(tmp_path / "db.sqlite", directory)
    ((path, why),) = done.damaged
    assert path == bad and why.startswith(f"{bad}:2: not a spooled run: invalid JSON")
    kept = directory / spool.SET_ASIDE / "run-bad.json"
    assert why.endswith(f"; set aside as {kept}")
    assert not bad.exists() and kept.read_text().startswith('{"format": 1')
    other = directory / "run-other.json"
    other.write_text(json.dumps({"format": 99}))
    with pytest.raises(spool.SpoolError, match=r"run-other.json: not a spooled run .*format 99"):
        spool.load(other)


def test_a_run_the_store_refuses_is_spooled_and_written_by_the_next_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.delenv(spool.SPOOL_ENV, raising=False)
    pytester.makepyfile(test_perf=SUITE)
    target = pytester.path / "results.sqlite"
    target.mkdir()  # a directory where the store file belongs: the store cannot be written
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf", f"--ortperf-store={target}")
    result.assert_outcomes(passed=1)  # the store is history: the tests pass
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ortperf: results NOT stored: *not a file*; spooled to *run-*"])
    (spooled,) = (pytester.path / ".ortperf" / "spool").iterdir()

    target.rmdir()  # the store works again: the next run writes its run, then the spooled one
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf", f"--ortperf-store={target}")
    result.stdout.fnmatch_lines(
        [
            "ortperf: 1 results stored in * (run 1)",
            "ortperf: 1 spooled run written to the store (run 2)",
        ]
    )
    assert not spooled.exists()
    frame = read_results(target)
    assert len(frame) == 2 and frame["run_id"].nunique() == 2


def test_a_spool_that_cannot_be_written_is_said_too(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    pytester.makepyfile(test_perf=SUITE)
    (pytester.path / "blocked").write_text("a file where the spool directory belongs")
    monkeypatch.setenv(spool.SPOOL_ENV, str(pytester.path / "blocked"))
    (pytester.path / "store").mkdir()
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf", "--ortperf-store=store")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ortperf: results NOT stored: *; spooling it failed too: *"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_ortperf_sync(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "db.sqlite"
    directory = tmp_path / "spool"
    args = ["sync", "--store", str(db), "--spool", str(directory)]
    assert ortperf_cli(args) == 0
    assert "nothing to sync: no spooled runs in" in capsys.readouterr().out
    spool.spool_run(directory, _run(store_label(db), 0))
    assert ortperf_cli(args) == 0
    out = capsys.readouterr().out
    assert "run-u-1.json: stored as run 1" in out and "1 spooled run written" in out
    (directory / "run-x.json").write_text("[]")
    assert ortperf_cli(args) == 2
    err = capsys.readouterr().err
    assert "run-x.json: not a spooled run (TypeError: a JSON object expected" in err


# ------------------------------------------------------------------ machines and history


def _fleet(db: Path) -> None:
    save(db, [latency("t::a", median=1e-3)], started=1.7e9)
    save(db, [latency("t::a", median=2e-3)], started=1.7e9 + 60, env=OTHER_ENV)
    save(db, [latency("t::a", median=1.1e-3)], started=1.7e9 + 120)


def test_ortperf_machines_lists_machine_classes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.sqlite"
    _fleet(db)
    assert ortperf_cli(["machines", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    this = _environment_row(ENV)["fingerprint"]
    other = _environment_row(OTHER_ENV)["fingerprint"]
    lines = out.splitlines()
    assert lines[0].split() == ["machine", "class", "runs", "branches", "first", "seen",
                                "last", "seen", "last", "commit"]  # fmt: skip
    assert f"Test CPU 3000, 4 CPUs [{this}]" in lines[2] and " 2 " in lines[2]
    assert f"Other CPU, 64 CPUs [{other}]" in lines[3] and " 1 " in lines[3]


def test_ortperf_history_by_machine_and_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db.sqlite"
    _fleet(db)
    this = _environment_row(ENV)["fingerprint"]
    assert ortperf_cli(["history", "--store", str(db), "--machine", this[:4]]) == 0
    out = capsys.readouterr().out
    assert "1.00 ms" in out and "1.10 ms" in out and "2.00 ms" not in out
    assert ortperf_cli(["history", "--store", str(db), "--branch", "feature"]) == 0
    assert "no stored measurements match" in capsys.readouterr().err
    assert ortperf_cli(["history", "--store", str(db), "--machine", "zz"]) == 2
    err = capsys.readouterr().err
    assert "--machine: machine class 'zz' matches none of the stored machine classes" in err
