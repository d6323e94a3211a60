"""Change points in the stored history of each measurement, per machine class.

:func:`history_changes` reads the store (:func:`pytest_ortperf.store.read.read_results`), takes
one value per run for each measurement on each machine class (the ``fingerprint`` column:
the hardware hash) and git branch, oldest first, and finds the steps in it with the pure
:func:`pytest_ortperf.gating.changes.find_changes`. ``ortperf changes`` and the HTML
report's "Change points" section show what it returns.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_ortperf.gating.changes import MIN_CHANGE, Change, find_changes
from pytest_ortperf.gating.settings import CHANGE_POINT_RUNS
from pytest_ortperf.results import figure_of
from pytest_ortperf.text import machine_label

MeasurementKey = tuple[str, str, str, str]
"""(test, name, kind, api): one measurement, as the store keys it."""


@dataclass(frozen=True)
class MeasurementChange:
    """A step in the history of one measurement on one machine class and branch.
    ``change`` names the first run after the step (its ``run_id`` and ``commit``);
    ``started`` is when that run started (ISO 8601, UTC); ``runs`` is the length of the
    history searched; ``branch`` its git branch (None: runs outside any branch)."""

    fingerprint: str | None
    machine: str
    test: str
    name: str
    kind: str
    api: str
    change: Change
    started: str
    runs: int
    branch: str | None = None

    @property
    def key(self) -> MeasurementKey:
        return (self.test, self.name, self.kind, self.api)


def _value(row: Mapping[str, Any]) -> float | None:
    """The figure of a run: a comparison's ratio, else the median; None when it is
    missing or not a positive finite number (a memory record, a damaged row)."""
    number = figure_of(row)
    return number if number is not None and number > 0 else None


BUDGET_KIND = "slo"
"""The kind of the history of a latency budget's quantile (``ortperf changes``)."""


def _with_budgets(records: Iterable[Mapping[Any, Any]]) -> Iterator[dict[str, Any]]:
    """Each stored row, then one per latency budget it was judged against: kind
    :data:`BUDGET_KIND`, name ``"<name> [p99 budget]"``, the budget's estimate as its median,
    so that a budget whose quantile steps up (its headroom eaten) shows as a change."""
    for record in records:
        row = {str(k): v for k, v in record.items()}
        yield row
        extra = row.get("extra")
        budgets = extra.get("slo") if isinstance(extra, Mapping) else None
        for verdict in budgets if isinstance(budgets, list) else ():
            if isinstance(verdict, Mapping) and verdict.get("outcome") != "not_gated":
                name = f"{row['name']} [{verdict.get('figure')} budget]"
                yield {**row, "kind": BUDGET_KIND, "name": name, "ratio": None,
                       "median": verdict.get("estimate")}  # fmt: skip


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def history_changes(
    store: str,
    *,
    branch: str | None = None,
    machine: str | None = None,
    test: str | None = None,
    keys: Collection[MeasurementKey] | None = None,
    min_change: float = MIN_CHANGE,
    last: int | None = CHANGE_POINT_RUNS,
) -> list[MeasurementChange]:
    """The steps in the history of every stored measurement, per machine class and branch
    (a branch's runs are never read as a step from another branch's level).

    Only measured rows (not smoke runs) of complete runs count, one value per run (the
    last one stored): the ratio of a comparison, the median of a latency. ``branch`` keeps
    the runs of one branch; ``machine`` the machine classes whose fingerprint starts with
    it; ``test`` the measurements whose node id contains it; ``keys`` only those
    measurements; ``last`` the newest runs of those (None: every run). Changes are
    ordered by machine class, measurement, branch, then run. Raises StoreError when the store
    cannot be read, ValueError for a bad ``min_change``.
    """
    from pytest_ortperf.store.read import list_runs, read_results
    from pytest_ortperf.store.schema import INTERRUPTED

    since = None
    if last is not None:
        stored = list_runs(store)
        stored = stored[~stored[INTERRUPTED].astype(bool)]
        if branch is not None:
            stored = stored[stored["branch"] == branch]
        if machine:
            fingerprints = stored["fingerprint"].fillna("").astype(str)
            stored = stored[fingerprints.str.startswith(machine)]
        newest = stored["run_id"].tail(last)
        if newest.empty:
            return []
        since = int(newest.min())
    frame = read_results(store, test=test, since=since, include_interrupted=False)
    if frame.empty:
        return []
    frame = frame[frame["measured"].fillna(False).astype(bool)]
    if branch is not None:
        frame = frame[frame["branch"] == branch]
    if machine:
        frame = frame[frame["fingerprint"].fillna("").astype(str).str.startswith(machine)]
    wanted = None if keys is None else set(keys)
    series: dict[tuple[str | None, str | None, MeasurementKey], dict[int, dict[str, Any]]] = {}
    for row in _with_budgets(frame.to_dict("records")):
        key = (str(row["test"]), str(row["name"]), str(row["kind"]), str(row["api"]))
        if (wanted is not None and key not in wanted) or _value(row) is None:
            continue
        history = (_text(row.get("fingerprint")), _text(row.get("branch")), key)
        runs = series.setdefault(history, {})
        runs.pop(int(row["run_id"]), None)  # one value per run: the last one stored
        runs[int(row["run_id"])] = row
    out: list[MeasurementChange] = []
    for (fingerprint, branch_of, key), by_run in sorted(
        series.items(), key=lambda item: (item[0][0] or "", item[0][2], item[0][1] or "")
    ):
        rows = list(by_run.values())  # oldest first, as read_results orders them
        values = [v for v in (_value(r) for r in rows) if v is not None]
        changes = find_changes(
            values,
            run_ids=[int(r["run_id"]) for r in rows],
            commits=[_text(r.get("commit")) for r in rows],
            min_change=min_change,
        )
        if not changes:
            continue
        latest = rows[-1]
        label = machine_label(fingerprint, _text(latest.get("cpu_model")), _cores(latest))
        for change in changes:
            started = rows[change.index]["started"]
            out.append(
                MeasurementChange(
                    fingerprint=fingerprint,
                    machine=label,
                    test=key[0],
                    name=key[1],
                    kind=key[2],
                    api=key[3],
                    change=change,
                    started=started.isoformat() if hasattr(started, "isoformat") else "",
                    runs=len(rows),
                    branch=branch_of,
                )
            )
    return out


def _cores(row: Mapping[str, Any]) -> int | None:
    cores = row.get("cores")
    try:
        return None if cores is None or math.isnan(float(cores)) else int(cores)
    except (TypeError, ValueError):
        return None
