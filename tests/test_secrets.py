"""Credentials of a store URL never show and are never stored (issue 11, item 1).

Unit tests of ``store.redact_url``, then real runs against a throwaway PostgreSQL server on
loopback (Debian's ``postgresql`` package and psycopg 3; skipped when either is missing,
failed instead when ``$CI`` is set): the password must be in none of the terminal output,
the JSON, the HTML report, the Markdown summaries, ``ortperf`` output and the stored rows.
"""

from __future__ import annotations

import html
import json
import os
import pwd
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import pytest
from ortperf_store_factories import ENV, GIT, latency

from pytest_ortperf import store
from pytest_ortperf.cli import main as ortperf_cli
from pytest_ortperf.store import StoreError, read_results, redact_url, save_run

try:  # imported once here: pytester's in-process runs drop what an inner run imported
    import psycopg
    import sqlalchemy.dialects.postgresql.psycopg  # noqa: F401
except ImportError:
    psycopg = None  # type: ignore[assignment]

# ------------------------------------------------------------------------------ redact_url

MASKED = [
    ("postgresql://user:secret@host/db", "postgresql://user:***@host/db"),
    (
        "postgresql+psycopg://ortperf:s3cr3t-Pw@127.0.0.1:5432/perf",
        "postgresql+psycopg://ortperf:***@127.0.0.1:5432/perf",
    ),
    ("postgresql://user@host/db?password=secret", "postgresql://user@host/db?password=***"),
    (
        "postgresql://u@h/db?sslmode=require&PassWord=secret&application_name=ci",
        "postgresql://u@h/db?sslmode=require&PassWord=***&application_name=ci",
    ),
    (
        "postgresql://u@h/db?sslpassword=a1&passwd=a2&PWD=a3&api_key=a4&access_token=a5",
        "postgresql://u@h/db?sslpassword=***&passwd=***&PWD=***&api_key=***&access_token=***",
    ),
    ("mssql+pyodbc://u:p%40ss%2Fw%3Ard@h/db", "mssql+pyodbc://u:***@h/db"),
    ("postgresql://u@h/db?password=p%26ss%20w", "postgresql://u@h/db?password=***"),
    ("postgresql://me@example.com:pw@host/db", "postgresql://me@example.com:***@host/db"),
    (
        "pytest --ortperf --ortperf-store=postgresql://u:hunter22@h/db -q",
        "pytest --ortperf --ortperf-store=postgresql://u:***@h/db -q",
    ),
    (
        "pytest --ortperf-store postgresql://u@h/db?password=hunter22 --ortperf",
        "pytest --ortperf-store postgresql://u@h/db?password=*** --ortperf",
    ),
    (
        "two: mysql://a:one1@h/x and 'postgresql://b:two2@h/y', done",
        "two: mysql://a:***@h/x and 'postgresql://b:***@h/y', done",
    ),
    (  # the store's label ends at the colon
        "results NOT stored: pg://u@h/db?password=hunter22: connection failed",
        "results NOT stored: pg://u@h/db?password=***: connection failed",
    ),
    (  # a driver's libpq connection string, quoted value with a blank
        "connection failed (host=h user=u password='pa ss' dbname=d)",
        "connection failed (host=h user=u password=*** dbname=d)",
    ),
    ("{'user': 'u', 'password': 'hunter22'}", "{'user': 'u', 'password': ***}"),
    ("Driver={X};Server=h;Uid=u;Pwd=hunter22;", "Driver={X};Server=h;Uid=u;Pwd=***;"),
]

UNCHANGED = [
    "postgresql://user@host:5432/db",
    "postgresql+psycopg://user@host/db?sslmode=require&application_name=ci",
    "sqlite:////tmp/perf/results.sqlite",
    "sqlite:///C:/perf/results.sqlite",
    "sqlite://",
    "/srv/perf:1@2/results.sqlite",
    ".ortperf/results.sqlite",
    "https://sqlalche.me/e/21/e3q8",
    'FATAL:  password authentication failed for user "ortperf"',
    "pytest --ortperf -k 'passes or bypass' --ortperf-store=perf.db",
    "12 results stored in /tmp/x/.ortperf/results.sqlite (run 3)",
]


@pytest.mark.parametrize(("text", "masked"), MASKED)
def test_redact_url_masks_passwords(text: str, masked: str) -> None:
    assert redact_url(text) == masked
    assert redact_url(masked) == masked  # masking twice changes nothing


