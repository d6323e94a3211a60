"""The spool under faults (issue 24, items 1, 2, 5 and 15): one unstorable or hostile
spool file never blocks the queue, on SQLite and PostgreSQL alike; a store named through
a symlink is the same store; two syncs at once write and count each run once.

Real files (FIFOs, symlinks to devices), real SQLite, the suite's real PostgreSQL server
(the ``postgres`` fixture) and real ``ortperf sync`` processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from ortperf_store_factories import ENV, GIT, latency

from pytest_ortperf.cli import main as ortperf_cli
from pytest_ortperf.store import spool
from pytest_ortperf.store.connection import same_store, store_label
from pytest_ortperf.store.errors import UnstorableRun
from pytest_ortperf.store.read import list_runs, read_results

ORTPERF = str(Path(sys.executable).with_name("ortperf"))
SUITE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("ORTPERF_")}


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new empty store of each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "results.sqlite")
        return
    server = request.getfixturevalue("postgres")
    yield server.url(server.new_database())


def _run(
    label: str,
    i: int,
    *,
    uid: str | None = None,
    name: str = "latency",
    git: dict[str, object] | None = None,
) -> spool.SpooledRun:
    return spool.SpooledRun(
        uid=uid or f"u-{i:04d}",
        store=label,
        started=1.7e9 + i,
        finished=1.7e9 + i + 5,
        command_line="pytest --ortperf",
        git=git or GIT,
        environment=ENV,
        records=[latency(f"t::test_{i}", name=name)],
        profiles={},
    )


def _age(path: Path, i: int) -> None:
    """Order spool files as the sync reads them (oldest first)."""
    os.utime(path, (1.7e9 + i, 1.7e9 + i), follow_symlinks=False)


def _spool(directory: Path, run: spool.SpooledRun, i: int) -> Path:
    path = spool.spool_run(directory, run)
    _age(path, i)
    return path


def _stored_uids(target: str) -> list[str]:
    engine = sa.create_engine(target if "://" in target else f"sqlite:///{target}")
    with engine.connect() as conn:
        uids = [str(uid) for (uid,) in conn.execute(sa.text("SELECT uid FROM runs"))]
    engine.dispose()
    return sorted(uids)


def test_an_unstorable_run_is_set_aside_and_the_rest_written(target: str, tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    label = store_label(target)
    _spool(directory, _run(label, 0, name="nul\x00name"), 0)  # PostgreSQL refuses NUL
    _spool(directory, _run(label, 1, git={**GIT, "branch": "b" * 300}), 1)  # varchar(255)
    _spool(directory, _run(label, 2), 2)
    done = spool.sync(target, directory)
    assert done.error is None and done.damaged == []
    assert len(done.written) == 3 and spool.pending(directory) == []
    # one rule on both backends: NUL reads as U+FFFD, a text is cut to its column
    frame = read_results(target)
    assert set(frame["name"]) == {"nul\ufffdname", "latency"}
    runs = list_runs(target)
    assert sorted(len(str(b)) for b in runs["branch"]) == [4, 4, 255]


def test_a_hand_edited_uid_is_set_aside_named_and_the_rest_written(
    target: str, tmp_path: Path
) -> None:
    directory = tmp_path / "spool"
    label = store_label(target)
    bad = _spool(directory, _run(label, 0), 0)
    data = json.loads(bad.read_text())
    data["uid"] = "x" * 80
    bad.write_text(json.dumps(data))
    _age(bad, 0)
    _spool(directory, _run(label, 1), 1)
    done = spool.sync(target, directory)
    assert [p for p, _ in done.written] == [directory / "run-u-0001.json"]
    ((path, why),) = done.damaged
    assert path == bad and "uid 'xxxx" in why and "set aside as" in why
    assert (directory / spool.SET_ASIDE / bad.name).is_file()
    # the store's own check: such a uid is refused, named, whoever writes it
    with pytest.raises(UnstorableRun, match="cannot store a run with uid"):
        _run(label, 2, uid="y" * 80).save(target)


def _hostile(directory: Path) -> list[Path]:
    """One file of each hostile kind the issue names, in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    latin1 = directory / "run-latin1.json"
    latin1.write_bytes(b'{"format": 1, "uid": "caf\xe9"}')
    deep = directory / "run-deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    fifo = directory / "run-x.json"
    os.mkfifo(fifo)
    zero = directory / "run-zero.json"
    zero.symlink_to("/dev/zero")
    for i, path in enumerate((latin1, deep, fifo, zero)):
        _age(path, 100 + i)
    return [latin1, deep, fifo, zero]


