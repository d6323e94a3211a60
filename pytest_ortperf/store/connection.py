"""Opening a store: paths and URLs, SQLAlchemy's engine, one transaction.

SQLAlchemy Core only, so the default SQLite file and a PostgreSQL URL share the code. One
transaction per run; SQLite runs in WAL mode with a busy timeout and ``BEGIN IMMEDIATE`` so
that concurrent writers (parallel CI jobs, several pytest processes) queue instead of failing.
A file that is not a store is refused before any connection could change it. A server that
cannot be reached is a :class:`~pytest_ortperf.store.errors.StoreUnreachable` (after a
connect timeout, not tried again for :data:`BREAKER_S`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from pytest_ortperf.store.errors import StoreError, StorePath, StoreUnreachable, UnstorableRun
from pytest_ortperf.store.schema import _check_schema, runs, schema_version
from pytest_ortperf.store.secrets import _USER, redact_url

BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10
"""How long a database server may take to accept a connection before the store counts as
unreachable (the run is spooled: :mod:`pytest_ortperf.store.spool`)."""


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


def _into_wal(cursor: Any) -> None:
    """Switch an SQLite database into WAL mode, waiting for the lock in turn.

    SQLite does not call the busy handler here: where writers open a new store at once,
    all but one get "database is locked" at once, so this retries up to the busy
    timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.002
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _sql_engine(url: sa.URL, *, write: bool) -> sa.Engine:
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
                _into_wal(cursor)
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
        engine = _sql_engine(url, write=write)
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
    engine: sa.Engine, label: str, first: Callable[[Connection], object] | None
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
