"""Per-run state: the records gathered from test reports (xdist workers' included), and
what happens to them when the run ends."""

from __future__ import annotations

import time

import pytest

from .config import OrtperfConfig
from .results import Record, records_from_properties


class OrtperfState:
    """What one pytest run measured; registered as a plugin on the controller process."""

    def __init__(self, settings: OrtperfConfig) -> None:
        self.settings = settings
        self.records: list[Record] = []
        self.started = time.time()
        self.notes: list[str] = []
        """Lines for the terminal summary (where results went, what could not be done)."""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.records.extend(records_from_properties(report.user_properties))

    def save_to_store(self, config: pytest.Config) -> None:
        """Write this run's records to the store in one transaction; a store that cannot be
        written is reported, never raised: test outcomes stay as they are."""
        if not self.settings.enabled or not self.records:
            return
        from .env import collect_environment, git_info
        from .store import StoreError, resolve_store, save_run

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
                environment=collect_environment(),
                records=self.records,
            )
        except StoreError as exc:
            self.notes.append(f"results NOT stored: {exc}")
        else:
            self.notes.append(f"{len(self.records)} results stored in {target} (run {run_id})")


STATE_KEY = pytest.StashKey[OrtperfState]()
