"""Results store: every ``--ortperf`` run, its environment and measurements, in SQL.

SQLAlchemy Core only, so the default SQLite file and a PostgreSQL URL share the code. One
transaction per run; SQLite runs in WAL mode with a busy timeout and ``BEGIN IMMEDIATE`` so
that concurrent writers (parallel CI jobs, several pytest processes) queue instead of failing.

Schema versions start at 1; ``MIGRATIONS[n]`` upgrades a store from version n to n + 1, on
SQLite and PostgreSQL alike (``tests/data/store_schema_v1.*.sql`` keep version 1 as it was
written, and the tests migrate stores made from them). Version 2 added ``runs.uid`` (a run
id made when the run starts: a run written twice, by a retry or ``ortperf sync`` of a
spooled run, is stored once), an index of machine classes and the view
:data:`MEASUREMENTS_VIEW` for dashboards.

Both backends store the same runs alike (:func:`_fit`): a NUL character reads as U+FFFD
and a text is cut to its column's length (``runs.branch``: 255 characters), where
PostgreSQL would refuse the run and SQLite keep it. A run the store cannot take all the
same is an :class:`UnstorableRun`; a server that cannot be reached, a
:class:`StoreUnreachable` (after a connect timeout, not tried again for
:data:`BREAKER_S`).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import hashlib
import json
import math
import os
import re
import shutil
import sqlite3
import stat
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import numpy as np
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from pytest_ortperf.results import (
    RECORD_TYPES,
    ColdStartResult,
    Comparison,
    LatencyResult,
    Record,
    record_from_dict,
)
from pytest_ortperf.stats import Summary

if TYPE_CHECKING:
    import pandas as pd

STORE_ENV = "ORTPERF_STORE"
"""Environment variable naming the store when no option or ini key does."""

DEFAULT_STORE = ".ortperf/results.sqlite"
"""Store used when none is configured, relative to the rootdir (or the current directory)."""

SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
"""How long a database server may take to accept a connection before the store counts as
unreachable (the run is spooled: :mod:`pytest_ortperf.store.spool`)."""

StorePath = str | os.PathLike[str]


class StoreError(Exception):
    """The store cannot be opened, read or written; the message names the store.

    The message is masked by :func:`redact_url` (with the secrets of ``store``, when given):
    whatever a driver said, a StoreError never shows a password.
    """

    def __init__(self, message: str, *, store: StorePath | None = None) -> None:
        super().__init__(redact_url(message, store))


class UnstorableRun(StoreError):
    """The store works but cannot take this run (a field it cannot hold): writing other
    runs goes on (``ortperf sync`` sets the spool file aside)."""


class StoreUnreachable(StoreError):
    """No connection to the store's server (refused, or no answer within the connect
    timeout): the rest of the run does not try it again (it spools at once)."""


# --------------------------------------------------------------------------------------------
# Credentials: never shown, never stored

MASK = "***"
"""What a masked password or secret reads as (SQLAlchemy's ``hide_password`` spelling)."""

SECRET_KEY_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "api_key",
    "access_key",
    "private_key",
    "credential",
)
"""A query or connection-string key holding any of these (case-insensitive, ``-`` read as
``_``) is a secret: ``password``, ``sslpassword``, ``client_secret``, ``access_token``..."""
SECRET_KEYS = ("pwd", "pw", "pass", "sig")
"""Keys that are secrets only when they are the whole key (``pwd=``, SAS ``sig=``)."""

MIN_LITERAL = 4
"""Known secrets this long or longer are also masked wherever they stand alone in a text
(a driver's message); shorter ones would mask ordinary words and give themselves away."""

# The patterns start only where a word starts (lookbehind) and passwords are found by
# position (_passwords): linear time on long texts.
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://")
_USER = re.compile(r"[^\s:/]*")
"""A URL's user name: up to ``:`` (then a password follows) or ``/`` (then none does); it
may hold ``@``, as SQLAlchemy reads it."""
_URL_ENDS = re.compile(r"[\s\"'<>`]")
"""What ends a URL in a text (a password holds none of these)."""
_KEY = re.compile(
    r"(?<![\w.\-])(?:(?P<q>[\"'])(?P<qkey>[\w.\-]+)(?P=q)\s*:|(?P<key>[\w.\-]+)\s*=)\s*"
)
"""``KEY=`` in a query string or a libpq/ODBC connection string, ``"KEY":`` in JSON or a
Python dict; what follows is masked where KEY is a secret (:func:`_secret_key`)."""
_VALUE = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;]*[^\s&;:,.)\]}'\"]")
"""A value: quoted, or bare up to a blank, ``&`` or ``;`` (punctuation that ends a sentence
or a label, ``URL: message``, stays)."""


def _secret_key(key: str) -> bool:
    name = key.lower().replace("-", "_")
    return name in SECRET_KEYS or any(part in name for part in SECRET_KEY_PARTS)


def _variants(secret: str) -> set[str]:
    """A secret as it may be written: as is, decoded, percent-encoded."""
    forms = (unquote, unquote_plus, lambda s: quote(s, safe=""), lambda s: quote_plus(s, safe=""))
    return {secret, *(form(secret) for form in forms)}


def _url_secrets(store: StorePath | None) -> set[str]:
    """The password and secret query values of a store URL (nothing for paths); the
    password as written up to the URL's last ``@`` too (:func:`_passwords`)."""
    text = "" if store is None else os.fspath(store).strip()
    if not _SCHEME.match(text):
        return set()
    found = {text[start:end] for start, end in _passwords(text)}
    # SQLAlchemy splits a password holding '@' (and ':'): a driver may quote each piece
    found |= {piece for raw in found for piece in re.split("[@:]", raw)}
    try:
        url = sa.make_url(text)
    except (SQLAlchemyError, ValueError, TypeError):
        url = None
    if url is not None:
        found |= {url.password} if url.password else set()
        for name, value in url.query.items():
            if _secret_key(name):
                found.update([value] if isinstance(value, str) else value)
    return {variant for secret in found if secret for variant in _variants(str(secret))}


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def redact_url(text: str, store: StorePath | None = None) -> str:
    """``text`` with every credential in it masked as ``***``: the password of each URL
    (``scheme://user:PASSWORD@host``; the user name stays), the values of password-like
    keys (:data:`SECRET_KEY_PARTS`, :data:`SECRET_KEYS`) in query strings, connection
    strings and JSON, and the secrets of ``store`` (a store path or URL) or of ``text``
    itself when it is one URL, wherever they stand alone in the text (at least
    :data:`MIN_LITERAL` characters). Paths and URLs without credentials are unchanged.

    The one function that masks: every store URL, command line or store message that is
    shown or stored goes through it.
    """
    secrets = _url_secrets(store)
    if not re.search(r"\s", text.strip()):  # one URL (in a longer text, SQLAlchemy would
        secrets |= _url_secrets(text)  # read a password into ``host:1/db or x@y``)
    found = [text[start:end] for start, end in _passwords(text) + _keyed_values(text)]
    for raw in found:
        if raw != MASK:
            secrets |= _variants(raw) | _variants(_unquoted(raw))
    # Known secrets first, whole (a bare value's end is a guess), then what looks like one.
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_LITERAL and secret != MASK:
            alone = rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])"
            text = re.sub(alone, MASK, text)
    return _mask(_mask(text, _passwords), _keyed_values)


def _mask(text: str, spans: Callable[[str], list[tuple[int, int]]]) -> str:
    parts, done = [], 0
    for start, end in spans(text):
        parts += [text[done:start], MASK]
        done = end
    return "".join([*parts, text[done:]])


def _passwords(text: str) -> list[tuple[int, int]]:
    """Where the passwords of URLs are in ``text``: ``scheme://user:PASSWORD@``, PASSWORD
    up to the LAST ``@`` of the URL (a blank or a quote ends it), so that a password
    holding an unencoded ``@`` is masked whole (SQLAlchemy would split it at the first).
    Linear in the length of ``text``."""
    ends = [m.start() for m in _URL_ENDS.finditer(text)]
    ats = [m.start() for m in re.finditer("@", text)]
    spans: list[tuple[int, int]] = []
    for scheme in _SCHEME.finditer(text):
        user = _USER.match(text, scheme.end())
        colon = scheme.end() if user is None else user.end()
        if text[colon : colon + 1] != ":" or (spans and colon < spans[-1][1]):
            continue
        end_at = bisect.bisect_right(ends, colon)
        end = ends[end_at] if end_at < len(ends) else len(text)
        last = bisect.bisect_left(ats, end) - 1
        if last >= 0 and ats[last] > colon + 1:
            spans.append((colon + 1, ats[last]))
    return spans


