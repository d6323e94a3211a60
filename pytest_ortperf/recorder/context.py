"""What every kind of measurement of one test works with: its settings, engine, gate and
recording, and the few steps they all take (a name's baseline entry, a verdict enforced)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ortperf.gating.gate import Decision, Gate, GateFailure
from pytest_ortperf.gating.settings import DEFAULT_ALPHA, GateSettings
from pytest_ortperf.measuring.engine import EngineConfig, Samples, TimingEngine, config_of
from pytest_ortperf.measuring.records import latency_result
from pytest_ortperf.recorder.recording import Recording
from pytest_ortperf.recorder.targets import session_info, warmed

if TYPE_CHECKING:
    from pytest_ortperf.measuring.session import OrtSession
    from pytest_ortperf.recorder.beside_settings import BesideSettings
    from pytest_ortperf.results import LatencyResult, Record, Verdict


class Context:
    """One test's measuring context, shared by the recorder and the modules of each kind
    of measurement (the recorder's attributes are kept here)."""

    def __init__(
        self,
        *,
        recording: Recording,
        engine: TimingEngine,
        gate: Gate | None,
        profile_arms: bool,
        baseline_runs: int,
        latency_mode: str,
        baseline_settings: GateSettings,
        fail_blind: bool,
    ) -> None:
        self.recording = recording
        self.engine = engine
        self.gate = gate
        self.profile_arms = profile_arms
        self.baseline_runs = baseline_runs
        self.latency_mode = latency_mode
        self.baseline_settings = baseline_settings
        self.fail_blind = fail_blind
        self.marker_slo: Any = None
        self.cold_launcher: Callable[[Path, str, float], Any] | None = None
        self.beside: BesideSettings | None = None
        """Artifacts and the judging of latencies beside the baseline's model (None: off)."""

    @property
    def test(self) -> str:
        return self.recording.test

    @property
    def measured(self) -> bool:
        return self.recording.measured

    @property
    def alpha(self) -> float:
        """The gate's alpha; where no gate runs (``--ortperf-update``, smoke), the default
        (:data:`~pytest_ortperf.gating.settings.DEFAULT_ALPHA`)."""
        return self.gate.settings.alpha if self.gate is not None else DEFAULT_ALPHA

    @property
    def strict(self) -> bool:
        """Whether an inconclusive verdict fails (``--ortperf-strict``, gated runs only)."""
        return self.gate is not None and self.gate.settings.strict

    @property
    def fails_already(self) -> str:
        """Why the test fails already (empty while it does not, and where no gate runs): a
        later gated measurement takes its first measurement only and says so."""
        return self.recording.fails_already() if self.gate is not None else ""

    def entry(self, name: str) -> Mapping[str, Any] | None:
        """Claim a gated measurement's name; its baseline entry when gated (a baseline
        that cannot be read fails the test)."""
        self.recording.claim(name, gated=True)
        if self.gate is None:
            return None
        try:
            return self.gate.entry(self.test, name)
        except GateFailure as exc:
            message = str(exc)
        pytest.fail(message, pytrace=False)

    def judge(self, record: Record, entry: Mapping[str, Any] | None) -> list[Verdict]:
        """The gate's verdicts of a measured record against its baseline entry (none in
        smoke mode or without a gate)."""
        if self.gate is None or not self.measured:
            return []
        return self.gate.judge(record.to_dict(), entry)

    def enforce(
        self,
        name: str,
        decision: Decision[Any],
        attribution: Callable[[], list[str]] | None = None,
    ) -> None:
        """Fail the test (once its body has run) where the gate fails a verdict."""
        if self.gate is None:
            return
        failing = self.gate.failing(decision.verdicts)
        if failing:
            self.recording.gate_failed(
                name, failing, decision.verdicts, decision.first, attribution
            )

    def result(
        self, name: str, api: str, samples: Samples, session: OrtSession, structure: bool = False
    ) -> LatencyResult:
        """The record of a local target's samples (``structure``: with its session's op
        histogram and placement)."""
        info = session_info(session, structure)
        return latency_result(self.test, name, api, samples, info, self.measured)

    def engine_config(self, *sessions: OrtSession) -> EngineConfig:
        """The config of the engine as it measures ``sessions``."""
        return config_of(warmed(self.engine, *sessions))
