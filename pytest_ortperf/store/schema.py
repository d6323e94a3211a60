"""The store's tables, its schema version and migrations, and how samples are stored.

Schema versions start at 1; ``MIGRATIONS[n]`` upgrades a store from version n to n + 1, on
SQLite and PostgreSQL alike (``tests/data/store_schema_v1.*.sql`` keep version 1 as it was
written, and the tests migrate stores made from them). Version 2 added ``runs.uid`` (a run
id made when the run starts: a run written twice, by a retry or ``ortperf sync`` of a
spooled run, is stored once), an index of machine classes and the view
:data:`MEASUREMENTS_VIEW` for dashboards.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pytest_ortperf.store.errors import StoreError

SCHEMA_VERSION = 2

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
Ctrl-C) and column of :func:`~pytest_ortperf.store.read.list_runs` and
:func:`~pytest_ortperf.store.read.read_results`."""

MEASUREMENTS_VIEW = "ortperf_measurements"
"""A view for dashboards (Grafana, Metabase, plain SQL): one row per stored measurement with
its run, commit, branch and machine class. Columns: ``measurement_id``, ``run_id``,
``run_uid``, ``started`` (epoch seconds), ``commit``, ``branch``, ``machine_class`` (the
hardware hash of ``machine.machine_fingerprint``), ``cpu_model``, ``cores``, ``ort_version``,
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


def _check_schema(conn: Connection, label: str, *, create: bool) -> None:
    """Create a new store, or check the version of an existing one and migrate it (when
    writing: a reader of an older store reads it as it is, every query of the store
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