def _keyed_values(text: str) -> list[tuple[int, int]]:
    """Where the values of secret keys are in ``text`` (a key inside one is not read: the
    value of any other key is, a URL's query in ``--ortperf-store=URL``)."""
    spans: list[tuple[int, int]] = []
    for key in _KEY.finditer(text):
        if (spans and key.start() < spans[-1][1]) or not _secret_key(key["key"] or key["qkey"]):
            continue
        value = _VALUE.match(text, key.end())
        if value is not None:
            spans.append(value.span())
    return spans


# --------------------------------------------------------------------------------------------
# Schema

metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
)

environments = sa.Table(
    "environments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False, unique=True),
    sa.Column("fingerprint", sa.String(64)),
    sa.Column("ort_version", sa.String(64)),
    sa.Column("providers", sa.JSON),
    sa.Column("onnx_version", sa.String(64)),
    sa.Column("numpy_version", sa.String(64)),
    sa.Column("python_version", sa.String(64)),
    sa.Column("os", sa.String(255)),
    sa.Column("cpu_model", sa.String(255)),
    sa.Column("cores", sa.Integer),
    sa.Column("memory", sa.BigInteger),
    sa.Column("extra", sa.JSON),
    sa.Index("ix_environments_fingerprint", "fingerprint"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("finished", sa.Float, nullable=False),
    sa.Column("commit", sa.String(64)),
    sa.Column("branch", sa.String(255)),
    sa.Column("dirty", sa.Boolean),
    sa.Column("command_line", sa.Text),
    sa.Column("environment_id", sa.Integer, sa.ForeignKey("environments.id")),
    sa.Column("extra", sa.JSON),
    sa.Column("uid", sa.String(36)),
    sa.Index("ix_runs_started", "started"),
    sa.Index("ux_runs_uid", "uid", unique=True),
)

measurements = sa.Table(
    "measurements",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("test", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("api", sa.String(64)),
    sa.Column("measured", sa.Boolean),
    sa.Column("calls_per_block", sa.Integer),
    sa.Column("session", sa.JSON),
    sa.Column("n", sa.Integer),
    sa.Column("median", sa.Float),
    sa.Column("mean", sa.Float),
    sa.Column("std", sa.Float),
    sa.Column("min", sa.Float),
    sa.Column("max", sa.Float),
    sa.Column("p90", sa.Float),
    sa.Column("p99", sa.Float),
    sa.Column("iqr", sa.Float),
    sa.Column("ratio", sa.Float),
    sa.Column("low", sa.Float),
    sa.Column("high", sa.Float),
    sa.Column("confidence", sa.Float),
    sa.Column("ref_median", sa.Float),
    sa.Column("samples", sa.LargeBinary),
    sa.Column("ref_samples", sa.LargeBinary),
    sa.Column("extra", sa.JSON),
    sa.Index("ix_measurements_run", "run_id"),
    sa.Index("ix_measurements_test", "test"),
    sa.Index("ix_measurements_name", "name"),
)

profile_ops = sa.Table(
    "profile_ops",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("measurement_id", sa.Integer, sa.ForeignKey("measurements.id"), nullable=False),
    sa.Column("op_type", sa.String(255), nullable=False),
    sa.Column("total_us", sa.Float),
    sa.Column("count", sa.Integer),
    sa.Column("share", sa.Float),
    sa.Index("ix_profile_ops_measurement", "measurement_id"),
)

INTERRUPTED = "interrupted"
"""Key of ``runs.extra`` (true: the run was stopped before all its tests ran, e.g. by
Ctrl-C) and column of :func:`list_runs` and :func:`read_results`."""

MEASUREMENTS_VIEW = "ortperf_measurements"
"""A view for dashboards (Grafana, Metabase, plain SQL): one row per stored measurement with
its run, commit, branch and machine class. Columns: ``measurement_id``, ``run_id``,
``run_uid``, ``started`` (epoch seconds), ``commit``, ``branch``, ``machine_class`` (the
hardware hash of ``env.machine_fingerprint``), ``cpu_model``, ``cores``, ``ort_version``,
``test``, ``name``, ``kind``, ``api``, ``measured``, ``median`` (seconds per call of a
latency, of the candidate of a comparison), ``p90``, ``p99``, ``ratio``, ``low``,
``high`` (a comparison's ratio candidate/reference and its interval)."""

_VIEW_SQL = f"""CREATE VIEW {MEASUREMENTS_VIEW} AS
SELECT m.id AS measurement_id, r.id AS run_id, r.uid AS run_uid, r.started AS started,
       r."commit" AS "commit", r.branch AS branch, e.fingerprint AS machine_class,
       e.cpu_model AS cpu_model, e.cores AS cores, e.ort_version AS ort_version,
       m.test AS test, m.name AS name, m.kind AS kind, m.api AS api, m.measured AS measured,
       m.median AS median, m.p90 AS p90, m.p99 AS p99,
       m.ratio AS ratio, m.low AS low, m.high AS high
FROM measurements m
JOIN runs r ON m.run_id = r.id
LEFT JOIN environments e ON r.environment_id = e.id"""


def _create_view(conn: Connection) -> None:
    conn.exec_driver_sql(_VIEW_SQL)


def _v1_to_v2(conn: Connection) -> None:
    """Version 2: ``runs.uid`` (unique), the machine-class index, the dashboards' view."""
    conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN uid VARCHAR(36)")
    for index in (*runs.indexes, *environments.indexes):
        if index.name in ("ux_runs_uid", "ix_environments_fingerprint"):
            index.create(conn)
    _create_view(conn)


Migration = Callable[[Connection], None]
MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2}
"""``MIGRATIONS[n]`` upgrades a version-n store to version n + 1 inside the open transaction."""


# --------------------------------------------------------------------------------------------
# Locating and opening a store


def resolve_store(value: str | None, rootdir: Path) -> str | None:
    """Where results go: a file path or SQLAlchemy URL, or None when storing is disabled.

    None or "" -> ``$ORTPERF_STORE`` (:data:`STORE_ENV`) when set, else ``DEFAULT_STORE``
    under rootdir; "none" -> disabled; a URL (``sqlite:///``, ``postgresql://``...) is
    passed through; any other path is taken relative to rootdir.
    """
    if value is None or not value.strip():
        value = os.environ.get(STORE_ENV, "")
    if not value.strip():
        return str(Path(rootdir) / DEFAULT_STORE)
    text = value.strip()
    if text.lower() == "none":
        return None
    if "://" in text:
        return text
    path = Path(text).expanduser()
    return str(path if path.is_absolute() else Path(rootdir) / path)


def _url(store: StorePath) -> sa.URL:
    text = os.fspath(store)
    if "://" in text:
        _refuse_ambiguous(text)
        try:
            return sa.make_url(text)
        except (SQLAlchemyError, ValueError) as exc:
            msg = f"{text}: not a valid store path or URL ({exc})"
            raise StoreError(msg, store=text) from None
    return sa.URL.create("sqlite", database=str(Path(text).expanduser().absolute()))


def _refuse_ambiguous(text: str) -> None:
    """Refuse a URL whose user name or password holds an unencoded ``@``: SQLAlchemy
    splits at the first ``@``, and would read the rest of the password as the host."""
    rest = text.split("://", 1)[1]
    colon = len(_USER.match(rest).group())  # type: ignore[union-attr]  # matches any text
    first = rest.find("@", colon)
    if rest[colon : colon + 1] != ":" or first < 0:
        return
    host = re.split(r"[/?#]", rest[first + 1 :], maxsplit=1)[0]
    if "@" in host:
        raise StoreError(
            f"{redact_url(text)}: ambiguous store URL: its user name or password holds an "
            "unencoded '@'; percent-encode it as %40 (and ':' as %3A, '/' as %2F)",
            store=text,
        )


def _sqlite_file(url: sa.URL) -> Path | None:
    """The database file of an SQLite URL (None for other backends and in-memory)."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(str(url.database))


def _label(url: sa.URL) -> str:
    path = _sqlite_file(url)
    return str(path) if path is not None else redact_url(url.render_as_string(hide_password=True))


def store_label(store: StorePath) -> str:
    """The store as messages name it: an SQLite file's path, a URL without its password
    (a URL that cannot be read: its text, masked)."""
    try:
        return _label(_url(store))
    except StoreError:
        return redact_url(os.fspath(store), store)


def same_store(a: str, b: str) -> bool:
    """Whether two stores or store labels name the same store: SQLite files compared by
    their real paths (through symlinks), URLs by their masked text."""

    def key(text: str) -> str:
        try:
            path = _sqlite_file(_url(text))
        except StoreError:
            return text
        return os.path.realpath(path) if path is not None else _label(_url(text))

    return a == b or key(a) == key(b)


LOW_DISK_BYTES = 1 << 20
"""Free space below which an I/O error of SQLite is reported as a full disk."""

_SQLITE_FULL = 13
"""SQLite's result code SQLITE_FULL (``sqlite3.Error.sqlite_errorcode``, Python 3.11+)."""


def _disk_full(orig: BaseException) -> bool:
    """Whether a driver's error says the disk (or the database's size limit) is full."""
    if getattr(orig, "sqlite_errorname", None) == "SQLITE_FULL":
        return True
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == _SQLITE_FULL:
        return True
    if isinstance(orig, OSError) and orig.errno == errno.ENOSPC:
        return True
    if getattr(orig, "sqlstate", None) == "53100":  # PostgreSQL disk_full
        return True
    text = str(orig).lower()
    return any(words in text for words in ("database or disk is full", "no space left on device"))


def _io_error(orig: BaseException) -> bool:
    name = getattr(orig, "sqlite_errorname", None)
    if isinstance(name, str) and name.startswith("SQLITE_IOERR"):
        return True
    return "disk i/o error" in str(orig).lower()


def _free_bytes(path: Path | None) -> int | None:
    """Free bytes on the file system of ``path``'s directory (None when unknown)."""
    if path is None:
        return None
    try:
        return int(shutil.disk_usage(path.parent).free)
    except (OSError, ValueError):
        return None


def _explain(exc: BaseException, path: Path | None = None) -> str:
    """A driver's error in words; ``path`` is the SQLite file (for the free space on its
    disk when SQLite reports an I/O error)."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip() or type(orig).__name__
    lowered = text.lower()
    if _disk_full(orig):
        return f"disk full: no space left to write the store ({text})"
    if _io_error(orig):
        free = _free_bytes(path)
        if free is not None and path is not None and free < LOW_DISK_BYTES:
            return f"disk full: {free} bytes free in {path.parent} ({text})"
        return text
    if "file is not a database" in lowered or "malformed" in lowered:
        return f"not a readable SQLite database, corrupt or another kind of file ({text})"
    if "unable to open database file" in lowered:
        return f"cannot open the database file: missing directory or no permission ({text})"
    if "readonly" in lowered or "read-only" in lowered:
        return f"cannot write: the store is read-only ({text})"
    if "locked" in lowered or "busy" in lowered:
        return f"locked by another process for more than {BUSY_TIMEOUT_MS // 1000} s ({text})"
    return text


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def _schema_objects(path: Path, label: str) -> list[tuple[str, str]]:
    """(type, name) of the tables, views, indexes and triggers of an SQLite file, read on a
    read-only connection (nothing of the file changes, its journal mode included)."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            rows = conn.execute(
                "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreError(f"{label}: {_explain(exc, path)}; left as it was") from None
    return [(str(kind), str(name)) for kind, name in rows]


def _check_sqlite_file(path: Path, label: str) -> None:
    """Refuse, before any connection that could change it, a file that is not a store.

    Taken: no file, an empty file (0 bytes), an SQLite database with nothing in it (also
    what a writer killed while creating the store leaves), and a store of ours (its
    ``schema_version`` and ``runs`` tables). Refused with a StoreError naming the file, its
    bytes and journal mode left as they are: anything else (another kind of file, another
    program's SQLite database)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{label}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{label}: not a file (a directory?), so not a results store")
    if info.st_size == 0:
        return
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{label}: cannot read ({exc.strerror or exc})") from None
    if head != SQLITE_HEADER:
        raise StoreError(
            f"{label}: not a readable SQLite database, corrupt or another kind of file; "
            "not a pytest-ortperf store, left as it was (give another store path)"
        )
    objects = _schema_objects(path, label)
    tables = {name for kind, name in objects if kind == "table"}
    if not objects or {schema_version.name, runs.name} <= tables:
        return
    names = sorted({name for _, name in objects})
    shown = ", ".join(repr(name) for name in names[:5])
    if len(names) > 5:
        shown += f" and {len(names) - 5} more"
    raise StoreError(
        f"{label}: not a pytest-ortperf store (no schema_version table): an SQLite "
        f"database of something else ({shown}); left as it was (give another store path)"
    )


def _engine(url: sa.URL, *, write: bool) -> Engine:
    if url.get_backend_name() == "postgresql":
        # a connect_timeout in the URL's query wins (libpq reads at least 2 s)
        connect_args = (
            {} if "connect_timeout" in url.query else {"connect_timeout": CONNECT_TIMEOUT_S}
        )
        return sa.create_engine(url, poolclass=NullPool, connect_args=connect_args)
    if url.get_backend_name() != "sqlite":
        return sa.create_engine(url, poolclass=NullPool)
    engine = sa.create_engine(url, poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's begin event issues BEGIN
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if write:
                cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock up front: writers wait on busy_timeout in turn.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


@contextlib.contextmanager
def _transaction(
    store: StorePath, *, write: bool, first: Callable[[Connection], object] | None = None
) -> Iterator[Connection]:
    """One connection in one transaction; errors become StoreError naming the store.

    ``first`` is what a writer commits before that transaction: on a database server, in
    the short transaction that prepares the schema (:func:`_prepare_server`), so that
    writers wait on it briefly and never on one another's whole transaction; on SQLite, at
    the start of the one transaction (its writers take turns anyway)."""
    url = _url(store)
    label = _label(url)
    path = _sqlite_file(url)
    if path is not None:
        if write:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                msg = f"{label}: cannot create its directory ({exc})"
                raise StoreError(msg, store=store) from None
        elif not path.exists():
            raise StoreError(f"{label}: no results store here (run `pytest --ortperf` first)")
        _check_sqlite_file(path, label)
    try:
        engine = _engine(url, write=write)
    except (SQLAlchemyError, ImportError) as exc:
        raise StoreError(f"{label}: cannot open ({exc})", store=store) from None
    server = engine.dialect.name != "sqlite"
    connected: list[bool] = []
    if server:
        _circuit_open(label, store)
        event.listen(engine, "connect", lambda *_: connected.append(True))
    try:
        if write and server:
            _prepare_server(engine, label, first)
        with engine.begin() as conn:
            _check_schema(conn, label, create=write)
            if first is not None and not server:
                first(conn)
            yield conn
    except StoreError:
        raise
    except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
        why = f"{label}: {_explain(exc, path)}"
        if server and not connected:
            _trip(label, why)
            raise StoreUnreachable(why, store=store) from exc
        # a value the database (DataError) or SQLAlchemy (a bare StatementError) refused
        refused = isinstance(exc, sa.exc.StatementError) and not isinstance(exc, sa.exc.DBAPIError)
        if refused or isinstance(exc, sa.exc.DataError):
            raise UnstorableRun(why, store=store) from exc
        raise StoreError(why, store=store) from exc
    finally:
        engine.dispose()


BREAKER_S = 300.0
"""For this long after a connection to a store's server timed out, this process does not
try that server again: each try would wait :data:`CONNECT_TIMEOUT_S` (a server that
accepts TCP but never answers), so a run spools at once instead of paying it per
measurement. A refused connection fails fast and opens no breaker."""

_timed_out: dict[str, tuple[float, str]] = {}
"""Store label -> (monotonic time, why) of its server's last connect timeout."""


def _trip(label: str, why: str) -> None:
    lowered = why.lower()
    if "timeout" in lowered or "timed out" in lowered:
        _timed_out[label] = (time.monotonic(), why)


def _circuit_open(label: str, store: StorePath) -> None:
    """Raise StoreUnreachable, without trying, when ``label``'s server timed out less than
    :data:`BREAKER_S` ago (see there)."""
    found = _timed_out.get(label)
    if found is None:
        return
    ago = time.monotonic() - found[0]
    if ago >= BREAKER_S:
        del _timed_out[label]
        return
    raise StoreUnreachable(
        f"{found[1]} ({ago:.0f} s ago: not tried again for {BREAKER_S:.0f} s)", store=store
    )


SCHEMA_LOCK = 0x6F72_7470_6572_66  # "ortperf"
"""Key of the PostgreSQL advisory lock that writers take to create or migrate the schema."""


def _prepare_server(
    engine: Engine, label: str, first: Callable[[Connection], object] | None
) -> None:
    """Create or migrate a server's schema in a short transaction of its own, one writer at
    a time on PostgreSQL (an advisory lock): concurrent first runs against an empty
    database, or against an older schema, must not both create or both migrate. The lock
    ends with this transaction, so writers of runs never wait on one another's run.
    ``first`` runs at its end (see :func:`_transaction`)."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK)))
        _check_schema(conn, label, create=True)
        if first is not None:
            first(conn)


def _check_schema(conn: Connection, label: str, *, create: bool) -> None:
    """Create a new store, or check the version of an existing one and migrate it (when
    writing: a reader of an older store reads it as it is, every query of this module
    reading columns that version 1 has)."""
    tables = set(sa.inspect(conn).get_table_names())
    if schema_version.name not in tables:
        # An SQLite file holds nothing else (a database server may hold other schemas'
        # tables; ours must not be there already).
        foreign = tables if conn.dialect.name == "sqlite" else tables & set(metadata.tables)
        if foreign:
            raise StoreError(f"{label}: not a pytest-ortperf store (no schema_version table)")
        if not create:
            raise StoreError(f"{label}: empty store, no pytest-ortperf results in it")
        metadata.create_all(conn)
        _create_view(conn)
        conn.execute(schema_version.insert(), {"version": SCHEMA_VERSION})
        return
    version = conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar()
    if version is None:
        raise StoreError(f"{label}: schema version missing (damaged store)")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{label}: written by a newer pytest-ortperf: schema {version} > {SCHEMA_VERSION};"
            " upgrade pytest-ortperf to use it"
        )
    if version < SCHEMA_VERSION and create:
        _migrate(conn, label, int(version))


def _migrate(conn: Connection, label: str, version: int) -> None:
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise StoreError(f"{label}: no migration from schema {version}")
        step(conn)
        version += 1
    conn.execute(schema_version.delete())
    conn.execute(schema_version.insert(), {"version": version})


# --------------------------------------------------------------------------------------------
# Records -> rows


def encode_samples(samples: Sequence[float]) -> bytes:
    """Samples as zlib-compressed little-endian float64."""
    return zlib.compress(np.asarray(samples, dtype="<f8").tobytes(), 1)


def decode_samples(blob: bytes | None) -> tuple[float, ...]:
    """Inverse of ``encode_samples`` (an empty tuple for None)."""
    if blob is None:
        return ()
    return tuple(np.frombuffer(zlib.decompress(blob), dtype="<f8").tolist())


_HEAD_COLUMNS = ("kind", "test", "name", "api", "measured")
"""Keys of every record's ``to_dict`` form that have their own column."""

_ARM_COLUMNS = ("kind", "samples", "summary")
"""Keys of a latency result's ``to_dict`` that a comparison's arm does not keep in
``extra``: the kind is implied, the samples have their own columns and the summary is
derived from them."""


def _arm(result: LatencyResult) -> dict[str, Any]:
    """What a comparison's arm is besides its samples (its ``to_dict`` form without them)."""
    return {k: v for k, v in result.to_dict().items() if k not in _ARM_COLUMNS}


def _session(result: LatencyResult) -> dict[str, Any] | None:
    return None if result.session is None else result.session.to_dict()


def _measurement_row(run_id: int, record: Record) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": run_id,
        "test": record.test,
        "name": record.name,
        "kind": record.kind,
        "api": record.api,
        "measured": record.measured,
        "ratio": None,
        "low": None,
        "high": None,
        "confidence": None,
        "ref_median": None,
        "ref_samples": None,
        # Bulk inserts need the same keys in every row: kinds without a summary leave
        # these empty.
        **dict.fromkeys(Summary.__dataclass_fields__),
    }
    if isinstance(record, LatencyResult):
        row.update(record.summary.to_dict())
        row.update(
            calls_per_block=record.calls_per_block,
            session=_session(record),
            samples=encode_samples(record.samples),
            extra={
                "preempted": record.preempted,
                "preempted_kept": record.preempted_kept,
                **({"slo": [v.to_dict() for v in record.slo]} if record.slo else {}),
            },
        )
    elif isinstance(record, Comparison):
        cand, ref = record.candidate, record.reference
        row.update(cand.summary.to_dict())
        row.update(
            calls_per_block=cand.calls_per_block,
            session=_session(cand),
            ratio=record.ratio,
            low=record.low,
            high=record.high,
            confidence=record.confidence,
            ref_median=ref.median,
            samples=encode_samples(cand.samples),
            ref_samples=encode_samples(ref.samples),
            extra={
                "candidate": _arm(cand),
                "reference": _arm(ref),
                "block_ratios": list(record.block_ratios),
                "output_diffs": [d.to_dict() for d in record.output_diffs],
            },
        )
    else:  # memory (and any later kind): its to_dict form, less the columns above, in extra
        data = {k: v for k, v in record.to_dict().items() if k not in _HEAD_COLUMNS}
        row.update(extra=data, session=None, samples=None, calls_per_block=None)
    return row


