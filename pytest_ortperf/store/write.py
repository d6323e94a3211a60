"""Writing runs: records to rows, one transaction per run, and pruning old runs.

Both backends store the same runs alike (:func:`_fit`): a NUL character reads as U+FFFD
and a text is cut to its column's length (``runs.branch``: 255 characters), where
PostgreSQL would refuse the run and SQLite keep it. A run the store cannot take all the
same is an :class:`~pytest_ortperf.store.errors.UnstorableRun`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from pytest_ortperf.results import Comparison, LatencyResult, Record
from pytest_ortperf.results.codec import session_dict, slo_dict
from pytest_ortperf.stats import Summary
from pytest_ortperf.store.connection import _label, _transaction, _url, store_label
from pytest_ortperf.store.errors import StoreError, StorePath, UnstorableRun
from pytest_ortperf.store.schema import (
    _HEAD_COLUMNS,
    INTERRUPTED,
    encode_samples,
    environments,
    measurements,
    profile_ops,
    runs,
)
from pytest_ortperf.store.secrets import redact_url

_ARM_COLUMNS = ("kind", "samples", "summary")
"""Keys of a latency result's ``to_dict`` that a comparison's arm does not keep in
``extra``: the kind is implied, the samples have their own columns and the summary is
derived from them."""


def _arm(result: LatencyResult) -> dict[str, Any]:
    """What a comparison's arm is besides its samples (its ``to_dict`` form without them)."""
    return {k: v for k, v in result.to_dict().items() if k not in _ARM_COLUMNS}


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
            session=session_dict(record.session),
            samples=encode_samples(record.samples),
            extra={
                "preempted": record.preempted,
                "preempted_kept": record.preempted_kept,
                **slo_dict(record.slo),
            },
        )
    elif isinstance(record, Comparison):
        cand, ref = record.candidate, record.reference
        row.update(cand.summary.to_dict())
        row.update(
            calls_per_block=cand.calls_per_block,
            session=session_dict(cand.session),
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

    ``started``/``finished`` are epoch seconds; ``git`` is ``machine.git_info()``; ``environment``
    is ``machine.collect_environment()``; ``profiles`` maps (test id, name) to a per-op summary.
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