@pytest.mark.parametrize("text", UNCHANGED)
def test_redact_url_leaves_text_without_credentials_alone(text: str) -> None:
    assert redact_url(text) == text


def test_redact_url_masks_the_known_secrets_of_a_store_anywhere() -> None:
    url = "postgresql://u:p%40ss-w0rd@h/db?token=t0k3n-x"
    message = "auth failed for p@ss-w0rd (p%40ss-w0rd); token t0k3n-x rejected"
    assert redact_url(message, url) == "auth failed for *** (***); token *** rejected"
    # a password SQLAlchemy accepts unencoded, blank included: known from the store
    raw = "postgresql://u:pa ss/wd@h/db"
    assert redact_url(raw, raw) == "postgresql://u:***@h/db"
    assert redact_url(f"--ortperf-store={raw}", raw) == "--ortperf-store=postgresql://u:***@h/db"
    # short secrets are masked in their URL but not as words: "pw" would reveal itself
    assert redact_url("pw: postgresql://u:pw@h/db", "postgresql://u:pw@h/db") == (
        "pw: postgresql://u:***@h/db"
    )


def test_store_label_hides_query_passwords() -> None:
    url = store._url("postgresql://u@h/db?password=hunter22&sslmode=require")
    assert store._label(url) == "postgresql://u@h/db?password=***&sslmode=require"


def test_store_errors_never_show_the_password() -> None:
    with pytest.raises(StoreError) as info:
        read_results("nosuchdb://u@h/db?password=hunter22")
    assert "hunter22" not in str(info.value)
    assert "nosuchdb://u@h/db?password=***: cannot open" in str(info.value)
    err = StoreError("x: driver said password hunter22", store="pg://u:hunter22@h/db")
    assert str(err) == "x: driver said password ***"


def test_cli_errors_never_show_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    for url in ("nosuchdb://u:hunter22@h/db", "nosuchdb://u@h/db?pwd=hunter22"):
        assert ortperf_cli(["runs", "--store", url]) == 2
        err = capsys.readouterr().err
        assert err.startswith("ortperf: error: nosuchdb://u") and "***" in err
        assert "hunter22" not in err


