"""Artifacts kept in the results store, for a fleet that shares one (PostgreSQL), or a
single SQLite file: a table ``ortperf_artifacts`` of model bytes by their sha256.

The same contract as the directory store (:class:`~pytest_ortperf.store.artifacts.ArtifactStore`):
an artifact is kept once (a put of bytes already there changes nothing; concurrent puts of
the same bytes leave one row: ``INSERT ... ON CONFLICT DO NOTHING``), every read verifies
the bytes against their hash and refuses a damaged row with an
:class:`~pytest_ortperf.store.artifacts.ArtifactCorrupt` naming the store (never its
password) and the hash, and a put of a damaged artifact writes it again. Artifacts are at
most :data:`MAX_SQL_ARTIFACT_BYTES` here (a database moves a value whole); a larger model
belongs in the directory store. The table is created, when missing, in the transaction
that prepares the store's schema (on PostgreSQL under the schema lock), so two first
writers do not race.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from pytest_ortperf.store.artifacts import (
    ArtifactCorrupt,
    ArtifactError,
    ArtifactMissing,
    Usage,
    check_sha256,
    verified,
)
from pytest_ortperf.store.connection import (
    _explain,
    _sql_engine,
    _sqlite_file,
    _transaction,
    _url,
    store_label,
)
from pytest_ortperf.store.errors import StoreError, StorePath
from pytest_ortperf.units import format_bytes

MAX_SQL_ARTIFACT_BYTES = 256 << 20
"""The largest artifact kept in a results store: 256 MiB (SQLite's limit on a value is
1 GB, PostgreSQL's 1 GB; a value is sent and read whole)."""

artifact_metadata = sa.MetaData()
artifacts = sa.Table(
    "ortperf_artifacts",
    artifact_metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)


def _create(conn: Connection) -> None:
    artifact_metadata.create_all(conn, checkfirst=True)


def _insert_new(conn: Connection, sha256: str, data: bytes) -> None:
    values = {"sha256": sha256, "size": len(data), "data": data}
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects import sqlite

        conn.execute(sqlite.insert(artifacts).values(**values).on_conflict_do_nothing())
    elif conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        conn.execute(postgresql.insert(artifacts).values(**values).on_conflict_do_nothing())
    else:  # other servers: a second writer of the same bytes fails on the key
        conn.execute(artifacts.insert().values(**values))


class SqlArtifactStore:
    """Artifacts in the results store ``store`` (an SQLite path or an SQLAlchemy URL)."""

    def __init__(self, store: StorePath) -> None:
        self.store = store
        self.label = store_label(store)

    def __repr__(self) -> str:
        return f"SqlArtifactStore({self.label!r})"

    def put(self, data: bytes | bytearray | memoryview, *, sha256: str | None = None) -> str:
        """Keep ``data``; its sha256 (see the module). With ``sha256``, ``data`` must hash
        to it (else :class:`ArtifactCorrupt`, nothing written). Raises
        :class:`~pytest_ortperf.store.errors.StoreError` when the store cannot be written."""
        blob = bytes(data)
        if len(blob) > MAX_SQL_ARTIFACT_BYTES:
            raise ArtifactError(
                f"artifact: {format_bytes(len(blob))} is more than the results store "
                f"{self.label} keeps ({format_bytes(MAX_SQL_ARTIFACT_BYTES)}); keep large "
                "models in the directory store ($ORTPERF_ARTIFACTS)"
            )
        digest = hashlib.sha256(blob).hexdigest()
        if sha256 is not None and check_sha256(sha256) != digest:
            raise ArtifactCorrupt(
                f"artifact {sha256}: refused, the bytes given hash to {digest} ({len(blob):,} "
                "bytes)"
            )
        with _transaction(self.store, write=True, first=_create) as conn:
            row = conn.execute(
                sa.select(artifacts.c.data).where(artifacts.c.sha256 == digest)
            ).first()
            if row is None:
                _insert_new(conn, digest, blob)
            elif hashlib.sha256(row.data).hexdigest() != digest:
                conn.execute(
                    artifacts.update()
                    .where(artifacts.c.sha256 == digest)
                    .values(size=len(blob), data=blob)
                )
        return digest

    def has(self, sha256: str) -> bool:
        """Whether the store holds a row for ``sha256`` (not verified: :meth:`get` does);
        False for a store with no artifacts table or no store at all."""
        check_sha256(sha256)
        with self._reading() as conn:
            if conn is None:
                return False
            found = conn.execute(
                sa.select(artifacts.c.sha256).where(artifacts.c.sha256 == sha256)
            ).first()
        return found is not None

    def get(self, sha256: str, *, size: int | None = None) -> bytes:
        """The bytes of the artifact ``sha256``, verified; :class:`ArtifactMissing` or
        :class:`ArtifactCorrupt` naming the store and the hash (the row is left as it is)."""
        check_sha256(sha256)
        if self._no_file():
            raise ArtifactMissing(f"artifact {sha256}: no results store at {self.label}")
        with self._reading() as conn:
            row = None
            if conn is not None:
                row = conn.execute(
                    sa.select(artifacts.c.data).where(artifacts.c.sha256 == sha256)
                ).first()
        if row is None:
            raise ArtifactMissing(f"artifact {sha256}: not in the results store {self.label}")
        return verified(
            bytes(row.data), sha256, size,
            where=f"artifact {sha256} in the results store {self.label}", damaged="damaged",
            fix="Keep the artifact again (pytest --ortperf-update)",
        )  # fmt: skip

    def du(self) -> Usage:
        """How many artifacts the store holds and their bytes."""
        with self._reading() as conn:
            if conn is None:
                return Usage(0, 0)
            count, total = conn.execute(
                sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(artifacts.c.size), 0))
            ).one()
        return Usage(int(count), int(total))

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Connection | None]:
        """A connection to read artifacts with; None where the store holds none (no file,
        an empty database, no artifacts table). Reads need no results schema, so none is
        checked or made; a store that cannot be read is a StoreError naming it."""
        if self._no_file():
            yield None
            return
        url = _url(self.store)
        path = _sqlite_file(url)
        engine = _sql_engine(url, write=False)
        try:
            with engine.connect() as conn:
                yield conn if sa.inspect(conn).has_table(artifacts.name) else None
        except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
            raise StoreError(f"{self.label}: {_explain(exc, path)}", store=self.store) from exc
        finally:
            engine.dispose()

    def _no_file(self) -> bool:
        """Whether the store is an SQLite file that does not exist (yet)."""
        path = _sqlite_file(_url(self.store))
        return path is not None and not path.exists()
