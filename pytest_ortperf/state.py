"""Per-run state: the records gathered from test reports (xdist workers' included), and
what happens to them when the run ends: the store, the baseline files, the report files.

Loading this module imports nothing heavy: records, the store and the baseline code are
imported when a measured run needs them.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ortperf.config import OrtperfConfig

if TYPE_CHECKING:
    from pytest_ortperf.gating.baseline import Baseline, BaselineError
    from pytest_ortperf.gating.gate import Baselines
    from pytest_ortperf.gating.suite import Family
    from pytest_ortperf.reports.writer import ReportFiles, RunResults
    from pytest_ortperf.results import Judgement, Record


@cache
def machine_facts() -> Mapping[str, Any]:
    """This machine and its onnxruntime, as the store and fingerprints record them
    (:func:`pytest_ortperf.machine.collect_environment`, collected once per process)."""
    from pytest_ortperf.machine import collect_environment

    return collect_environment()


HISTORY_ENVIRONMENT_KEYS = (
    "fingerprint",
    "ort_version",
    "ort_build",
    "isa",
    "effective_cpus",
    "python_version",
    "numpy_version",
    "onnx_version",
)
"""What an earlier run's environment must share with this one for its latency to count."""


def history(state: OrtperfState) -> Callable[[Mapping[str, Any]], list[float] | None]:
    """Per-run medians of earlier runs of an absolute latency record, on this machine's
    fingerprint and the record's session settings, from the run's store (None: no store,
    or it cannot be read: the verdict then says the latency is not gated)."""

    def earlier(record: Mapping[str, Any]) -> list[float] | None:
        store = state.store_target()
        if store is None:
            return None
        from pytest_ortperf.store.errors import StoreError
        from pytest_ortperf.store.history import run_medians

        env = machine_facts()
        session = record.get("session") or {}
        # Every key of the latency fingerprint the store keeps (the machine hash stands for
        # CPU model, cores, memory and OS).
        match = {
            **{k: env.get(k) for k in HISTORY_ENVIRONMENT_KEYS if env.get(k) is not None},
            **{k: session.get(k) for k in ("providers", "threads", "spinning", "optimization")},
        }
        try:
            return run_medians(
                store, str(record["test"]), str(record["name"]), api=str(record["api"]),
                fingerprint=match, figure=record.get("figure"),
            )  # fmt: skip
        except StoreError:
            return None

    return earlier


FAMILY_OUTPUT = "ortperf_family"
"""Key of an xdist worker's output holding the run's family (``Family.to_dict``)."""