def test_the_stored_command_line_is_masked(tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    line = (
        "pytest --ortperf --ortperf-store postgresql://u:hunter22@h/db"
        " -o ortperf_store=postgresql://u@h/db?password=hunter23"
    )
    save_run(
        db,
        started=1.0,
        finished=2.0,
        command_line=line,
        git=GIT,
        environment=ENV,
        records=[latency("t.py::test")],
    )
    with sqlite3.connect(db) as conn:
        (stored,) = conn.execute("SELECT command_line FROM runs").fetchone()
    assert stored == (
        "pytest --ortperf --ortperf-store postgresql://u:***@h/db"
        " -o ortperf_store=postgresql://u@h/db?password=***"
    )
    # rows stored before masking existed are masked when read
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET command_line = ?", (line,))
    assert set(read_results(db)["command_line"]) == {stored}
    assert set(store.list_runs(db)["command_line"]) == {stored}


# ------------------------------------------------------------------------------ PostgreSQL

USER = "ortperf"
PASSWORD = "s3cr3t-Pw@42"
"""The server's password; its ``@`` is percent-encoded in URLs (``s3cr3t-Pw%4042``)."""
WRONG = "wr0ng-s3cr3t"
NEEDLE = "s3cr3t"
"""In every spelling of both passwords (plain, percent-encoded, quoted)."""


def _missing(what: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{what}; $CI is set: the PostgreSQL test must run here", pytrace=False)
    pytest.skip(what)


def _version(name: str) -> int:
    return int(name) if name.isdigit() else 0


def _bindir() -> Path | None:
    """The directory of initdb and pg_ctl: on PATH, else Debian's newest version."""
    found = shutil.which("pg_ctl")
    candidates = [Path(found).parent] if found else []
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(versions, key=lambda p: _version(p.parent.name), reverse=True)
    for path in candidates:
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            return path
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Postgres:
    """A running throwaway server: ``USER`` with ``PASSWORD`` on 127.0.0.1:``port``."""

    port: int

    def connect(self, dbname: str = "postgres") -> Any:
        assert psycopg is not None
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, dbname=dbname
        )

    def new_database(self) -> str:
        name = f"perf_{uuid.uuid4().hex[:12]}"
        with self.connect() as conn:
            conn.autocommit = True
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def url(
        self, dbname: str, *, password: str = PASSWORD, query: bool = False, masked: bool = False
    ) -> str:
        """A SQLAlchemy URL with the password in the user info, or with ``query`` in
        ``?password=`` (percent-encoded either way); ``masked``: as it may be shown."""
        base = f"postgresql+psycopg://{USER}"
        secret = "***" if masked else quote(password, safe="")
        if query:
            return f"{base}@127.0.0.1:{self.port}/{dbname}?password={secret}"
        return f"{base}:{secret}@127.0.0.1:{self.port}/{dbname}"

    def rows(self, dbname: str) -> list[str]:
        """Every row of every table of ``dbname``, as text (all its columns)."""
        assert psycopg is not None
        from psycopg import sql

        with self.connect(dbname) as conn:
            tables = [
                name
                for (name,) in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
                )
            ]
            assert {"runs", "measurements", "environments"} <= set(tables)
            query = "SELECT t::text FROM {} AS t"
            return [
                row
                for table in tables
                for (row,) in conn.execute(sql.SQL(query).format(sql.Identifier(table)))
            ]


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL server of the distribution's packages with its data in a temp dir,
    password auth (scram-sha-256) on 127.0.0.1 only (no unix socket); stopped and removed
    at the end, whatever happens. initdb and postgres refuse root: as root they run as the
    ``postgres`` user."""
    if psycopg is None:
        _missing('psycopg 3 is not installed (pip install -e ".[postgres]")')
    bindir = _bindir()
    if bindir is None:
        _missing(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
        )
    as_user: list[str] = []
    owner = None
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            owner = None
        if runuser is None or owner is None:
            _missing("running as root without runuser or a 'postgres' user to run the server")
        as_user = [runuser, "-u", "postgres", "--"]
    # as root, in /tmp: the postgres user cannot enter root's private temp dirs
    top = Path(tempfile.mkdtemp(prefix="ortperf-pg-", dir="/tmp" if as_user else None))
    data = top / "data"
    started = False

    def run(*args: str | Path) -> None:
        proc = subprocess.run(
            [*as_user, *map(str, args)], cwd=top, capture_output=True, text=True, timeout=60
        )
        if proc.returncode != 0:
            log = top / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            pytest.fail(f"{args[0]} failed: {proc.stdout}{proc.stderr}{tail}", pytrace=False)

    try:
        if owner is not None:
            os.chown(top, owner.pw_uid, owner.pw_gid)
        pwfile = top / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        pwfile.chmod(0o600)
        if owner is not None:
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        run(
            bindir / "initdb",
            "-D",
            data,
            "-U",
            USER,
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--locale=C",
            "-N",
        )
        pwfile.unlink()
        port = _free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k '' -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off"
        )
        started = True
        run(
            bindir / "pg_ctl",
            "-D",
            data,
            "-l",
            top / "server.log",
            "-o",
            options,
            "-w",
            "-t",
            "30",
            "start",
        )
        yield Postgres(port)
    finally:
        if started:
            _stop(as_user, bindir, data)
        shutil.rmtree(top, ignore_errors=True)


def _stop(as_user: list[str], bindir: Path, data: Path) -> None:
    """``pg_ctl stop -m fast``; the postmaster we started is killed if that fails."""
    pidfile = data / "postmaster.pid"
    if not pidfile.is_file():
        return
    stop = [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
    try:
        subprocess.run(stop, cwd=data.parent, capture_output=True, timeout=30, check=True)
    except (subprocess.SubprocessError, OSError):
        try:
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGQUIT)
            time.sleep(0.5)
        except (OSError, ValueError, IndexError):
            pass


SUITE = """
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

BASE = 1e-4


def test_latency(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[[BASE * (1 + 0.001 * i) for i in range(25)]])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")


def test_compare(ort_session, ort_feeds, ortperf):
    ref = [BASE * (1 + 0.002 * (i % 7)) for i in range(25)]
    ortperf.engine = ScriptedEngine(interleave=[[ref, [r * 0.9 for r in ref]]])
    a = ort_session(models.attention(), optimization="disable")
    b = ort_session(models.attention())
    ortperf.compare(a, b, ort_feeds(a, dims={"B": 1}), name="attention")
