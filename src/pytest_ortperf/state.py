"""Per-run state: the records gathered from test reports (xdist workers' included)."""

from __future__ import annotations

import pytest

from .config import OrtperfConfig
from .results import Record, records_from_properties


class OrtperfState:
    """What one pytest run measured; registered as a plugin on the controller process."""

    def __init__(self, settings: OrtperfConfig) -> None:
        self.settings = settings
        self.records: list[Record] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.records.extend(records_from_properties(report.user_properties))


STATE_KEY = pytest.StashKey[OrtperfState]()
