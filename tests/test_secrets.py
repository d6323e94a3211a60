"""Credentials of a store URL never show and are never stored (issue 11, item 1).

Unit tests of ``redact_url``, then real runs against the suite's PostgreSQL server
(the ``postgres`` fixture of tests/conftest.py: skipped without ``$ORTPERF_TEST_POSTGRES``,
failed instead when ``$CI`` is set): the password must be in none of the terminal output,
the JSON, the HTML report, the Markdown summaries, ``ortperf`` output and the stored rows.
"""

from __future__ import annotations

import html
import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from ortperf_store_factories import ENV, GIT, latency
from pg_server import URL_ENV, Postgres, free_port

from pytest_ortperf.cli import main as ortperf_cli
from pytest_ortperf.store.connection import _label, _url, store_label
from pytest_ortperf.store.errors import StoreError
from pytest_ortperf.store.location import STORE_ENV
from pytest_ortperf.store.read import list_runs, read_results
from pytest_ortperf.store.secrets import _read_as_sqlalchemy, _secret_key, redact_url
from pytest_ortperf.store.write import save_run

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
    (  # an unencoded '@' in the password: masked up to the URL's last '@' (issue 24)
        "postgresql+psycopg://ci:Pass@Wd7SecretTail99@127.0.0.1:5432/perf",
        "postgresql+psycopg://ci:***@127.0.0.1:5432/perf",
    ),
    (
        "store 'postgresql://ci:Tr0ub4dor@3x:9Hz5QmPw2K@db.example:5432/p' is down: x@y",
        "store 'postgresql://ci:***@db.example:5432/p' is down: x@y",
    ),
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


def _sqlalchemy_secrets(text: str) -> set[str]:
    """The password and secret query values SQLAlchemy reads in ``text``."""
    try:
        url = sa.make_url(text)
    except (sa.exc.SQLAlchemyError, ValueError, TypeError):
        return set()
    found = {url.password} if url.password else set()
    for name, value in url.query.items():
        if _secret_key(name):
            found.update([value] if isinstance(value, str) else value)
    return {str(secret) for secret in found}


@pytest.mark.parametrize(
    "url",
    [
        *(text for text, _ in MASKED),
        *UNCHANGED,
        "postgresql://u:p%40ss@h:5432/db?password=a&password=b%2Bc&x=1",
        "postgresql://u:pw@h:notaport/db?password=hunter22",  # SQLAlchemy refuses it
        "postgresql://u:pw@[::1]:5432/db?token=t+k",
        "my-driver://u:pw@h/db",  # a scheme SQLAlchemy does not read
        "postgresql://u:pa ss@h/db",
        "postgresql://:only-pw@h/db",
        "postgresql://u:@h/db?password=",
    ],
)
def test_url_secrets_are_those_sqlalchemy_reads(url: str) -> None:
    # secrets.py reads URLs with the standard library only: what it finds is what
    # sqlalchemy.make_url, which the store connects with, would read
    assert _read_as_sqlalchemy(url.strip()) == _sqlalchemy_secrets(url.strip())


AMBIGUOUS = [
    "postgresql+psycopg://ci:Pass@Wd7SecretTail99@127.0.0.1:{port}/perf",
    "postgresql+psycopg://ci:Tr0ub4dor@3x:9Hz5QmPw2K@127.0.0.1:{port}/perf",
]
"""Store URLs whose password holds an unencoded '@' (issue 24, item 3)."""
TAILS = ("Wd7SecretTail99", "9Hz5QmPw2K", "Tr0ub4dor", "Pass@")


def _no_tail(where: str, text: str) -> None:
    for tail in TAILS:
        assert tail not in text, f"{tail!r} shown in {where}"


@pytest.mark.parametrize("url", AMBIGUOUS)
def test_an_ambiguous_store_url_is_refused_saying_to_percent_encode(url: str) -> None:
    url = url.format(port=free_port())
    assert store_label(url).startswith("postgresql+psycopg://ci:***@")
    _no_tail("the label", store_label(url))
    with pytest.raises(StoreError) as caught:
        list_runs(url)
    message = str(caught.value)
    assert "unencoded '@'" in message and "percent-encode it as %40" in message
    _no_tail("the error", message)
    _no_tail("the error's cause", repr(caught.value.__cause__))


@pytest.mark.parametrize("url", AMBIGUOUS)
def test_an_ambiguous_store_url_never_loses_the_run_nor_shows_the_password(
    url: str,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    url = url.format(port=free_port())
    result, files = _measured_run(pytester, monkeypatch, f"--ortperf-store={url}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ortperf: results NOT stored: *percent-encode*; spooled to *"])
    (spooled,) = (pytester.path / ".ortperf" / "spool").iterdir()  # the run is not lost
    files["spool file"] = spooled.read_text()
    data = json.loads(files["spool file"])
    assert data["store"].startswith("postgresql+psycopg://ci:***@127.0.0.1:")
    assert "--ortperf-store=postgresql+psycopg://ci:***@127.0.0.1:" in data["command_line"]
    for where, text in files.items():
        _no_tail(where, text)
    capsys.readouterr()
    monkeypatch.setenv(STORE_ENV, url)  # `ortperf sync`'s "using store" line too
    monkeypatch.chdir(pytester.path)
    assert ortperf_cli(["sync"]) == 2
    captured = capsys.readouterr()
    assert "using store postgresql+psycopg://ci:***@127.0.0.1:" in captured.err
    assert "percent-encode" in captured.err
    _no_tail("ortperf sync", captured.out + captured.err)
    assert spooled.exists()  # kept for a sync with the URL percent-encoded


def test_store_label_hides_query_passwords() -> None:
    url = _url("postgresql://u@h/db?password=hunter22&sslmode=require")
    assert _label(url) == "postgresql://u@h/db?password=***&sslmode=require"


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
    assert set(list_runs(db)["command_line"]) == {stored}


# ------------------------------------------------------------------------------ PostgreSQL

WRONG = "wr0ng-s3cr3t"
NEEDLE = "s3cr3t"
"""In every spelling of the server's password (``pg_server.PASSWORD``) and of ``WRONG``."""


@pytest.fixture
def server(postgres: Postgres) -> Postgres:
    """The suite's server, whose password must hold ``NEEDLE`` for the search to mean
    anything (``tests/pg_server.py`` starts servers with such a password)."""
    if NEEDLE not in postgres.password:
        pytest.skip(f"the password of ${URL_ENV} has no {NEEDLE!r} to look for")
    return postgres


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
    server: Postgres,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    postgres = server
    dbname = postgres.new_database()
    url = postgres.url(dbname, query="?password=" in form)
    shown = postgres.url(dbname, query="?password=" in form, masked=True)
    monkeypatch.delenv(STORE_ENV, raising=False)
    if form.startswith("$"):
        monkeypatch.setenv(STORE_ENV, url)
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
    server: Postgres,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    if "unreachable" in case:
        server = Postgres(free_port())
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
    (spooled,) = (pytester.path / ".ortperf" / "spool").iterdir()  # the run is not lost
    assert "spooled to " in files["terminal output"]
    files["spool file"] = spooled.read_text()
    assert json.loads(files["spool file"])["store"] == shown
    for where, text in files.items():
        _assert_hidden(where, text)

    assert ortperf_cli(["runs", "--store", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ortperf: error: {shown}: ") and expected in err
    _assert_hidden("the ortperf error", err)
