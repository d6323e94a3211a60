"""History baselines (``--ortperf-baseline=history``): baselines pooled from the runs a
branch stored on one machine class, instead of the committed ``__ortperf__`` files.

Which runs: the newest ``window`` complete runs on the git branch (default ``main``) whose
machine class (:func:`pytest_ortperf.machine.machine_fingerprint`) is the chosen one (default:
this machine's) and that stored the measurement
(:func:`pytest_ortperf.store.history.branch_records`).
Interrupted runs never count, nor does the current run (it is stored when it ends), nor any
other machine class or branch. Where any run of the window ran on CI (``$CI`` set, recorded
as ``ci`` in its environment), the runs outside CI are set aside (:data:`OUTSIDE_CI`): a
local run on ``main``, slowed on purpose or on a busy laptop of the same machine class,
never joins the baseline CI gates against.

How they judge, with the gate across runs (README, "Gating"):

- a comparison's ratio: each stored run is one run of the between-run model. Their block
  ratios and block counts make a baseline entry like a file's (``block_ratios``, ``runs``),
  so :func:`~pytest_ortperf.gating.rules.ratio_baseline` takes the mean of the runs'
  Hodges-Lehmann estimates with the spread between them as the between-run variance; the
  structure is judged against the newest run's op histograms. Runs of the window measured
  with other settings than the newest (``RATIO_KEYS`` of the fingerprint, or the run API)
  are set aside: the baseline is the branch's history since its last such change.
- a latency: its median against the per-run medians of the window
  (:func:`~pytest_ortperf.gating.history.judge_against_runs`), runs whose fingerprint
  (``LATENCY_KEYS``) or API differs from the current measurement's set aside. The history is
  the between-run model here, so every latency is judged this way (a normalized one too:
  the store keeps no control workload).

Fewer than :data:`MIN_HISTORY_RUNS` runs left: the measurement is not gated, with outcome
``new`` (it fails only under ``--ortperf-strict``) and a message saying how many runs were
found on which branch and machine class. A store that cannot be read gives the same outcome
with the store's error.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf.gating.baseline_entries import ENVIRONMENT_KEYS, ROLES, local_record
from pytest_ortperf.gating.fingerprint import (
    LATENCY_KEYS,
    RATIO_KEYS,
    differences,
    fingerprint_of,
)
from pytest_ortperf.gating.gate import Gate
from pytest_ortperf.gating.settings import (
    HISTORY_TAG,
    MIN_HISTORY_RUNS,
    GateSettings,
    HistorySettings,
)
from pytest_ortperf.results import (
    ColdStartResult,
    Comparison,
    LatencyResult,
    Outcome,
    Record,
    Verdict,
)
from pytest_ortperf.results.codec import session_dict
from pytest_ortperf.text import match_machine
from pytest_ortperf.units import format_metric

if TYPE_CHECKING:
    import pandas as pd

StoredRun = tuple[Mapping[str, Any], Record]
"""A stored run's view (:func:`pytest_ortperf.store.history.branch_records`) and its record."""


# --------------------------------------------------------------------------- the pure part


@dataclass(frozen=True)
class Found:
    """What the history held for one measurement: the runs pooled, the runs of the window
    set aside (and why), and an error when the store could not be read."""

    branch: str
    machine: str
    window: int
    runs: tuple[Mapping[str, Any], ...] = ()
    set_aside: tuple[str, ...] = ()
    error: str | None = None

    @property
    def enough(self) -> bool:
        return self.error is None and len(self.runs) >= MIN_HISTORY_RUNS

    def where(self) -> str:
        return f"branch {self.branch!r}, machine class {self.machine}"

    def describe(self) -> str:
        """``5 runs on branch 'main', machine class 0123456789ab (runs 3-9)`` or why not."""
        if self.error is not None:
            return f"{HISTORY_TAG} unavailable ({self.error})"
        k = len(self.runs)
        if not self.enough:
            text = (
                f"no {HISTORY_TAG} yet: {k} of {MIN_HISTORY_RUNS} runs needed found on "
                f"{self.where()} (window {self.window})"
            )
        else:
            ids = [int(view["run_id"]) for view in self.runs]
            text = f"{HISTORY_TAG}: {k} runs on {self.where()} (runs {min(ids)}-{max(ids)})"
        if self.set_aside:
            shown = "; ".join(dict.fromkeys(self.set_aside))
            k = len(self.set_aside)
            text += f"; {k} run{'' if k == 1 else 's'} of the window set aside ({shown})"
        return text


