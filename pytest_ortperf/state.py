"""Per-run state: the records gathered from test reports (xdist workers' included), and
what happens to them when the run ends: the store, the baseline files."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ortperf.config import OrtperfConfig
from pytest_ortperf.results import USER_PROPERTY, Record, record_from_dict


@cache
def environment() -> Mapping[str, Any]:
    """This machine and its onnxruntime (collected once per process)."""
    from pytest_ortperf.env import collect_environment

    return collect_environment()


class OrtperfState:
    """What one pytest run measured; registered as a plugin on the controller process."""

    def __init__(self, settings: OrtperfConfig, rootpath: Path) -> None:
        self.settings = settings
        self.rootpath = rootpath
        self._baselines: Baselines | None = None
        self.records: list[Record] = []
        self.verdicts: list[dict[str, Any]] = []
        self.baseline_records: list[dict[str, Any]] = []
        self.profiles: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.passed: set[str] = set()
        self.collected: set[str] = set()
        self.started = time.time()
        self.notes: list[str] = []
        """Lines for the terminal summary (where results went, what could not be done)."""
        self.run_id: int | None = None
        """This run's id in the results store, once stored."""

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
        from pytest_ortperf.gating.gate import GATED, VERDICTS_PROPERTY
        from pytest_ortperf.recorder import PROFILE_PROPERTY

        if report.passed:
            self.passed.add(report.nodeid)
        for key, value in report.user_properties:
            if key == USER_PROPERTY and isinstance(value, Mapping):
                self.records.append(record_from_dict(value))
                if value.get(GATED) and report.passed:
                    self.baseline_records.append(dict(value))
            elif key == VERDICTS_PROPERTY and isinstance(value, Mapping):
                self.verdicts.append(dict(value))
            elif key == PROFILE_PROPERTY and isinstance(value, Mapping):
                self.profiles[(str(value["test"]), str(value["name"]))] = list(value["by_op"])

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # Before -k/-m deselect anything: unused baseline entries are those of tests that
        # do not exist, not of tests left out of this run.
        self.collected.update(item.nodeid for item in items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected.update(ids)

    # ------------------------------------------------------------------ at the end

    def save_to_store(self, config: pytest.Config) -> None:
        """Write this run's records to the store in one transaction; a store that cannot be
        written is reported, never raised: test outcomes stay as they are."""
        if not self.settings.enabled or not self.records:
            return
        from pytest_ortperf.env import git_info
        from pytest_ortperf.store import StoreError, resolve_store, save_run

        target = resolve_store(self.settings.store, config.rootpath)
        if target is None:
            return
        try:
            run_id = save_run(
                target,
                started=self.started,
                finished=time.time(),
                command_line=" ".join(["pytest", *config.invocation_params.args]),
                git=git_info(config.rootpath),
                environment=environment(),
                records=self.records,
                profiles=self.profiles,
            )
        except StoreError as exc:
            self.notes.append(f"results NOT stored: {exc}")
        else:
            self.run_id = run_id
            self.notes.append(f"{len(self.records)} results stored in {target} (run {run_id})")

    def maintain_baselines(self, config: pytest.Config) -> None:
        """``--ortperf-update``: write the baselines of the tests that ran and prune those of
        tests that no longer exist; otherwise report unused entries."""
        if not self.settings.enabled:
            return
        from pytest_ortperf.gating.baseline import (
            SCHEMA_VERSION,
            Baseline,
            BaselineError,
            entry_from_record,
            entry_key,
            plan_update,
            prune_unused,
            unused_entries,
            write_baseline,
        )
        from pytest_ortperf.gating.gate import local_record, split_nodeid
        from pytest_ortperf.recorder import OP_SHARES

        partial = _partial_run(config)
        recorded: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for payload in self.baseline_records:
            module, local = split_nodeid(str(payload["test"]))
            entry = entry_from_record(local_record(payload), environment())
            if payload.get(OP_SHARES):
                entry[OP_SHARES] = payload[OP_SHARES]
            recorded[module][entry_key(local, str(payload["name"]))] = entry
        ran: dict[str, set[str]] = defaultdict(set)
        for nodeid in self.passed:
            module, local = split_nodeid(nodeid)
            ran[module].add(local)
        collected: dict[str, set[str]] = defaultdict(set)
        for nodeid in self.collected:
            module, local = split_nodeid(nodeid)
            collected[module].add(local)

        for module in sorted(set(collected) | set(recorded)):
            path = self.baselines.path_of(module)
            shown = _relative(path, self.rootpath)
            try:
                baseline = self.baselines.load(path)
            except BaselineError as exc:
                if not self.settings.update:
                    self.notes.append(f"baseline NOT read: {exc}")
                    continue
                self.notes.append(f"replacing an unreadable baseline ({exc})")
                baseline = Baseline(path, SCHEMA_VERSION, {})
            if not self.settings.update:
                if not partial and module in collected:
                    unused = unused_entries(baseline, collected[module])
                    if unused:
                        self.notes.append(
                            f"{len(unused)} unused baseline entries in {shown} (tests that no "
                            f"longer exist; --ortperf-update prunes them): {', '.join(unused)}"
                        )
                continue
            plan = plan_update(baseline, recorded.get(module, {}), ran.get(module, set()))
            lines = list(plan.lines)
            entries = plan.entries
            if not partial and module in collected:
                pruned = prune_unused(Baseline(path, SCHEMA_VERSION, entries), collected[module])
                entries, lines = pruned.entries, lines + list(pruned.lines)
            if entries != baseline.entries:
                write_baseline(path, entries)
                self.notes.append(f"baseline {shown} updated:")
                self.notes.extend(f"  {line}" for line in lines)
            else:
                self.notes.append(f"baseline {shown} unchanged")


def _partial_run(config: pytest.Config) -> bool:
    """Whether only part of the collected modules is selected (-k, -m, node ids)."""
    args = config.invocation_params.args
    return bool(
        config.getoption("keyword", "")
        or config.getoption("markexpr", "")
        or any("::" in str(arg) for arg in args)
    )


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


if TYPE_CHECKING:
    from pytest_ortperf.gating.gate import Baselines

STATE_KEY = pytest.StashKey[OrtperfState]()
