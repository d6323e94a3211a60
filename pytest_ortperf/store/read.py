"""Reading the store: measurements and runs as frames, run ids, profiles and records.

``store=None`` reads :data:`~pytest_ortperf.store.location.DEFAULT_STORE` in the current
directory. A reader takes an older store as it is (only a writer migrates it).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pytest_ortperf.results import RECORD_TYPES, Record
from pytest_ortperf.stats import Summary
from pytest_ortperf.store.connection import _label, _transaction, _url
from pytest_ortperf.store.decode import (
    _damaged,
    _frame,
    _json_text,
    _json_value,
    _record,
    _samples,
    _where,
)
from pytest_ortperf.store.errors import StoreError, StorePath
from pytest_ortperf.store.location import DEFAULT_STORE
from pytest_ortperf.store.schema import INTERRUPTED, environments, measurements, profile_ops, runs

if TYPE_CHECKING:
    import pandas as pd

_MEASUREMENTS_FROM = measurements.join(runs, measurements.c.run_id == runs.c.id).outerjoin(
    environments, runs.c.environment_id == environments.c.id
)
"""Each measurement with its run and the run's environment (none for runs without one)."""

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
        .select_from(_MEASUREMENTS_FROM)
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