OUTSIDE_CI = "a run outside CI ($CI unset)"
"""Why a run of the window is set aside when others of it ran on CI (``ci`` of its
environment, :func:`pytest_ortperf.machine.collect_environment`)."""


def ci_only(views: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the window's runs outside CI are set aside: when any of them ran on CI. A
    machine class whose history holds no CI run (a developer's machine) keeps its runs;
    runs stored before the key existed are neither."""
    return any(view.get("ci") is True for view in views)


def _ratio_key(view: Mapping[str, Any], record: Comparison) -> dict[str, dict[str, Any]]:
    return {
        role: fingerprint_of(view, session_dict(arm.session) or {})
        for role, arm in (("reference", record.reference), ("candidate", record.candidate))
    }


def _why(differing: Sequence[str], api: tuple[str, str] | None) -> str:
    parts = list(differing)
    if api is not None:
        parts.insert(0, f"api {api[0]} -> {api[1]}")
    return "measured with " + ", ".join(parts)


def pooled_compare(
    stored: Sequence[StoredRun], settings: HistorySettings, machine: str, ignore: Collection[str]
) -> tuple[dict[str, Any] | None, Found]:
    """The baseline entry (as a file's compare entry) pooled from ``stored`` (the window,
    oldest first), and what was found. Runs whose settings differ from the newest one's
    are set aside. None when fewer than :data:`MIN_HISTORY_RUNS` runs remain."""
    runs = [(view, rec) for view, rec in stored if isinstance(rec, Comparison)]
    found = Found(settings.branch, machine, settings.window)
    if not runs:
        return None, found
    newest_view, newest = runs[-1]
    key = _ratio_key(newest_view, newest)
    kept: list[tuple[Mapping[str, Any], Comparison]] = []
    aside: list[str] = []
    ci = ci_only([view for view, _ in runs])
    for view, rec in runs:
        if ci and view.get("ci") is False:
            aside.append(OUTSIDE_CI)
            continue
        now = _ratio_key(view, rec)
        diffs = [
            d.describe()
            for role in ROLES
            for d in differences(now[role], key[role], keys=RATIO_KEYS, allowed=ignore)
        ]
        api = None if rec.api == newest.api else (rec.api, newest.api)
        if diffs or api:
            aside.append(_why(list(dict.fromkeys(diffs)), api))
        else:
            kept.append((view, rec))
    found = dataclasses.replace(found, runs=tuple(view for view, _ in kept), set_aside=tuple(aside))
    if not found.enough:
        return None, found
    ratios = [float(r) for _, rec in kept for r in rec.block_ratios]
    arms = {"reference": newest.reference, "candidate": newest.candidate}
    entry: dict[str, Any] = {
        "kind": "compare",
        "test": local_record({"test": newest.test})["test"],
        "name": newest.name,
        "api": newest.api,
        "block_ratios": ratios,
        "runs": [len(rec.block_ratios) for _, rec in kept],
        "ratio": newest.ratio,
        "op_histograms": {
            role: dict(arm.session.op_histogram) for role, arm in arms.items() if arm.session
        },
        "sessions": {role: session_dict(arm.session) for role, arm in arms.items()},
        "environment": {
            k: newest_view[k] for k in ENVIRONMENT_KEYS if newest_view.get(k) is not None
        },
        "history": {"run_ids": [int(view["run_id"]) for view, _ in kept]},
    }
    return entry, found


def history_medians(
    stored: Sequence[StoredRun],
    record: Mapping[str, Any],
    environment: Mapping[str, Any],
    settings: HistorySettings,
    machine: str,
    ignore: Collection[str],
) -> tuple[list[float], Found]:
    """The per-run medians of the latency ``record`` (its ``to_dict`` form) in ``stored``
    (the window, oldest first), runs whose fingerprint or API differs from the current
    one's set aside, and what was found. A cold start's figure (``record["figure"]``, its
    kind ``cold_start``) is read from the stored cold starts, its session from each."""
    now = fingerprint_of(environment, record.get("session") or {})
    figure = record.get("figure")
    medians: list[float] = []
    kept: list[Mapping[str, Any]] = []
    aside: list[str] = []
    ci = ci_only([view for view, _ in stored])
    for view, rec in stored:
        if ci and view.get("ci") is False:
            aside.append(OUTSIDE_CI)
            continue
        if figure is not None:
            if not isinstance(rec, ColdStartResult) or not rec.figures.get(str(figure)):
                continue
            session = session_dict(rec.session) or {}
            then, median = fingerprint_of(view, session), float(rec.median(str(figure)))
        elif isinstance(rec, LatencyResult) and rec.samples:
            then, median = fingerprint_of(view, view), float(rec.median)
        else:
            continue
        diffs = [d.describe() for d in differences(then, now, keys=LATENCY_KEYS, allowed=ignore)]
        api = None if rec.api == record.get("api") else (rec.api, str(record.get("api")))
        if diffs or api:
            aside.append(_why(diffs, api))
        elif math.isfinite(median) and median > 0:
            medians.append(median)
            kept.append(view)
    found = Found(settings.branch, machine, settings.window, tuple(kept), tuple(aside))
    return medians, found


UPDATE_NOTE = "refresh it with --ortperf-update to check them"


def annotate(verdict: Verdict, found: Found) -> Verdict:
    """``verdict`` as a history baseline gives it: with too little history (or none to
    read) ``new`` and not gated, saying what was found; otherwise its message says which
    runs the baseline pooled."""
    if verdict.metric == "structure" and found.enough:
        return verdict
    if not found.enough:
        if verdict.metric == "structure":
            if verdict.outcome is Outcome.NOT_COMPARABLE:
                return verdict  # no histogram measured now: nothing a history would change
            message = f"structure: not gated: {found.describe()}"
            return dataclasses.replace(verdict, outcome=Outcome.NEW, message=message)
        current = verdict.current
        message = (
            f"{verdict.metric} {format_metric(verdict.metric, current)}: not gated: "
            f"{found.describe()}"
        )
        nan = math.nan
        return Verdict(verdict.metric, Outcome.NEW, nan, current, nan, nan, nan,
                       verdict.threshold, verdict.alpha, None, verdict.n, message)  # fmt: skip
    message = verdict.message.replace(UPDATE_NOTE, "runs stored before those keys existed")
    return dataclasses.replace(verdict, message=f"{message} ({found.describe()})")


# --------------------------------------------------------------------------- two runs


def judge_runs(
    store: str,
    key: tuple[str, str, str],
    run_a: int,
    run_b: int,
    *,
    threshold: float,
    alpha: float,
    window: int = HistorySettings.window,
    listed: pd.DataFrame | None = None,
) -> Verdict | str | None:
    """The gate's verdict of run ``run_b``'s measurement ``key`` (test, name, kind) against
    the history that ends at run ``run_a`` (``ortperf compare``): the newest ``window``
    complete runs up to ``run_a`` on its branch and machine class, pooled as the history
    gate pools them (:func:`pooled_compare`, :func:`history_medians`) and judged by the
    gate's own rules (:func:`~pytest_ortperf.gating.baseline_judge.judge_entry`,
    :func:`~pytest_ortperf.gating.history.judge_against_runs`). A comparison with fewer
    than :data:`MIN_HISTORY_RUNS` such runs is judged against run ``run_a`` alone, as a
    baseline file written from it would be; a latency is then not gated (text: how many
    runs there were). None when either run is not a complete, measured run on a branch, or
    for a latency measured on another machine class or otherwise than run ``run_a`` (the
    caller falls back to the two runs alone, which says why).
    ``listed`` is the store's :func:`~pytest_ortperf.store.read.list_runs` (read once for many
    measurements; None: read here). Raises StoreError."""
    from pytest_ortperf.gating.baseline_entries import entry_from_record
    from pytest_ortperf.gating.baseline_judge import judge_entry
    from pytest_ortperf.gating.history import judge_against_runs
    from pytest_ortperf.store.history import branch_records
    from pytest_ortperf.store.read import list_runs
    from pytest_ortperf.store.schema import INTERRUPTED

    test, name, kind = key
    listed = list_runs(store) if listed is None else listed
    listed = listed[~listed[INTERRUPTED].astype(bool)]

    def runs_upto(run_id: int, keep: int) -> tuple[list[StoredRun], str, str] | None:
        row = listed[listed["run_id"] == run_id]
        if row.empty:
            return None
        branch, machine = row["branch"].iloc[0], row["fingerprint"].iloc[0]
        if not isinstance(branch, str) or not isinstance(machine, str):
            return None
        later = listed[
            (listed["run_id"] > run_id)
            & (listed["branch"] == branch)
            & (listed["fingerprint"] == machine)
        ]
        found = branch_records(store, test, name, kind=kind, branch=branch, machine=machine,
                               last=keep + len(later))  # fmt: skip
        upto: list[StoredRun] = [(v, r) for v, r in found if int(v["run_id"]) <= run_id]
        return upto[-keep:], branch, machine

    a, b = runs_upto(run_a, window), runs_upto(run_b, 1)
    if a is None or b is None or not a[0] or not b[0] or int(b[0][-1][0]["run_id"]) != run_b:
        return None
    stored, branch, machine = a
    view_b, record_b = b[0][-1]
    current = record_b.to_dict()
    settings = HistorySettings(branch=branch, machine=machine, window=window)
    if kind == Comparison.kind:
        entry, found = pooled_compare(stored, settings, machine, ())
        if entry is None:
            view_a, record_a = stored[-1]
            if int(view_a["run_id"]) != run_a:
                return None
            entry = entry_from_record(record_a.to_dict(), view_a)
        verdicts = judge_entry(entry, current, view_b, threshold=threshold, alpha=alpha)
        (verdict,) = [v for v in verdicts if v.metric == "ratio"]
        return annotate(verdict, found) if found.enough else verdict
    if kind == LatencyResult.kind and isinstance(record_b, LatencyResult):
        if b[2] != machine:
            return None  # another machine class: no history of A's says anything about it
        medians, found = history_medians(stored, current, view_b, settings, machine, ())
        if run_a not in {int(view["run_id"]) for view in found.runs}:
            return None  # run A measured otherwise (settings, ORT): the two runs say why
        if not found.enough:
            return f"{len(found.runs)} of {MIN_HISTORY_RUNS} runs"
        verdict = judge_against_runs(
            float(record_b.median), medians, threshold=threshold, alpha=alpha
        )
        return annotate(verdict, found)
    return None


# --------------------------------------------------------------------------- the store


def resolve_machine(store: str, spec: str) -> str:
    """The machine class ``spec`` names: a full fingerprint (12 hex digits) as it is, or
    the one fingerprint in ``store`` it is a prefix of. Raises ValueError naming the
    store's machine classes when none or several match (StoreError: unreadable store)."""
    spec = spec.strip().lower()
    if len(spec) == 12:
        return spec
    from pytest_ortperf.store.read import list_runs
    from pytest_ortperf.store.secrets import redact_url

    runs = list_runs(store)
    known = [f for f in runs["fingerprint"] if isinstance(f, str)]
    try:
        return match_machine(spec, known)
    except ValueError as exc:
        raise ValueError(f"{redact_url(store, store)}: {exc}") from None


