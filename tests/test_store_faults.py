"""The store under server faults (issue 24, items 2, 8 and 25): a server that accepts TCP
but never answers costs one connect timeout per run, not one per measurement; a hostile
spool file never breaks the end of ``pytest --ortperf``; and what a durable server
acknowledged during ``ortperf sync`` survives its crash.

Real servers: a TCP listener that never answers, and PostgreSQL servers of the tests' own
(tests/pg_server.py), the crash test's with durable settings.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from ortperf_store_factories import ENV, GIT, latency
from pg_server import Postgres, Server, ServerError, start

from pytest_ortperf.store import spool
from pytest_ortperf.store.connection import store_label
from pytest_ortperf.store.location import STORE_ENV

ORTPERF = str(Path(sys.executable).with_name("ortperf"))
SUITE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("ORTPERF_")}

SUITE = """
import pytest
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine


@pytest.mark.parametrize("i", range({n}))
def test_latency(i, ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[[1e-4 * (1 + 0.001 * k) for k in range(25)]])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={{"N": 1}}), name="lr")
"""


class Silent:
    """A TCP server that accepts connections and never answers (a hung database server,
    a firewall that swallows packets after the handshake); counts the connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.port: int = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    try:
        yield server
    finally:
        server.close()


def test_a_store_that_never_answers_is_tried_once_per_run(
    silent: Silent, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """History gating asks the store once per measurement: after the first connect
    timeout, the run asks no more and spools at once (a circuit breaker)."""
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.delenv(spool.SPOOL_ENV, raising=False)
    pytester.makepyfile(test_perf=SUITE.format(n=4))
    url = f"postgresql+psycopg://u:pw@127.0.0.1:{silent.port}/perf?connect_timeout=2"
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--ortperf", "--ortperf-baseline=history",
        f"--ortperf-store={url}",
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["ortperf: results NOT stored: *timeout*not tried again for 300 s); spooled to *"]
    )
    assert len(silent.accepted) == 1  # 4 history reads and the run's write: one connection
    assert len(list((pytester.path / ".ortperf" / "spool").iterdir())) == 1


def test_hostile_spool_files_never_break_the_end_of_a_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.delenv(spool.SPOOL_ENV, raising=False)
    pytester.makepyfile(test_perf=SUITE.format(n=1))
    directory = pytester.path / ".ortperf" / "spool"
    directory.mkdir(parents=True)
    (directory / "run-latin1.json").write_bytes(b'{"uid": "caf\xe9"}')
    (directory / "run-deep.json").write_text("[" * 200_000 + "]" * 200_000)
    os.mkfifo(directory / "run-x.json")  # opening it would wait for a writer forever
    (directory / "run-zero.json").symlink_to("/dev/zero")
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ortperf: 1 results stored in * (run 1)"])
    text = "\n".join(result.outlines)
    assert "results NOT stored" not in text and "INTERNALERROR" not in text
    for name in ("run-latin1.json", "run-deep.json", "run-x.json", "run-zero.json"):
        result.stdout.fnmatch_lines([f"ortperf: spooled run not written: *{name}*; set aside as *"])
    assert sorted(os.listdir(directory / spool.SET_ASIDE)) == [
        "run-deep.json", "run-latin1.json", "run-x.json", "run-zero.json"
    ]  # fmt: skip


# ------------------------------------------------------------------ a durable server


@pytest.fixture
def durable_server(postgres: Postgres) -> Iterator[Server]:
    """A durable server of this test's own (it is crashed and started again), in /tmp,
    where the ``postgres`` user can enter when the tests run as root."""
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


def test_the_durability_tests_server_is_durable(durable_server: Server) -> None:
    with durable_server.connect() as conn:
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "full_page_writes")
        }
    assert settings == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def test_runs_a_sync_reported_written_survive_a_server_crash(
    durable_server: Server, tmp_path: Path
) -> None:
    server = durable_server
    url = server.url(server.new_database())
    directory = tmp_path / "spool"
    label = store_label(url)
    records = [latency(f"t::test_{k}") for k in range(30)]
    for i in range(40):
        run = spool.SpooledRun(
            uid=f"u-{i:04d}", store=label, started=1.7e9 + i, finished=1.7e9 + i + 5,
            command_line="pytest --ortperf", git=GIT, environment=ENV, records=records,
            profiles={},
        )  # fmt: skip
        path = spool.spool_run(directory, run)
        os.utime(path, (1.7e9 + i, 1.7e9 + i))
    engine = sa.create_engine(url)
    sync = subprocess.Popen(
        [ORTPERF, "sync", "--store", url, "--spool", str(directory)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=SUITE_ENV,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        stored = 0
        while stored < 5:
            assert sync.poll() is None and time.monotonic() < deadline, "the sync ended early"
            time.sleep(0.02)
            try:
                with engine.connect() as conn:
                    stored = conn.execute(sa.text("SELECT count(*) FROM runs")).scalar() or 0
            except sa.exc.SQLAlchemyError:
                stored = 0  # the schema is not there yet
        server.crash()
        out, err = sync.communicate(timeout=120)
    finally:
        engine.dispose()
        if sync.poll() is None:
            sync.kill()
            sync.wait()
    assert sync.returncode == 2, out + err  # the store went away mid-sync
    written = re.findall(r"^run-(u-\d{4})\.json: stored as run \d+$", out, re.MULTILINE)
    assert len(written) >= 5 and "Traceback" not in err
    server.start()  # crash recovery
    with sa.create_engine(url).connect() as conn:
        uids = {uid for (uid,) in conn.execute(sa.text("SELECT uid FROM runs"))}
    assert set(written) <= uids  # every run the sync reported written was kept
    left = {p.name[len("run-") : -len(".json")] for p in spool.pending(directory)}
    assert uids | left == {f"u-{i:04d}" for i in range(40)}  # and none lost
