"""History: stored values over runs (the reports' charts), the earlier runs a history gate
compares with (:func:`run_medians`) and the runs of a branch for history baselines
(:func:`branch_records`).

An earlier run counts only where its machine and session match: a :data:`RunMatch` sees
the view of each stored measurement that :func:`_run_view` describes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from pytest_ortperf.results import ColdStartResult, LatencyResult, Record, figure_of
from pytest_ortperf.store.connection import _label, _transaction, _url
from pytest_ortperf.store.decode import _json_text, _json_value, _record, _seconds, _where
from pytest_ortperf.store.errors import StorePath
from pytest_ortperf.store.read import (
    _MEASUREMENTS_FROM,
    _interrupted_ids,
    list_runs,
    read_results,
)
from pytest_ortperf.store.schema import INTERRUPTED, environments, measurements, runs

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
        value = figure_of(row)
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
    (``fingerprint``: the machine hash of ``machine.machine_fingerprint``, ``ort_version``,
    ``cpu_model``, ``logical_cores``, ``memory_bytes``, ``os``, ``python_version``...,
    ``available_providers``: what ORT offered, and the other keys of
    ``machine.collect_environment()``: ``system``, ``machine``...) and its session
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


_VIEW_COLUMNS = [
    runs.c.started,
    runs.c.commit,
    runs.c.branch,
    *(column.label(key) for key, column in _ENV_MATCH_COLUMNS.items()),
    environments.c.cores,
    environments.c.memory,
    _json_text(environments.c.providers).label("env_providers"),
    _json_text(environments.c.extra).label("env_extra"),
]
"""What :func:`_stored_view` reads of a measurement's run and environment, selected from
:data:`~pytest_ortperf.store.read._MEASUREMENTS_FROM` with the measurement's ``run_id``."""


def _stored_view(row: sa.RowMapping, session: Any, label: str) -> dict[str, Any]:
    """The :func:`_run_view` of a row selected with :data:`_VIEW_COLUMNS`, given the
    measurement's session (decoded); a damaged JSON value of the environment is a
    StoreError naming the run."""
    run_id = int(row["run_id"])
    env_extra = _json_value(row["env_extra"], label, _where(run_id), "environment extra")
    providers = _json_value(row["env_providers"], label, _where(run_id), "providers")
    return _run_view({**row, "run_id": run_id, "providers": providers}, session, env_extra)


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
        measurements.c.run_id,
        measurements.c.id,
        measurements.c.median,
        _json_text(measurements.c.session),
        _json_text(measurements.c.extra),
        *_VIEW_COLUMNS,
    ]
    query = (
        sa.select(*columns)
        .select_from(_MEASUREMENTS_FROM)
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
        where = _where(run_id, row["id"])
        session = _json_value(row["session"], label, where, "session")
        median = row["median"]
        if figure is not None:  # a cold start keeps its session and figures in extra
            extra = _json_value(row["extra"], label, where, "extra")
            extra = extra if isinstance(extra, dict) else {}
            session = extra.get("session")
            median = ((extra.get("summaries") or {}).get(figure) or {}).get("median")
            if not _seconds(median):
                continue
        view = _stored_view(row, session, label)
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
        .select_from(_MEASUREMENTS_FROM)
        .where(*wanted)
        .order_by(runs.c.started.desc(), runs.c.id.desc())
    )
    columns = [
        *(_json_text(c) if c.key in ("session", "extra") else c for c in measurements.c),
        *_VIEW_COLUMNS,
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
            .select_from(_MEASUREMENTS_FROM)
            .where(*wanted, runs.c.id.in_(ids))
            .order_by(runs.c.started, runs.c.id, measurements.c.id)
        )
        rows = conn.execute(query).mappings().all()
    last_of_run = {int(row["run_id"]): row for row in rows}  # a run's last row wins
    found: list[tuple[dict[str, Any], Record]] = []
    for run_id, row in last_of_run.items():
        record = _record(row, label)
        session = _json_value(row["session"], label, _where(run_id, row["id"]), "session")
        found.append((_stored_view(row, session, label), record))
    return found