def _not_created(store: str) -> bool:
    """Whether ``store`` is a SQLite file that does not exist yet."""
    database: str | None = store
    if "://" in store:
        import sqlalchemy as sa

        try:
            url = sa.engine.make_url(store)
        except sa.exc.ArgumentError:
            return False
        database = url.database if url.get_backend_name() == "sqlite" else None
    return bool(database) and database != ":memory:" and not Path(str(database)).exists()


class HistoryBaselines:
    """The history of one results store, as the gate of one test reads it."""

    def __init__(
        self,
        store: str | None,
        settings: HistorySettings,
        this_machine: Callable[[], str],
    ) -> None:
        self.store = store
        self.settings = settings
        self._this_machine = this_machine
        self._cache: dict[tuple[str, str, str], Sequence[StoredRun] | str] = {}

    @property
    def machine(self) -> str:
        return self.settings.machine or self._this_machine()

    def entry(self, nodeid: str, name: str) -> Mapping[str, Any] | None:
        """The pooled compare entry of a measurement (None: not enough history)."""
        return self.compare_entry(nodeid, name)[0]

    def stored(self, test: str, name: str, kind: str) -> Sequence[StoredRun] | str:
        """The window's stored runs of a measurement, or the store's error as text."""
        key = (test, name, kind)
        if key not in self._cache:
            self._cache[key] = self._read(test, name, kind)
        return self._cache[key]

    def _read(self, test: str, name: str, kind: str) -> Sequence[StoredRun] | str:
        if self.store is None:
            return "no results store (--ortperf-store=none)"
        from pytest_ortperf.store.errors import StoreError
        from pytest_ortperf.store.history import branch_records
        from pytest_ortperf.store.secrets import redact_url

        if _not_created(self.store):
            return []  # no run stored yet: no history, rather than an unreadable store
        try:
            return branch_records(
                self.store,
                test,
                name,
                kind=kind,
                branch=self.settings.branch,
                machine=self.machine,
                last=self.settings.window,
            )
        except StoreError as exc:
            return redact_url(str(exc), self.store)

    def compare_entry(
        self, nodeid: str, name: str, ignore: Collection[str] = ()
    ) -> tuple[dict[str, Any] | None, Found]:
        stored = self.stored(nodeid, name, Comparison.kind)
        if isinstance(stored, str):
            return None, Found(
                self.settings.branch, self.machine, self.settings.window, error=stored
            )
        return pooled_compare(stored, self.settings, self.machine, ignore)

    def latency_medians(
        self, record: Mapping[str, Any], environment: Mapping[str, Any], ignore: Collection[str]
    ) -> tuple[list[float], Found]:
        kind = ColdStartResult.kind if record.get("figure") else LatencyResult.kind
        stored = self.stored(str(record["test"]), str(record["name"]), kind)
        if isinstance(stored, str):
            return [], Found(self.settings.branch, self.machine, self.settings.window, error=stored)
        return history_medians(stored, record, environment, self.settings, self.machine, ignore)