def test_hostile_spool_files_are_named_and_set_aside_without_a_hang(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    db = tmp_path / "results.sqlite"
    hostile = _hostile(directory)
    _spool(directory, _run(store_label(db), 200), 200)
    done = spool.sync(db, directory)
    assert len(done.written) == 1 and done.error is None
    why = dict(done.damaged)
    assert set(why) == set(hostile)
    assert "not UTF-8" in why[hostile[0]]
    assert "nested too deep" in why[hostile[1]]
    assert "not a regular file (a FIFO)" in why[hostile[2]]
    assert "not a regular file (a symlink)" in why[hostile[3]]
    for path in hostile:
        assert str(path) in why[path] and f"set aside as {directory / spool.SET_ASIDE}" in why[path]
        assert not os.path.lexists(path)
    assert spool.pending(directory) == []


def test_an_oversized_spool_file_is_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool, "MAX_BYTES", 1000)
    big = tmp_path / "run-big.json"
    big.write_text(json.dumps({"format": 1, "pad": "x" * 2000}))
    with pytest.raises(spool.SpoolError, match=r"run-big.json: not a spooled run: \d+ bytes"):
        spool.load(big)


def test_ortperf_sync_acceptance(target: str, tmp_path: Path) -> None:
    """The issue's acceptance: 50 good runs among one unstorable, one non-UTF-8, one
    deep-nested and one FIFO file: 50 written, 4 named and set aside, exit 2, no hang."""
    directory = tmp_path / "spool"
    label = store_label(target)
    *bad, zero = _hostile(directory)
    zero.unlink()  # the four: one unstorable, one non-UTF-8, one deep, one FIFO
    unstorable = _spool(directory, _run(label, 0, uid="will-be-edited"), 0)
    data = json.loads(unstorable.read_text())
    data["uid"] = "z" * 100  # hand-edited: no store can keep it as the run's uid
    unstorable.write_text(json.dumps(data))
    _age(unstorable, 0)
    bad.append(unstorable)
    for i in range(1, 51):
        _spool(directory, _run(label, i), i)
    env = {**SUITE_ENV, "COLUMNS": "200"}
    proc = subprocess.run(
        [ORTPERF, "sync", "--store", target, "--spool", str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "50 spooled runs written" in proc.stdout
    assert "Traceback" not in proc.stderr
    for path in bad:
        assert path.name in proc.stderr
    assert proc.stderr.count("set aside as") == 4
    assert len(list((directory / spool.SET_ASIDE).iterdir())) == 4
    assert spool.pending(directory) == []
    assert _stored_uids(target) == sorted(f"u-{i:04d}" for i in range(1, 51))


def test_a_store_through_a_symlinked_path_is_the_same_store(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    directory = tmp_path / "spool"
    spool.spool_run(directory, _run(store_label(link / "db.sqlite"), 0))
    assert same_store(str(link / "db.sqlite"), f"sqlite:///{real / 'db.sqlite'}")
    done = spool.sync(real / "db.sqlite", directory)
    assert len(done.written) == 1 and done.other_store == []


SYNCER = """
import sys
from pathlib import Path
from pytest_ortperf.store import spool
done = spool.sync(sys.argv[1], Path(sys.argv[2]))
print(len(done.written), len(done.damaged), done.error)
"""


def test_two_syncs_at_once_write_and_count_each_run_once(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    db = tmp_path / "results.sqlite"
    label = store_label(db)
    for i in range(60):
        _spool(directory, _run(label, i), i)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SYNCER, str(db), str(directory)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=SUITE_ENV,
        )
        for _ in range(2)
    ]
    outs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outs
    counts = [out.split() for out, _ in outs]
    assert all(damaged == "0" and error == "None" for _, damaged, error in counts), outs
    assert sum(int(written) for written, _, _ in counts) == 60
    assert len(_stored_uids(str(db))) == 60
    assert os.listdir(directory) == []


def test_a_claim_left_by_a_killed_sync_is_taken_over(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    db = tmp_path / "results.sqlite"
    path = spool.spool_run(directory, _run(store_label(db), 0))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    path.rename(path.with_name(f"{path.name}.claimed-{dead.stdout.strip()}"))
    done = spool.sync(db, directory)
    assert [p for p, _ in done.written] == [path] and os.listdir(directory) == []


def test_ortperf_sync_names_a_damaged_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "spool"
    directory.mkdir()
    (directory / "run-bad.json").write_bytes(b"\xff\xfe")
    args = ["sync", "--store", str(tmp_path / "db.sqlite"), "--spool", str(directory)]
    assert ortperf_cli(args) == 2
    err = capsys.readouterr().err
    assert "run-bad.json: not a spooled run: not UTF-8" in err and "set aside as" in err
