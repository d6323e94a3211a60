"""A throwaway PostgreSQL server for the tests, and the handle the tests use to reach one.

``bash .ci/run`` starts one server for the whole suite and exports its URL::

    eval "$(python tests/pg_server.py start DIR)"   # exports ORTPERF_TEST_POSTGRES
    python tests/pg_server.py stop DIR

Tests get it through the ``postgres`` fixture (tests/conftest.py): without
``$ORTPERF_TEST_POSTGRES`` they skip, saying so, and with ``$CI`` set they fail instead.
Tests that must stop a server mid-run start a private one with :func:`start`.

The server is the distribution's (Debian's ``postgresql`` package: ``initdb``/``pg_ctl``
on PATH or under /usr/lib/postgresql/*/bin), its data in a temp dir, password auth
(scram-sha-256) on 127.0.0.1 only, no unix socket. Durability is off by default (``fsync``,
``synchronous_commit`` and ``full_page_writes`` off: fast, and enough for tests of what is
stored); tests of what survives a crash start a durable one (``start(top, durable=True)``,
PostgreSQL's default settings), since a server without them loses commits it acknowledged.
initdb and postgres refuse root: as root they run as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

URL_ENV = "ORTPERF_TEST_POSTGRES"
"""The URL of a running server the tests may create databases on (any database name)."""

USER = "ortperf"
PASSWORD = "s3cr3t-Pw@42"
"""The password of servers started here; its ``@`` is percent-encoded in URLs."""


class ServerError(RuntimeError):
    """The server could not be started or stopped (the message has its log's tail)."""


def _version(name: str) -> int:
    return int(name) if name.isdigit() else 0


def bindir() -> Path | None:
    """The directory of initdb and pg_ctl: on PATH, else Debian's newest version."""
    found = shutil.which("pg_ctl")
    candidates = [Path(found).parent] if found else []
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(versions, key=lambda p: _version(p.parent.name), reverse=True)
    for path in candidates:
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            return path
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Postgres:
    """A server to reach: a user with a password on host:port."""

    port: int
    host: str = "127.0.0.1"
    user: str = USER
    password: str = PASSWORD

    @classmethod
    def from_url(cls, url: str) -> Postgres:
        parts = urlsplit(url)
        if not parts.scheme.startswith("postgresql") or parts.port is None:
            raise ValueError(f"${URL_ENV}: not a postgresql://user:password@host:port/ URL")
        return cls(
            port=parts.port,
            host=parts.hostname or "127.0.0.1",
            user=unquote(parts.username or USER),
            password=unquote(parts.password or ""),
        )

    def connect(self, dbname: str = "postgres") -> Any:
        import psycopg

        return psycopg.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname=dbname
        )

    def new_database(self) -> str:
        """A new empty database on the server, named uniquely."""
        name = f"perf_{uuid.uuid4().hex[:12]}"
        with self.connect() as conn:
            conn.autocommit = True
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def url(
        self,
        dbname: str,
        *,
        password: str | None = None,
        query: bool = False,
        masked: bool = False,
    ) -> str:
        """A SQLAlchemy URL with the password in the user info, or with ``query`` in
        ``?password=`` (percent-encoded either way); ``masked``: as it may be shown."""
        base = f"postgresql+psycopg://{quote(self.user, safe='')}"
        secret = "***" if masked else quote(self.password if password is None else password, "")
        if query:
            return f"{base}@{self.host}:{self.port}/{dbname}?password={secret}"
        return f"{base}:{secret}@{self.host}:{self.port}/{dbname}"

    def rows(self, dbname: str) -> list[str]:
        """Every row of every table of ``dbname``, as text (all its columns)."""
        from psycopg import sql

        with self.connect(dbname) as conn:
            tables = [
                name
                for (name,) in conn.execute(
                    "SELECT table_name FROM information_schema.tables"
                    " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
                )
            ]
            query = "SELECT t::text FROM {} AS t"
            return [
                row
                for table in tables
                for (row,) in conn.execute(sql.SQL(query).format(sql.Identifier(table)))
            ]

    def count(self, dbname: str, table: str) -> int:
        from psycopg import sql

        with self.connect(dbname) as conn:
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
            (n,) = conn.execute(query).fetchone() or (0,)
            return int(n)