class HistoryGate(Gate):
    """A :class:`~pytest_ortperf.gating.gate.Gate` whose baselines come from the history
    of a branch on a machine class (see the module's docstring)."""

    def __init__(
        self,
        settings: GateSettings,
        history: HistoryBaselines,
        environment: Callable[[], Mapping[str, Any]],
    ) -> None:
        super().__init__(settings, history, environment, self._medians)
        self.source = history
        self._found: dict[tuple[str, str], Found] = {}

    def entry(self, nodeid: str, name: str) -> Mapping[str, Any] | None:
        entry, found = self.source.compare_entry(nodeid, name, self.settings.fingerprint_ignore)
        self._found[(nodeid, name)] = found
        return entry

    def _medians(self, record: Mapping[str, Any]) -> list[float]:
        medians, found = self.source.latency_medians(
            record, self.environment(), self.settings.fingerprint_ignore
        )
        self._found[(str(record["test"]), str(record["name"]))] = found
        return medians

    def judge(self, record: Mapping[str, Any], entry: Mapping[str, Any] | None) -> list[Verdict]:
        key = (str(record["test"]), str(record["name"]))
        if record.get("kind") == "latency":
            # Judged on its median against the runs' medians, whether or not a control
            # workload was measured with it: the history is the between-run model.
            verdicts = super().judge({**record, "control": None}, None)
        else:
            if key not in self._found:  # judged without asking for its entry first
                entry = self.entry(*key)
            verdicts = super().judge(record, entry)
        return [annotate(v, self._found[key]) for v in verdicts]