REPLACEMENT = "\ufffd"
"""What a NUL character of a stored text reads as (PostgreSQL cannot store NUL)."""
_INT_RANGE: dict[type[Any], int] = {sa.Integer: 1 << 31, sa.BigInteger: 1 << 63}


def _fit(table: sa.Table, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` as both backends store it alike, so that SQLite and PostgreSQL take the same
    runs (one rule): a NUL character in a text or JSON value reads as U+FFFD, a text is cut
    to its column's length (``runs.branch``: 255 characters), a value of a text column
    that is not text is stored as its ``str``, and an integer out of its column's range
    as NULL."""
    for name, value in row.items():
        if value is None:
            continue
        kind = table.c[name].type
        if isinstance(kind, sa.String):
            text = value if isinstance(value, str) else str(value)
            text = text.replace("\x00", REPLACEMENT)
            row[name] = text[: kind.length] if kind.length else text
        elif isinstance(kind, sa.JSON):
            if "\\u0000" in json.dumps(value, default=str):
                row[name] = _without_nul(value)
        elif type(kind) in _INT_RANGE and isinstance(value, int) and not isinstance(value, bool):
            bound = _INT_RANGE[type(kind)]
            row[name] = value if -bound <= value < bound else None
    return row


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", REPLACEMENT)
    if isinstance(value, Mapping):
        return {_without_nul(str(k)): _without_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_nul(v) for v in value]
    return value


def _environment_row(env: Mapping[str, Any]) -> dict[str, Any]:
    from pytest_ortperf.machine import machine_fingerprint

    known = {
        "ort_version": env.get("ort_version"),
        "providers": list(env.get("providers") or []),
        "onnx_version": env.get("onnx_version"),
        "numpy_version": env.get("numpy_version"),
        "python_version": env.get("python_version"),
        "os": env.get("os"),
        "cpu_model": env.get("cpu_model"),
        "cores": env.get("logical_cores", env.get("cores")),
        "memory": env.get("memory_bytes", env.get("memory")),
    }
    skip = {*known, "logical_cores", "memory_bytes", "fingerprint"}
    extra = {k: v for k, v in env.items() if k not in skip}
    row = _fit(
        environments,
        {
            **known,
            "fingerprint": env.get("fingerprint") or machine_fingerprint(env),
            "extra": extra,
        },
    )
    blob = json.dumps(row, sort_keys=True, default=str).encode()
    row["digest"] = hashlib.sha256(blob).hexdigest()
    return row


def _inserted_id(result: sa.CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    if key is None or key[0] is None:
        raise StoreError("the database returned no id for an inserted row")
    return int(key[0])


def _environment_id(conn: Connection, env: Mapping[str, Any]) -> int:
    row = _environment_row(env)
    query = sa.select(environments.c.id).where(environments.c.digest == row["digest"])
    found = conn.execute(query).scalar()
    if found is not None:
        return int(found)
    try:
        with conn.begin_nested():
            return _inserted_id(conn.execute(environments.insert(), row))
    except IntegrityError:  # inserted concurrently (servers without a global write lock)
        return int(conn.execute(query).scalar_one())


def _profile_rows(measurement_id: int, profile: Any) -> list[dict[str, Any]]:
    """Rows of a per-op profile summary: a DataFrame or a list of mappings with ``op_type``,
    ``total_us``, optional ``count`` and ``share`` (computed from ``total_us`` when absent)."""
    if hasattr(profile, "to_dict") and hasattr(profile, "columns"):
        if "op_type" not in profile.columns and profile.index.name == "op_type":
            profile = profile.reset_index()
        items = profile.to_dict("records")
    else:
        items = list(profile)
    total = sum(float(item["total_us"]) for item in items) or 1.0
    rows = []
    for item in items:
        total_us = float(item["total_us"])
        share = item.get("share")
        rows.append(
            _fit(
                profile_ops,
                {
                    "measurement_id": measurement_id,
                    "op_type": str(item["op_type"]),
                    "total_us": total_us,
                    "count": None if item.get("count") is None else int(item["count"]),
                    "share": total_us / total if share is None else float(share),
                },
            )
        )
    return rows


def _insert_profiles(
    conn: Connection, run_id: int, profiles: Mapping[tuple[str, str], Any]
) -> None:
    query = (
        sa.select(measurements.c.id, measurements.c.test, measurements.c.name)
        .where(measurements.c.run_id == run_id)
        .order_by(measurements.c.id)
    )
    ids: dict[tuple[str, str], int] = {}
    for mid, test, name in conn.execute(query):
        ids.setdefault((test, name), int(mid))
    rows: list[dict[str, Any]] = []
    for key, profile in profiles.items():
        if key in ids:  # a profile without a measurement of the same (test, name) is dropped
            rows.extend(_profile_rows(ids[key], profile))
    if rows:
        conn.execute(profile_ops.insert(), rows)


# --------------------------------------------------------------------------------------------
# Public API: writing


def save_run(
    store: StorePath,
    *,
    started: float,
    finished: float,
    command_line: str,
    git: Mapping[str, Any],
    environment: Mapping[str, Any],
    records: Sequence[Record],
    profiles: Mapping[tuple[str, str], Any] | None = None,
    interrupted: bool = False,
    uid: str | None = None,
) -> int:
    """Store one run and its records in one transaction; returns the new run id.

    ``started``/``finished`` are epoch seconds; ``git`` is ``env.git_info()``; ``environment``
    is ``env.collect_environment()``; ``profiles`` maps (test id, name) to a per-op summary.
    ``command_line`` is stored with its credentials, and those of ``store``, masked
    (:func:`redact_url`). ``interrupted`` marks a run stopped before all its tests ran
    (Ctrl-C): its results are partial, and ``latest``, ``ortperf compare``, ``ortperf
    history`` and the reports' history leave it out unless asked (``"interrupted": true``
    in ``runs.extra``). ``uid`` names the run (made when it started, see
    ``OrtperfState.uid``): a run whose uid is stored already is not stored again, and its
    id is returned, so a retry or a sync writes each run exactly once. Raises StoreError
    (nothing of this run stored) when the store cannot be written.
    """
    if uid is not None and not UID.fullmatch(uid):
        raise UnstorableRun(
            f"{store_label(store)}: cannot store a run with uid {uid[:40]!r}: a uid is 1 to 36"
            " letters, digits and '-' (as this run made it)"
        )
    # The environment's row first: its digest is unique, so on a server the writers of one
    # machine would otherwise wait on the first one's whole run.
    with _transaction(store, write=True, first=lambda c: _environment_id(c, environment)) as conn:
        if uid is not None:
            found = _run_with_uid(conn, uid)
            if found is not None:
                return found
        env_id = _environment_id(conn, environment)
        run_row: dict[str, Any] = {
            "started": float(started),
            "finished": float(finished),
            "commit": git.get("commit"),
            "branch": git.get("branch"),
            "dirty": git.get("dirty"),
            "command_line": redact_url(command_line, store),
            "environment_id": env_id,
            "extra": {INTERRUPTED: True} if interrupted else {},
            "uid": uid,
        }
        _fit(runs, run_row)
        try:
            with conn.begin_nested():
                run_id = _inserted_id(conn.execute(runs.insert(), run_row))
        except IntegrityError:
            # the same uid written by another process since the check above (a server
            # without SQLite's one writer at a time): that run stands, this one is dropped
            found = None if uid is None else _run_with_uid(conn, uid)
            if found is None:
                raise
            return found
        try:
            rows = [_fit(measurements, _measurement_row(run_id, record)) for record in records]
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise UnstorableRun(f"{_label(_url(store))}: cannot store a record ({exc!r})") from exc
        if rows:
            conn.execute(measurements.insert(), rows)
        if profiles:
            try:
                _insert_profiles(conn, run_id, profiles)
            except (AttributeError, TypeError, ValueError, KeyError) as exc:
                msg = f"{_label(_url(store))}: cannot store a profile ({exc!r})"
                raise UnstorableRun(msg) from exc
    return run_id


UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-]{0,35}")
"""What a run's uid may be (``runs.uid``; a uuid4 as a run makes it)."""


def _run_with_uid(conn: Connection, uid: str) -> int | None:
    found = conn.execute(sa.select(runs.c.id).where(runs.c.uid == uid)).scalar()
    return None if found is None else int(found)


def prune(store: StorePath, keep: int) -> tuple[int, int]:
    """Delete all but the newest ``keep`` runs; returns (runs, measurements) removed."""
    if keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    with _transaction(store, write=True) as conn:
        kept = (
            sa.select(runs.c.id)
            .order_by(runs.c.started.desc(), runs.c.id.desc())
            .limit(keep)
            .scalar_subquery()
        )
        doomed = sa.select(runs.c.id).where(runs.c.id.not_in(kept))
        doomed_m = sa.select(measurements.c.id).where(measurements.c.run_id.in_(doomed))
        conn.execute(profile_ops.delete().where(profile_ops.c.measurement_id.in_(doomed_m)))
        n_meas = conn.execute(measurements.delete().where(measurements.c.run_id.in_(doomed)))
        n_runs = conn.execute(runs.delete().where(runs.c.id.not_in(kept)))
        used = sa.select(runs.c.environment_id).where(runs.c.environment_id.is_not(None))
        conn.execute(environments.delete().where(environments.c.id.not_in(used)))
        return int(n_runs.rowcount), int(n_meas.rowcount)


# --------------------------------------------------------------------------------------------
# Public API: reading

_JSON_COLUMNS = ("providers", "session", "extra")


def _json_text(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A JSON column fetched as text: ``_frame`` decodes it once per distinct value."""
    return sa.type_coerce(column, sa.Text).label(column.key)


def _where(run_id: Any = None, measurement_id: Any = None) -> str:
    """A stored row in words: ``measurement 12 (run 3)``, ``run 3``."""
    if measurement_id is not None:
        return f"measurement {measurement_id}" + ("" if run_id is None else f" (run {run_id})")
    return "a row" if run_id is None else f"run {run_id}"


def _damaged(label: str, where: str, column: str, why: str) -> StoreError:
    return StoreError(f"{label}: {where}, column {column}: {why}; the store is damaged there")


class _BadValue(Exception):
    """A stored value that cannot be decoded: its index and what went wrong."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(why)
        self.index = index
        self.why = why


def _decode_json(values: Sequence[Any]) -> list[Any]:
    """JSON texts decoded (each distinct one once); raises _BadValue at the first invalid."""
    memo: dict[str, Any] = {}
    out = []
    for index, value in enumerate(values):
        if isinstance(value, str):  # drivers that decode JSON themselves hand over objects
            if value not in memo:
                try:
                    memo[value] = json.loads(value)
                except ValueError as exc:  # JSONDecodeError, or nesting too deep
                    raise _BadValue(index, f"not valid JSON ({exc})") from None
            value = memo[value]
        elif isinstance(value, bytes | bytearray | memoryview):
            raise _BadValue(index, "binary data where JSON text belongs")
        out.append(value)
    return out


def _json_value(value: Any, label: str, where: str, column: str) -> Any:
    try:
        return _decode_json([value])[0]
    except _BadValue as exc:
        raise _damaged(label, where, column, exc.why) from None


def _samples(blob: Any, label: str, where: str, column: str) -> tuple[float, ...]:
    """:func:`decode_samples` of a stored blob; a damaged one is a StoreError naming it."""
    if blob is not None and not isinstance(blob, bytes | bytearray | memoryview):
        why = f"not samples written by pytest-ortperf (a {type(blob).__name__}, not a blob)"
        raise _damaged(label, where, column, why)
    try:
        return decode_samples(None if blob is None else bytes(blob))
    except (zlib.error, ValueError) as exc:
        why = f"not samples written by pytest-ortperf ({type(exc).__name__}: {exc})"
        raise _damaged(label, where, column, why) from None


_TIME_RANGE = (-9_223_372_036.0, 9_223_372_036.0)
"""Epoch seconds that a pandas timestamp (nanoseconds in 64 bits) can hold."""


def _seconds(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and _TIME_RANGE[0] < value < _TIME_RANGE[1]
    )


_RUN_COLUMNS = [
    runs.c.id.label("run_id"),
    runs.c.started,
    runs.c.finished,
    runs.c.commit,
    runs.c.branch,
    runs.c.dirty,
    runs.c.command_line,
]
_ENV_COLUMNS = [
    environments.c.fingerprint,
    environments.c.ort_version,
    _json_text(environments.c.providers),
    environments.c.onnx_version,
    environments.c.numpy_version,
    environments.c.python_version,
    environments.c.os,
    environments.c.cpu_model,
    environments.c.cores,
    environments.c.memory,
]
_MEASUREMENT_COLUMNS = [
    measurements.c.id.label("measurement_id"),
    *(
        measurements.c[name]
        for name in [
            "test",
            "name",
            "kind",
            "api",
            "measured",
            "calls_per_block",
            *Summary.__dataclass_fields__,
            "ratio",
            "low",
            "high",
            "confidence",
            "ref_median",
        ]
    ),
    _json_text(measurements.c.session),
    _json_text(measurements.c.extra),
]


def _default(store: StorePath | None) -> StorePath:
    return DEFAULT_STORE if store is None else store


def _since_clause(since: datetime | str | int | float) -> sa.ColumnElement[bool]:
    if isinstance(since, bool):
        raise TypeError("since must be a datetime, an ISO date string or a run id")
    if isinstance(since, int) or (isinstance(since, str) and since.strip().isdigit()):
        return runs.c.id >= int(since)
    if isinstance(since, str):
        try:
            since = datetime.fromisoformat(since.strip())
        except ValueError:
            raise ValueError(f"since: not an ISO date/time or run id: {since!r}") from None
    if isinstance(since, datetime):
        return runs.c.started >= since.timestamp()
    return runs.c.started >= float(since)


def _interrupted_ids(conn: Connection, label: str) -> set[int]:
    """Ids of the runs marked interrupted (``runs.extra``); a damaged mark is a
    StoreError naming the run."""
    found: set[int] = set()
    query = sa.select(runs.c.id, _json_text(runs.c.extra)).where(runs.c.extra.is_not(None))
    for run_id, text in conn.execute(query):
        extra = _json_value(text, label, _where(run_id), "extra")
        if extra is None:
            continue
        if not isinstance(extra, dict):
            why = f"a JSON object expected, found {type(extra).__name__}"
            raise _damaged(label, _where(run_id), "extra", why)
        if extra.get(INTERRUPTED) is True:
            found.add(int(run_id))
    return found


def _frame(rows: Sequence[Any], columns: Sequence[str], label: str) -> pd.DataFrame:
    """Rows as a frame: JSON columns decoded, ``started``/``finished`` as UTC timestamps.
    A value that cannot be decoded is a StoreError naming the store, the row (its
    ``run_id``/``measurement_id`` columns) and the column."""
    import pandas as pd

    def where(index: int) -> str:
        row = rows[index]
        ids = {col: row[i] for i, col in enumerate(columns) if col.endswith("_id")}
        return _where(ids.get("run_id"), ids.get("measurement_id"))

    data = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
    decoded: dict[str, list[Any]] = {}
    for col, values in zip(columns, data, strict=True):
        if col in _JSON_COLUMNS:
            try:
                decoded[col] = _decode_json(values)
            except _BadValue as exc:
                raise _damaged(label, where(exc.index), col, exc.why) from None
        else:
            decoded[col] = list(values)
    frame = pd.DataFrame(decoded, columns=list(columns))
    for col in ("started", "finished"):
        if col in frame.columns:
            times = frame[col].to_numpy()
            low, high = _TIME_RANGE
            numbers = times.dtype.kind in "iuf"  # no text, no None, no bool
            if not (numbers and np.all((times > low) & (times < high))):
                for index, value in enumerate(decoded[col]):  # which row, and why
                    if not _seconds(value):
                        why = f"not a time in seconds since the epoch ({value!r})"
                        raise _damaged(label, where(index), col, why)
            frame[col] = pd.to_datetime(frame[col], unit="s", utc=True)
    if "command_line" in frame.columns:  # stores written before credentials were masked
        lines = frame["command_line"].tolist()
        masked = {v: redact_url(v) for v in set(lines) if isinstance(v, str)}
        frame["command_line"] = [masked[v] if isinstance(v, str) else v for v in lines]
    return frame


def read_results(
    store: StorePath | None = None,
    *,
    test: str | None = None,
    name: str | None = None,
    since: datetime | str | int | None = None,
    run: int | None = None,
    samples: bool = False,
    include_interrupted: bool = True,
) -> pd.DataFrame:
    """One row per stored measurement, with its run and environment columns, oldest first.

    ``store=None`` reads ``DEFAULT_STORE`` in the current directory. ``test`` matches any
    part of the node id; ``name`` matches exactly; ``since`` is a datetime, an ISO string or
    a run id (that run and later ones); ``run`` selects one run id. ``samples=True`` adds
    ``samples``/``ref_samples`` tuples. ``started``/``finished`` are UTC timestamps; the
    ``interrupted`` column is true for the measurements of runs stopped before all their
    tests ran, which ``include_interrupted=False`` leaves out. A stored value that cannot
    be decoded raises StoreError naming the row and the column.
    """
    columns: list[Any] = [*_RUN_COLUMNS, *_ENV_COLUMNS, *_MEASUREMENT_COLUMNS]
    if samples:
        columns += [measurements.c.samples, measurements.c.ref_samples]
    query = (
        sa.select(*columns)
        .select_from(
            measurements.join(runs, measurements.c.run_id == runs.c.id).outerjoin(
                environments, runs.c.environment_id == environments.c.id
            )
        )
        .order_by(runs.c.started, runs.c.id, measurements.c.id)
    )
    if test:
        query = query.where(measurements.c.test.contains(test, autoescape=True))
    if name is not None:
        query = query.where(measurements.c.name == name)
    if since is not None:
        query = query.where(_since_clause(since))
    if run is not None:
        query = query.where(runs.c.id == run)
    label = _label(_url(_default(store)))
    with _transaction(_default(store), write=False) as conn:
        interrupted = _interrupted_ids(conn, label)
        if interrupted and not include_interrupted:
            query = query.where(runs.c.id.not_in(sorted(interrupted)))
        result = conn.execute(query)
        keys = list(result.keys())
        rows = result.all()
    frame = _frame(rows, keys, label)
    frame.insert(
        keys.index("command_line") + 1,
        INTERRUPTED,
        [int(run_id) in interrupted for run_id in frame["run_id"]],
    )
    if samples:
        for col in ("samples", "ref_samples"):
            frame[col] = [
                _samples(blob, label, _where(run_id, mid), col)
                for blob, run_id, mid in zip(
                    frame[col], frame["run_id"], frame["measurement_id"], strict=True
                )
            ]
    return frame


def list_runs(store: StorePath | None = None) -> pd.DataFrame:
    """One row per run, oldest first: ids, times, git state, machine, measurement count
    and ``interrupted`` (true: stopped before all its tests ran, its results partial)."""
    count = (
        sa.select(measurements.c.run_id, sa.func.count().label("measurements"))
        .group_by(measurements.c.run_id)
        .subquery()
    )
    query = (
        sa.select(
            *_RUN_COLUMNS,
            environments.c.fingerprint,
            environments.c.ort_version,
            environments.c.cpu_model,
            environments.c.cores,
            sa.func.coalesce(count.c.measurements, 0).label("measurements"),
        )
        .select_from(
            runs.outerjoin(environments, runs.c.environment_id == environments.c.id).outerjoin(
                count, count.c.run_id == runs.c.id
            )
        )
        .order_by(runs.c.started, runs.c.id)
    )
    label = _label(_url(_default(store)))
    with _transaction(_default(store), write=False) as conn:
        interrupted = _interrupted_ids(conn, label)
        result = conn.execute(query)
        keys = list(result.keys())
        rows = result.all()
    frame = _frame(rows, keys, label)
    frame[INTERRUPTED] = [int(run_id) in interrupted for run_id in frame["run_id"]]
    return frame


def interrupted_runs(store: StorePath | None = None) -> set[int]:
    """Ids of the runs stopped before all their tests ran (their results are partial)."""
    label = _label(_url(_default(store)))
    with _transaction(_default(store), write=False) as conn:
        return _interrupted_ids(conn, label)


def resolve_run_id(
    store: StorePath | None, spec: str | int, *, include_interrupted: bool = False
) -> int:
    """A run id from ``spec``: an id, ``latest``, or ``latest~N`` (N runs before the latest).

    ``latest`` and ``latest~N`` count complete runs only, unless ``include_interrupted``;
    an id is taken as it is (:func:`interrupted_runs` says whether it was interrupted)."""
    text = str(spec).strip()
    label = _label(_url(_default(store)))
    with _transaction(_default(store), write=False) as conn:
        if text.isdigit():
            found = conn.execute(sa.select(runs.c.id).where(runs.c.id == int(text))).scalar()
            if found is None:
                raise StoreError(f"{label}: no run with id {text} (see `ortperf runs`)")
            return int(found)
        back = 0
        if text == "latest" or text.startswith("latest~"):
            rest = text[len("latest~") :] if "~" in text else "0"
            if not rest.isdigit():
                raise StoreError(f"bad run {text!r}: use an id, 'latest' or 'latest~N'")
            back = int(rest)
        else:
            raise StoreError(f"bad run {text!r}: use an id, 'latest' or 'latest~N'")
        skipped = set() if include_interrupted else _interrupted_ids(conn, label)
        query = sa.select(runs.c.id).order_by(runs.c.started.desc(), runs.c.id.desc())
        if skipped:
            query = query.where(runs.c.id.not_in(sorted(skipped)))
        found = conn.execute(query.offset(back).limit(1)).scalar()
        if found is None:
            counted = conn.execute(sa.select(sa.func.count()).select_from(runs)).scalar() or 0
            why = f"the store has fewer runs: {int(counted) - len(skipped)}"
            if skipped:
                why += f" complete, {len(skipped)} interrupted not counted"
            raise StoreError(f"{label}: no run {text!r} ({why})")
        return int(found)


def read_profiles(store: StorePath | None = None, *, run_id: int | None = None) -> pd.DataFrame:
    """Stored per-op profile summaries: run_id, test, name, op_type, total_us, count, share."""
    query = (
        sa.select(
            measurements.c.run_id,
            measurements.c.test,
            measurements.c.name,
            profile_ops.c.op_type,
            profile_ops.c.total_us,
            profile_ops.c.count,
            profile_ops.c.share,
        )
        .select_from(
            profile_ops.join(measurements, profile_ops.c.measurement_id == measurements.c.id)
        )
        .order_by(measurements.c.run_id, measurements.c.id, profile_ops.c.total_us.desc())
    )
    if run_id is not None:
        query = query.where(measurements.c.run_id == run_id)
    label = _label(_url(_default(store)))
    with _transaction(_default(store), write=False) as conn:
        result = conn.execute(query)
        keys = list(result.keys())
        rows = result.all()
    return _frame(rows, keys, label)


_STORED_KINDS = frozenset(RECORD_TYPES)


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)  # SQLite stores NaN as NULL


def _record_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``to_dict`` form of the record a ``measurements`` row holds (what ``from_dict``
    reads: summaries are derived from the samples and left out). ``row`` has its JSON
    columns and samples decoded."""
    extra = row["extra"] or {}
    head = {key: row[key] for key in _HEAD_COLUMNS}
    if row["kind"] == LatencyResult.kind:
        return {
            **extra,  # the preemption counts ({} in rows stored before them)
            **head,
            "samples": row["samples"],
            "calls_per_block": row["calls_per_block"],
            "session": row["session"],
        }
    if row["kind"] == Comparison.kind:
        return {
            **head,
            "reference": {**extra["reference"], "samples": row["ref_samples"]},
            "candidate": {**extra["candidate"], "samples": row["samples"]},
            "block_ratios": extra["block_ratios"],
            **{key: _number(row[key]) for key in ("ratio", "low", "high", "confidence")},
            "output_diffs": extra["output_diffs"],
        }
    return {**extra, **head}


def _record(row: sa.RowMapping, label: str) -> Record:
    """The record a ``measurements`` row holds; a damaged row is a StoreError naming it."""
    where = _where(row["run_id"], row["id"])
    decoded = {str(key): value for key, value in row.items()}
    for col in ("session", "extra"):
        decoded[col] = _json_value(row[col], label, where, col)
    for col in ("samples", "ref_samples"):
        decoded[col] = _samples(row[col], label, where, col)
    try:
        return record_from_dict(_record_dict(decoded))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        why = f"cannot rebuild its {row['kind']} record ({type(exc).__name__}: {exc})"
        raise _damaged(label, where, "extra", why) from None


def load_records(store: StorePath | None, run_id: int) -> list[Record]:
    """The records of one run (latency, compare and memory), rebuilt by their ``from_dict``.
    Rows of kinds this version does not know are skipped; a damaged row is a StoreError
    naming the store, the measurement and the column."""
    columns = [
        _json_text(column) if column.key in ("session", "extra") else column
        for column in measurements.c
    ]
    query = sa.select(*columns).where(measurements.c.run_id == run_id).order_by(measurements.c.id)
    label = _label(_url(_default(store)))
    with _transaction(_default(store), write=False) as conn:
        rows = conn.execute(query).mappings().all()
    return [_record(row, label) for row in rows if row["kind"] in _STORED_KINDS]


# --------------------------------------------------------------------------------------------
# History of measurements over runs (the reports' charts)


HistoryKey = tuple[str, str, str, str]
"""(test, name, kind, api) of a stored measurement."""


@dataclass(frozen=True)
class HistoryPoint:
    """One stored run of one measurement: the median (latency) or the ratio (compare)."""

    run_id: int
    started: str
    commit: str | None
    value: float
    low: float | None = None
    high: float | None = None


def _value(row: Mapping[str, Any]) -> float | None:
    value = row.get("ratio") if row.get("kind") == "compare" else row.get("median")
    if value is None or not math.isfinite(float(value)):
        return None
    return float(value)


def read_history(
    store: str,
    keys: Iterable[HistoryKey],
    *,
    last: int = 20,
    until: int | None = None,
    include_interrupted: bool = False,
) -> dict[HistoryKey, list[HistoryPoint]]:
    """The stored values of ``keys`` over the last ``last`` runs (up to run ``until``):
    ratios of comparisons, medians of latencies. Interrupted runs (their results partial)
    are left out and not counted, unless ``include_interrupted``. Raises StoreError."""
    wanted = set(keys)
    runs = list_runs(store)
    if until is not None:
        runs = runs[runs["run_id"] <= until]
    if not include_interrupted:
        runs = runs[~runs[INTERRUPTED].astype(bool)]
    ids = [int(i) for i in runs["run_id"].tail(max(last, 1))]
    if not ids or not wanted:
        return {}
    frame = read_results(store, since=min(ids), include_interrupted=include_interrupted)
    out: dict[HistoryKey, list[HistoryPoint]] = {}
    for record in frame.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        key = (str(row["test"]), str(row["name"]), str(row["kind"]), str(row["api"]))
        value = _value(row)
        if key not in wanted or int(row["run_id"]) not in ids or value is None:
            continue
        points = out.setdefault(key, [])
        if points and points[-1].run_id == int(row["run_id"]):
            points.pop()  # one value per run: the last one stored
        low, high = row.get("low"), row.get("high")
        points.append(
            HistoryPoint(
                run_id=int(row["run_id"]),
                started=row["started"].isoformat(),
                commit=row.get("commit") if isinstance(row.get("commit"), str) else None,
                value=value,
                low=None if low is None or math.isnan(low) else float(low),
                high=None if high is None or math.isnan(high) else float(high),
            )
        )
    return out


RunMatch = Mapping[str, Any] | Callable[[Mapping[str, Any]], bool]
"""Which earlier runs count for :func:`run_medians`: keys and the values they must have,
or a predicate, over the mapping :func:`_run_view` builds."""

_ENV_MATCH_COLUMNS = {
    "fingerprint": environments.c.fingerprint,
    "ort_version": environments.c.ort_version,
    "onnx_version": environments.c.onnx_version,
    "numpy_version": environments.c.numpy_version,
    "python_version": environments.c.python_version,
    "os": environments.c.os,
    "cpu_model": environments.c.cpu_model,
}
"""Keys of a :data:`RunMatch` mapping that :func:`run_medians` filters on in SQL (text
columns of ``environments``); the others are compared in Python."""


def _run_view(row: Mapping[str, Any], session: Any, env_extra: Any) -> dict[str, Any]:
    """What a :data:`RunMatch` sees of one stored latency: the environment of its run
    (``fingerprint``: the machine hash of ``env.machine_fingerprint``, ``ort_version``,
    ``cpu_model``, ``logical_cores``, ``memory_bytes``, ``os``, ``python_version``...,
    ``available_providers``: what ORT offered, and the other keys of
    ``env.collect_environment()``: ``system``, ``machine``...) and its session
    (``providers``: those the session used, ``threads``, ``spinning``, ``optimization``,
    ``model``), with ``run_id``, ``started``, ``commit`` and ``branch``; lists as tuples."""
    view: dict[str, Any] = dict(env_extra) if isinstance(env_extra, dict) else {}
    view.update(
        {key: row[key] for key in ("run_id", "started", "commit", "branch", *_ENV_MATCH_COLUMNS)}
    )
    view.update(
        logical_cores=row["cores"],
        memory_bytes=row["memory"],
        available_providers=row["providers"],
        providers=None,
    )
    if isinstance(session, dict):
        view.update(
            {key: session.get(key) for key in ("providers", "threads", "spinning", "optimization")}
        )
        view["model"] = session.get("model")
    return {key: _frozen(value) for key, value in view.items()}


def _frozen(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _matches(view: Mapping[str, Any], match: RunMatch) -> bool:
    if callable(match):
        return bool(match(view))
    for key, wanted in match.items():
        have = view.get(key)
        if have is None or wanted is None or have != _frozen(wanted):
            return False
    return True


def run_medians(
    store: StorePath,
    test: str,
    name: str,
    *,
    api: str,
    fingerprint: RunMatch,
    last: int = 20,
    before: int | None = None,
    figure: str | None = None,
) -> list[float]:
    """The per-run medians (seconds per call) of the stored latency ``test``/``name``
    measured through ``api``, one per earlier run whose environment and session match
    ``fingerprint``, oldest first, at most the ``last`` newest matching runs. With
    ``figure`` (``create``, ``first_run``, ``new_shape``): the medians of that figure of the
    stored cold start ``test``/``name`` instead (seconds per launch).

    ``fingerprint`` is a predicate over the mapping :func:`_run_view` describes, or a
    mapping of keys to the values they must have there (a key missing or None on either
    side does not match; lists compare as tuples), e.g. ``{"fingerprint": hash,
    "ort_version": "1.32.0", "providers": ["CPUExecutionProvider"], "threads": 1,
    "spinning": False, "optimization": "all"}``. Only measured latency records count (not
    smoke runs, not the arms of comparisons); interrupted runs are left out; ``before``
    keeps runs with smaller ids only. A run that stored the measurement twice counts once,
    with its last matching value. Raises StoreError.
    """
    if last < 1:
        return []
    columns = [
        runs.c.id.label("run_id"),
        runs.c.started,
        runs.c.commit,
        runs.c.branch,
        measurements.c.id.label("measurement_id"),
        measurements.c.median,
        _json_text(measurements.c.session),
        *(column.label(key) for key, column in _ENV_MATCH_COLUMNS.items()),
        environments.c.cores,
        environments.c.memory,
        _json_text(environments.c.providers),
        _json_text(environments.c.extra).label("env_extra"),
        _json_text(measurements.c.extra),
    ]
    query = (
        sa.select(*columns)
        .select_from(
            measurements.join(runs, measurements.c.run_id == runs.c.id).outerjoin(
                environments, runs.c.environment_id == environments.c.id
            )
        )
        .where(
            measurements.c.test == test,
            measurements.c.name == name,
            measurements.c.kind == (LatencyResult.kind if figure is None else ColdStartResult.kind),
            measurements.c.api == api,
            measurements.c.measured.is_(True),
            measurements.c.median.is_not(None) if figure is None else sa.true(),
        )
        .order_by(runs.c.started.desc(), runs.c.id.desc(), measurements.c.id.desc())
    )
    if before is not None:
        query = query.where(runs.c.id < before)
    if not callable(fingerprint):
        for key, column in _ENV_MATCH_COLUMNS.items():
            wanted = fingerprint.get(key)
            if isinstance(wanted, str):
                query = query.where(column == wanted)
    label = _label(_url(store))
    with _transaction(store, write=False) as conn:
        interrupted = _interrupted_ids(conn, label)
        if interrupted:
            query = query.where(runs.c.id.not_in(sorted(interrupted)))
        rows = conn.execute(query).mappings().all()
    found: list[float] = []
    seen: set[int] = set()
    for row in rows:  # newest run first, its last measurement first
        run_id = int(row["run_id"])
        if run_id in seen:
            continue
        where = _where(run_id, row["measurement_id"])
        session = _json_value(row["session"], label, where, "session")
        median = row["median"]
        if figure is not None:  # a cold start keeps its session and figures in extra
            extra = _json_value(row["extra"], label, where, "extra")
            extra = extra if isinstance(extra, dict) else {}
            session = extra.get("session")
            median = ((extra.get("summaries") or {}).get(figure) or {}).get("median")
            if not _seconds(median):
                continue
        env_extra = _json_value(row["env_extra"], label, _where(run_id), "environment extra")
        providers = _json_value(row["providers"], label, _where(run_id), "providers")
        view = _run_view({**row, "providers": providers}, session, env_extra)
        median = float(median)
        if not (math.isfinite(median) and median > 0) or not _matches(view, fingerprint):
            continue
        seen.add(run_id)
        found.append(median)
        if len(found) == last:
            break
    return found[::-1]


def history_keys(records: Sequence[Record]) -> list[HistoryKey]:
    """The history keys of records."""
    return [(r.test, r.name, r.kind, r.api) for r in records]


# --------------------------------------------------------------------------------------------
# History baselines


def branch_records(
    store: StorePath,
    test: str,
    name: str,
    *,
    kind: str,
    branch: str,
    machine: str,
    last: int,
) -> list[tuple[dict[str, Any], Record]]:
    """The measured ``kind`` records ``test``/``name`` of the newest ``last`` complete runs
    on git ``branch`` whose machine class (``environments.fingerprint``) is ``machine``,
    oldest first, each with the view of its run that :func:`_run_view` describes (its
    environment, the record's session, ``run_id``, ``started``, ``commit``, ``branch``).
    Interrupted runs are left out and not counted; runs without the measurement are not
    counted; a run that stored it twice counts once, with its last value. Raises
    StoreError (a damaged row: naming it)."""
    if last < 1:
        return []
    label = _label(_url(store))
    held = (
        measurements.join(runs, measurements.c.run_id == runs.c.id).join(
            environments, runs.c.environment_id == environments.c.id
        )
    )  # fmt: skip
    wanted = (
        measurements.c.test == test,
        measurements.c.name == name,
        measurements.c.kind == kind,
        measurements.c.measured.is_(True),
        runs.c.branch == branch,
        environments.c.fingerprint == machine,
    )
    newest = (
        sa.select(runs.c.id, runs.c.started)
        .distinct()
        .select_from(held)
        .where(*wanted)
        .order_by(runs.c.started.desc(), runs.c.id.desc())
    )
    columns = [
        *(_json_text(c) if c.key in ("session", "extra") else c for c in measurements.c),
        runs.c.started,
        runs.c.commit,
        runs.c.branch,
        *(column.label(key) for key, column in _ENV_MATCH_COLUMNS.items()),
        environments.c.cores,
        environments.c.memory,
        _json_text(environments.c.providers).label("env_providers"),
        _json_text(environments.c.extra).label("env_extra"),
    ]
    with _transaction(store, write=False) as conn:
        interrupted = _interrupted_ids(conn, label)
        if interrupted:
            newest = newest.where(runs.c.id.not_in(sorted(interrupted)))
        ids = [int(row[0]) for row in conn.execute(newest.limit(last))]
        if not ids:
            return []
        query = (
            sa.select(*columns)
            .select_from(held)
            .where(*wanted, runs.c.id.in_(ids))
            .order_by(runs.c.started, runs.c.id, measurements.c.id)
        )
        rows = conn.execute(query).mappings().all()
    last_of_run = {int(row["run_id"]): row for row in rows}  # a run's last row wins
    found: list[tuple[dict[str, Any], Record]] = []
    for run_id, row in last_of_run.items():
        where = _where(run_id)
        record = _record(row, label)
        session = _json_value(row["session"], label, _where(run_id, row["id"]), "session")
        env_extra = _json_value(row["env_extra"], label, where, "environment extra")
        providers = _json_value(row["env_providers"], label, where, "providers")
        view = _run_view({**row, "run_id": run_id, "providers": providers}, session, env_extra)
        found.append((view, record))
    return found