class OrtperfState:
    """What one pytest run measured; registered as a plugin on the controller process."""

    def __init__(self, settings: OrtperfConfig, rootpath: Path) -> None:
        self.settings = settings
        self.rootpath = rootpath
        self._baselines: Baselines | None = None
        self.records: list[Record] = []
        self.judgements: list[Judgement] = []
        self.baseline_records: list[dict[str, Any]] = []
        self.blind_after_merge = False
        """With ``--ortperf-fail-blind``: a baseline pooled over processes cannot see its
        threshold (the run fails; see
        :func:`~pytest_ortperf.update_processes.in_further_processes`)."""
        self.profiles: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.attributions: dict[tuple[str, str], list[str]] = {}
        """(test, name) of a regression -> the op types its attribution found moving."""
        self.passed: set[str] = set()
        self.collected: set[str] = set()
        self.started = time.time()
        self.uid = str(uuid.uuid4())
        """This run's uid in the store (``runs.uid``): made now, so that a run spooled and
        written later, or written twice, is stored once."""
        self.notes: list[str] = []
        """Lines for the terminal summary (where results went, what could not be done)."""
        self.run_id: int | None = None
        """This run's id in the results store, once stored."""
        self.family: Family | None = None
        """``--ortperf-family-alpha`` over this run's planned verdicts, once collected (on
        the xdist controller: from a worker's output)."""

    @property
    def baselines(self) -> Baselines:
        """The baseline files of this process (imported and built on first use)."""
        if self._baselines is None:
            from pytest_ortperf.gating.gate import Baselines

            self._baselines = Baselines(self.rootpath)
        return self._baselines

    # ------------------------------------------------------------------ gathering

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.settings.enabled:
            return
        from pytest_ortperf.reports.terminal import compact_property

        if report.when == "call":
            self._gather(report)
        # Every phase's report carries the test's user_properties: later readers (the
        # --junitxml properties) get one readable line per measurement, not raw samples.
        report.user_properties = [
            (key, compact_property(key, value)) for key, value in report.user_properties
        ]

    def _gather(self, report: pytest.TestReport) -> None:
        from pytest_ortperf.results import (
            ATTRIBUTION_PROPERTY,
            GATED,
            PROFILE_PROPERTY,
            USER_PROPERTY,
            VERDICTS_PROPERTY,
            Judgement,
            record_from_dict,
        )

        if report.passed:
            self.passed.add(report.nodeid)
        for key, value in report.user_properties:
            if not isinstance(value, Mapping):
                continue
            if key == USER_PROPERTY:
                self.records.append(record_from_dict(value))
                if value.get(GATED) and report.passed:
                    self.baseline_records.append(dict(value))
            elif key == VERDICTS_PROPERTY:
                self.judgements.append(Judgement.from_dict(value))
            elif key == PROFILE_PROPERTY:
                self.profiles[(str(value["test"]), str(value["name"]))] = list(value["by_op"])
            elif key == ATTRIBUTION_PROPERTY:
                key_of = (str(value["test"]), str(value["name"]))
                self.attributions[key_of] = [str(line) for line in value["lines"]]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # Before -k/-m deselect anything: unused baseline entries are those of tests that
        # do not exist, not of tests left out of this run.
        self.collected.update(item.nodeid for item in items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected.update(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        if FAMILY_OUTPUT in output and self.family is None:
            from pytest_ortperf.gating.suite import Family

            self.family = Family.from_dict(output[FAMILY_OUTPUT])

    # ------------------------------------------------------------------ at the end

    def store_target(self) -> str | None:
        """Where results go (None: storing disabled)."""
        from pytest_ortperf.store.location import resolve_store

        return resolve_store(self.settings.store, self.rootpath)

    def save_to_store(self, config: pytest.Config, *, interrupted: bool = False) -> None:
        """Write this run's records to the store in one transaction, then the runs spooled
        earlier for the same store. ``interrupted``: the run was stopped before all its
        tests ran (Ctrl-C), so it is stored marked as such.

        Never raises: a store that cannot be written is a note, and the run goes to the
        spool (:mod:`pytest_ortperf.store.spool`) for the next run or ``ortperf sync`` to write;
        test outcomes and the exit status stay as they are (the store is history)."""
        if not self.settings.enabled:
            return
        from pytest_ortperf.store.errors import StoreError
        from pytest_ortperf.store.secrets import redact_url

        target: str | None = None
        run = None
        try:
            target = self.store_target()
            if target is None:
                return
            if not self.records:
                self._sync_spool(target)
                return
            run = self._spooled_run(config, target, interrupted=interrupted)
            run_id = run.save(target)
        except Exception as exc:  # a bug of ours or of a driver too: still only a note
            why = (
                str(exc)
                if isinstance(exc, StoreError)
                else f"unexpected {type(exc).__name__}: {exc}"
            )
            note = f"results NOT stored: {why}"
            if run is not None:
                note += "; " + self._spool(run)
            self.notes.append(redact_url(note, target))
            return
        self.run_id = run_id
        where = redact_url(target, target)
        mark = (
            ", marked interrupted: `latest`, `ortperf compare` and `ortperf history` leave it out"
            if interrupted
            else ""
        )
        self.notes.append(f"{len(self.records)} results stored in {where} (run {run_id}{mark})")
        self._sync_spool(target)

    def spool_dir(self) -> Path:
        from pytest_ortperf.store.spool import resolve_spool

        return resolve_spool(None, self.rootpath)

    def _spooled_run(self, config: pytest.Config, target: str, *, interrupted: bool) -> Any:
        from pytest_ortperf.machine import git_info
        from pytest_ortperf.store.connection import store_label
        from pytest_ortperf.store.secrets import redact_url
        from pytest_ortperf.store.spool import SpooledRun

        command_line = " ".join(["pytest", *config.invocation_params.args])
        return SpooledRun(
            uid=self.uid,
            store=store_label(target),
            started=self.started,
            finished=time.time(),
            command_line=redact_url(command_line, target),
            git=git_info(config.rootpath),
            environment=machine_facts(),
            records=list(self.records),
            profiles=dict(self.profiles),
            interrupted=interrupted,
        )

    def _spool(self, run: Any) -> str:
        """Spool ``run``; what became of it, in words, for the note."""
        from pytest_ortperf.store.spool import SpoolError, spool_run

        try:
            path = spool_run(self.spool_dir(), run)
        except SpoolError as exc:
            return f"spooling it failed too: {exc}"
        return f"spooled to {path}: the next run or `ortperf sync` writes it to the store"

    def _sync_spool(self, target: str) -> None:
        """Write the runs spooled earlier for ``target``; a note says what was done."""
        from pytest_ortperf.store.secrets import redact_url
        from pytest_ortperf.store.spool import SpoolError, sync

        try:
            done = sync(target, self.spool_dir())
        except Exception as exc:  # SpoolError, or a bug: a note, never "results NOT stored"
            why = str(exc) if isinstance(exc, SpoolError) else f"unexpected {exc!r}"
            self.notes.append(redact_url(f"spooled runs not written: {why}", target))
            return
        if done.written:
            ids = ", ".join(str(run_id) for _, run_id in done.written)
            n = len(done.written)
            self.notes.append(
                f"{n} spooled run{'s' if n > 1 else ''} written to the store (run {ids})"
            )
        if done.error is not None and (done.written or self.records):
            self.notes.append(redact_url(f"spooled runs not written: {done.error}", target))
        for _path, why in done.damaged:  # why names the file and where it was set aside
            self.notes.append(redact_url(f"spooled run not written: {why}", target))

    def maintain_baselines(self, config: pytest.Config, *, interrupted: bool = False) -> None:
        """``--ortperf-update``: write the baselines of the tests that ran and prune those of
        tests that no longer exist, each file on its own and under its lock (see
        :func:`~pytest_ortperf.gating.baseline.update_baseline`); otherwise report unused
        entries (see :func:`~pytest_ortperf.gating.baseline.plan_baselines`). With history
        baselines (which never update files) the files are neither read nor reported on.

        Every file that could not be updated gets its own note; once all the others are
        written, this raises BaselineError naming them, so the run fails."""
        if not self.settings.enabled or self.settings.baseline == "history":
            return
        if self.settings.update_part:  # a further process of an update: its records only
            from pytest_ortperf.update_processes import write_part

            write_part(Path(self.settings.update_part), self.baseline_records)
            return
        from pytest_ortperf.gating.baseline import (
            Baseline,
            BaselineError,
            baseline_path,
            plan_baselines,
            some_keys,
            update_baseline,
        )
        from pytest_ortperf.gating.baseline_entries import split_nodeid

        gated = self.baseline_records
        if self.settings.update_processes > 1 and gated and interrupted:
            self.notes.append("interrupted: baselines taken in this process only")
        elif self.settings.update_processes > 1 and gated:
            from pytest_ortperf.update_processes import in_further_processes

            gated, blind = in_further_processes(config, self.settings, gated, self.notes)
            self.blind_after_merge = blind and self.settings.fail_blind
        # Each module is planned with its own records and tests only (one pass over them).
        records: dict[str, list[dict[str, Any]]] = {}
        for payload in gated:
            records.setdefault(split_nodeid(str(payload["test"]))[0], []).append(payload)
        passed: dict[str, set[str]] = {}
        collected: dict[str, set[str]] = {}
        for nodeids, by_module in ((self.passed, passed), (self.collected, collected)):
            for nodeid in nodeids:
                by_module.setdefault(split_nodeid(nodeid)[0], set()).add(nodeid)
        update, partial = self.settings.update, _partial_run(config)
        failed: list[str] = []
        for module in sorted(collected.keys() | records.keys()):
            path = self.baselines.path_of(module)
            if update and (module in records or path.exists()):
                try:
                    plan = update_baseline(
                        path,
                        module,
                        records.get(module, []),
                        machine_facts(),
                        passed=passed.get(module, set()),
                        collected=collected.get(module, set()),
                        partial=partial,
                    )
                except Exception as exc:  # this file only: the others are still written
                    shown = str(baseline_path(Path(module)))
                    self.notes.append(f"baseline {shown} NOT updated: {type(exc).__name__}: {exc}")
                    failed.append(shown)
                    continue
            else:  # only read (or, updating, no file and nothing to write: no lock needed)
                loaded: Baseline | BaselineError = Baseline(path)
                if not update:
                    try:
                        loaded = self.baselines.load(path)
                    except BaselineError as exc:
                        loaded = exc
                plan = plan_baselines(
                    {module: loaded},
                    records.get(module, []),
                    machine_facts(),
                    passed=passed.get(module, set()),
                    collected=collected.get(module, set()),
                    update=update,
                    partial=partial,
                )
            self.notes.extend(plan.notes)
            failed.extend(plan.failed)
        if failed:
            raise BaselineError(
                f"{len(failed)} file{'s' if len(failed) > 1 else ''} left as "
                f"{'they were' if len(failed) > 1 else 'it was'} (see above): {some_keys(failed)}"
            )

    def results(self, config: pytest.Config, exit_status: int) -> RunResults:
        """What this run measured and judged, for the report files."""
        from pytest_ortperf.machine import git_info
        from pytest_ortperf.reports.json import RunInfo
        from pytest_ortperf.reports.writer import RunResults

        settings = self.settings
        run = RunInfo(
            started=self.started,
            finished=time.time(),
            environment=dict(machine_facts()),
            git=git_info(config.rootpath),
            settings={
                "budget_s": settings.budget_s,
                "threshold": settings.gate.threshold,
                "alpha": settings.gate.alpha,
                "strict": settings.gate.strict,
                "family_alpha": settings.family_alpha,
                "update": settings.update,
                "baseline": settings.baseline,
                **(
                    {"history": dataclasses.asdict(settings.history)}
                    if settings.baseline == "history"
                    else {}
                ),
            },
            run_id=self.run_id,
            exit_status=exit_status,
            notes=tuple(self.notes),
        )
        return RunResults(
            run=run,
            records=tuple(self.records),
            judgements=tuple(self.judgements),
            profiles=dict(self.profiles),
            store=self.store_target(),
            threshold=settings.gate.threshold,
            baseline_samples=self.baseline_samples(),
            attributions=dict(self.attributions),
            family=self.family,
        )

    def baseline_samples(self) -> dict[tuple[str, str], list[float]]:
        """The stored samples of each measured latency's baseline entry (none for an
        update run, whose entries are being replaced, or for an unreadable file)."""
        from pytest_ortperf.gating.baseline import BaselineError
        from pytest_ortperf.results import LatencyResult

        if self.settings.update or self.settings.baseline == "history":
            return {}
        out: dict[tuple[str, str], list[float]] = {}
        for record in self.records:
            if not isinstance(record, LatencyResult) or not record.measured:
                continue
            try:
                entry = self.baselines.entry(record.test, record.name)
            except BaselineError:
                continue
            if entry is not None and entry.get("kind") == "latency":
                out[(record.test, record.name)] = [float(x) for x in entry.get("samples", ())]
        return out

    def write_reports(self, files: ReportFiles, config: pytest.Config, exit_status: int) -> None:
        """Write the report files; what could not be written becomes a note."""
        if not files.any or not self.settings.enabled:
            return
        from pytest_ortperf.reports.writer import write_reports

        self.notes.extend(write_reports(files, self.results(config, exit_status)))


def _partial_run(config: pytest.Config) -> bool:
    """Whether only part of the collected modules is selected (-k, -m, node ids)."""
    args = config.invocation_params.args
    return bool(
        config.getoption("keyword", "")
        or config.getoption("markexpr", "")
        or any("::" in str(arg) for arg in args)
    )


STATE_KEY = pytest.StashKey[OrtperfState]()