"""

REPORTS = (
    "-p",
    "no:cacheprovider",
    "--ortperf",
    "--ortperf-json=out/results.json",
    "--ortperf-report=out/report.html",
    "--ortperf-markdown=out/summary.md",
)


def _clean(text: str) -> str:
    """Text as a reader sees it: HTML entities and line-break hints undone, escapes gone."""
    return html.unescape(text.replace("<wbr>", "")).replace("\\", "")


def _assert_hidden(where: str, text: str) -> None:
    assert NEEDLE not in text and NEEDLE not in _clean(text), f"password shown in {where}"


def _measured_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *store_args: str
) -> tuple[pytest.RunResult, dict[str, str]]:
    """An ``--ortperf`` run writing every report; its terminal output and files."""
    pytester.makepyfile(test_perf=SUITE)
    step = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    result = pytester.runpytest(*REPORTS, *store_args)
    result.assert_outcomes(passed=2)
    out = pytester.path / "out"
    files = {
        "terminal output": "\n".join(result.outlines + result.errlines),
        "JSON": (out / "results.json").read_text(),
        "HTML report": (out / "report.html").read_text(),
        "Markdown summary": (out / "summary.md").read_text(),
        "$GITHUB_STEP_SUMMARY": step.read_text(),
    }
    return result, files


@pytest.mark.parametrize(
    "form", ["--ortperf-store=URL", "--ortperf-store URL ?password=", "$ORTPERF_STORE"]
)
def test_a_stored_run_never_shows_the_password(
    form: str,
    postgres: Postgres,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dbname = postgres.new_database()
    url = postgres.url(dbname, query="?password=" in form)
    shown = postgres.url(dbname, query="?password=" in form, masked=True)
    monkeypatch.delenv(store.STORE_ENV, raising=False)
    if form.startswith("$"):
        monkeypatch.setenv(store.STORE_ENV, url)
        args: tuple[str, ...] = ()
    elif "=URL" in form:
        args = (f"--ortperf-store={url}",)
    else:
        args = ("--ortperf-store", url)
    result, files = _measured_run(pytester, monkeypatch, *args)
    assert f"ortperf: 2 results stored in {shown} (run 1)" in result.outlines
    notes = json.loads(files["JSON"])["notes"]
    assert f"2 results stored in {shown} (run 1)" in notes
    for where, text in files.items():
        _assert_hidden(where, text)

    cli_store = () if form.startswith("$") else ("--store", url)
    capsys.readouterr()  # what the inner run left behind was checked above
    for command in (
        ["runs"],
        ["export", "--format", "csv"],
        ["export", "--format", "json"],
        ["history"],
        ["report", "-o", str(pytester.path / "stored.html")],
    ):
        assert ortperf_cli([*command, *cli_store]) == 0, command
        captured = capsys.readouterr()
        _assert_hidden(f"ortperf {command[0]}", captured.out + captured.err)
    _assert_hidden("ortperf report", (pytester.path / "stored.html").read_text())
    assert ortperf_cli(["export", "--format", "json", *cli_store]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert len(exported) == 2

    rows = postgres.rows(dbname)
    assert len(rows) == 5  # schema version, environment, run, two measurements
    for row in rows:
        _assert_hidden("the stored rows", row)
    (command_line,) = {m["command_line"] for m in exported}
    assert command_line.startswith("pytest -p no:cacheprovider --ortperf ")
    if args:  # the store URL is on the command line: masked, not dropped
        assert shown in command_line


@pytest.mark.parametrize(
    "case",
    ["wrong password", "wrong ?password=", "unreachable port", "unreachable port ?password="],
)
def test_a_failing_store_never_shows_the_password(
    case: str,
    postgres: Postgres,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(store.STORE_ENV, raising=False)
    server = Postgres(_free_port()) if "unreachable" in case else postgres
    url, shown = (
        server.url("postgres", password=WRONG, query="?" in case, masked=masked)
        for masked in (False, True)
    )
    result, files = _measured_run(pytester, monkeypatch, f"--ortperf-store={url}")
    assert result.ret == 0  # a store that cannot be written does not fail the tests
    result.stdout.fnmatch_lines(
        [f"ortperf: results NOT stored: {shown}: *".replace("***", "[*]" * 3)]
    )
    expected = "password authentication failed" if "wrong" in case else "Connection refused"
    assert expected in files["terminal output"]
    for where, text in files.items():
        _assert_hidden(where, text)

    assert ortperf_cli(["runs", "--store", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ortperf: error: {shown}: ") and expected in err
    _assert_hidden("the ortperf error", err)