@dataclass(frozen=True)
class Server(Postgres):
    """A server started here, with its data under ``top``: it can be stopped and started
    again (same data, same port)."""

    top: Path = field(default_factory=Path)
    bindir: Path = field(default_factory=Path)
    as_user: tuple[str, ...] = ()
    durable: bool = False
    """PostgreSQL's durable defaults (fsync, synchronous commit, full page writes) rather
    than the fast settings of a throwaway server."""

    @property
    def data(self) -> Path:
        return self.top / "data"

    def _run(self, *args: str | Path) -> None:
        proc = subprocess.run(
            [*self.as_user, *map(str, args)],
            cwd=self.top,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            log = self.top / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise ServerError(f"{Path(args[0]).name} failed: {proc.stdout}{proc.stderr}{tail}")

    def start(self) -> None:
        fast = (
            ""
            if self.durable
            else (" -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        )
        options = (
            f"-c listen_addresses={self.host} -p {self.port} -k ''{fast} -c max_connections=100"
        )
        log = self.top / "server.log"
        self._run(self.bindir / "pg_ctl", "-D", self.data, "-l", log, "-o", options, "-w",
                  "-t", "30", "start")  # fmt: skip

    def crash(self) -> None:
        """SIGKILL every process of the server at once (a crash, as a power cut leaves
        the processes): what it acknowledged must survive ``start``. The postmaster leads
        a session of its own: every process of that session is killed, again until none
        is left (a backend forked meanwhile), and reaped."""
        pidfile = self.data / "postmaster.pid"
        try:
            postmaster = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            members = _session(postmaster)
            for pid in members:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if not members:
                return
            time.sleep(0.05)
        raise ServerError(f"server processes {_session(postmaster)} outlived SIGKILL")

    def stop(self) -> None:
        """``pg_ctl stop -m fast``; the postmaster is killed if that fails."""
        pidfile = self.data / "postmaster.pid"
        if not pidfile.is_file():
            return
        stop = [*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast",
                "-w", "stop"]  # fmt: skip
        try:
            subprocess.run(stop, cwd=self.top, capture_output=True, timeout=30, check=True)
        except (subprocess.SubprocessError, OSError):
            try:
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGQUIT)
                time.sleep(0.5)
            except (OSError, ValueError, IndexError):
                pass


def _session(leader: int) -> list[int]:
    """The processes (zombies too, until reaped) of the session that ``leader`` leads."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(leader):
            found.append(int(stat.parent.name))
    return found


def start(top: Path, *, durable: bool = False) -> Server:
    """initdb a cluster in ``top/data`` and start it on a free port (``durable``: with
    PostgreSQL's durable settings, see :class:`Server`). Raises ServerError (binaries
    missing, root without a ``postgres`` user, a failing initdb or start)."""
    found = bindir()
    if found is None:
        raise ServerError(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
        )
    as_user: tuple[str, ...] = ()
    owner = None
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            owner = None
        if runuser is None or owner is None:
            raise ServerError("running as root without runuser or a 'postgres' user")
        as_user = (runuser, "-u", "postgres", "--")
    top.mkdir(parents=True, exist_ok=True)
    server = Server(port=free_port(), top=top, bindir=found, as_user=as_user, durable=durable)
    if owner is not None:
        os.chown(top, owner.pw_uid, owner.pw_gid)
    pwfile = top / "pwfile"
    pwfile.write_text(PASSWORD + "\n")
    pwfile.chmod(0o600)
    if owner is not None:
        os.chown(pwfile, owner.pw_uid, owner.pw_gid)
    try:
        server._run(found / "initdb", "-D", server.data, "-U", USER, "--auth=scram-sha-256",
                    f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C", "-N")  # fmt: skip
    finally:
        pwfile.unlink(missing_ok=True)
    server.start()
    return server


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python tests/pg_server.py start|stop DIR", file=sys.stderr)
        return 2
    top = Path(argv[1]).absolute()
    if argv[0] == "start":
        try:
            server = start(top)
        except ServerError as exc:
            print(f"pg_server: {exc}", file=sys.stderr)
            return 1
        (top / "port").write_text(str(server.port))
        print(f"export {URL_ENV}={shlex.quote(server.url('postgres'))}")
        return 0
    port = top / "port"
    found = bindir()
    if port.is_file() and found is not None:
        as_user: tuple[str, ...] = ()
        if os.geteuid() == 0 and shutil.which("runuser"):
            as_user = (str(shutil.which("runuser")), "-u", "postgres", "--")
        Server(port=int(port.read_text()), top=top, bindir=found, as_user=as_user).stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
