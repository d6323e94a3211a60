"""Gating as the recorder uses it: baseline entries of a test, verdicts, failure messages.

The statistics live in :mod:`pytest_ortperf.gating.rules` and the files in
:mod:`pytest_ortperf.gating.baseline`; this module ties them to test node ids and settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ortperf.gating.baseline import (
    Baseline,
    BaselineError,
    baseline_path,
    entry_key,
    judge_entry,
    load_baseline,
    local_record,
    split_nodeid,
)
from pytest_ortperf.gating.rules import decide_early, min_blocks_for
from pytest_ortperf.gating.settings import GateSettings
from pytest_ortperf.measure import Engine, EngineConfig, StopRule
from pytest_ortperf.results import Outcome, Verdict

UPDATE_BUDGET_FACTOR = 3.0
"""``--ortperf-update`` measures baselines with this many times the budget."""


def measuring_engine(config: EngineConfig, gate: GateSettings, *, update: bool) -> Engine:
    """The engine of a measured test: at least enough blocks for the rank tests to reach
    significance (fewer, and a regression could never fail, however large), and three
    times the budget when taking baselines (a baseline is judged against many later runs:
    its own error should be small)."""
    needed = min_blocks_for(gate.alpha)
    if config.min_blocks < needed:
        config = dataclasses.replace(config, min_blocks=needed)
    engine = Engine(config)
    return engine.scaled(UPDATE_BUDGET_FACTOR) if update else engine


class Baselines:
    """The baseline files this process reads, each loaded once."""

    def __init__(self, rootpath: Path) -> None:
        self.rootpath = rootpath
        self._loaded: dict[Path, Baseline] = {}

    def path_of(self, nodeid: str) -> Path:
        return baseline_path(self.rootpath / split_nodeid(nodeid)[0])

    def load(self, path: Path) -> Baseline:
        """The baseline at ``path`` (empty when missing); raises :class:`BaselineError`."""
        if path not in self._loaded:
            self._loaded[path] = load_baseline(path)
        return self._loaded[path]

    def entry(self, nodeid: str, name: str) -> Mapping[str, Any] | None:
        baseline = self.load(self.path_of(nodeid))
        return baseline.entries.get(entry_key(split_nodeid(nodeid)[1], name))


class Gate:
    """Judges the measurements of one test against its module's baseline file."""

    def __init__(
        self,
        settings: GateSettings,
        baselines: Baselines,
        environment: Callable[[], Mapping[str, Any]],
    ) -> None:
        self.settings = settings
        self.baselines = baselines
        self.environment = environment

    def entry(self, nodeid: str, name: str) -> Mapping[str, Any] | None:
        """The stored entry; a broken baseline file fails the test with the file's error."""
        try:
            return self.baselines.entry(nodeid, name)
        except BaselineError as exc:
            raise GateFailure(f"ortperf baseline unusable: {exc}") from None

    def stop_rule(self, entry: Mapping[str, Any] | None) -> StopRule | None:
        """Adaptive stop of an interleaved compare: once the verdict is already clear."""
        if entry is None or entry.get("kind") != "compare":
            return None
        baseline_ratio = float(entry["ratio"])
        settings = self.settings

        def clear(values: Sequence[Sequence[float]]) -> bool:
            reference, candidate = values
            ratios = [c / r for r, c in zip(reference, candidate, strict=True)]
            return decide_early(
                ratios, baseline_ratio, threshold=settings.threshold, alpha=settings.alpha
            )

        return clear

    def judge(self, record: Mapping[str, Any], entry: Mapping[str, Any] | None) -> list[Verdict]:
        return judge_entry(
            entry,
            local_record(record),
            self.environment(),
            threshold=self.settings.threshold,
            latency_threshold=self.settings.latency_threshold,
            alpha=self.settings.alpha,
        )

    def needs_confirmation(self, verdicts: Sequence[Verdict]) -> bool:
        """A timing verdict that is regressed, or inconclusive, is re-measured once (at
        twice the budget) before it is final: noise gets a second chance to cancel."""
        return self.settings.confirm and any(
            v.outcome in (Outcome.REGRESSED, Outcome.INCONCLUSIVE) and v.metric != "structure"
            for v in verdicts
        )

    def failing(self, verdicts: Sequence[Verdict]) -> list[Verdict]:
        return [
            v
            for v in verdicts
            if v.failed(self.settings.strict)
            and (v.metric != "structure" or self.settings.structure)
        ]


class GateFailure(Exception):
    """A measurement failed its gate (or its baseline could not be read)."""


def failure_message(
    test_name: str, failing: Sequence[Verdict], verdicts: Sequence[Verdict], confirmed: bool
) -> str:
    """The failing test's report: every verdict, the failing ones first, with hints."""
    lines = [f"ortperf: {test_name!r} failed its performance gate"]
    for verdict in [*failing, *(v for v in verdicts if v not in failing)]:
        mark = "FAIL" if verdict in failing else "    "
        lines.append(f"  {mark} {verdict.metric}: {verdict.message}")
    if confirmed:
        lines.append("  (the verdict of a second measurement, at twice the budget)")
    if any(v.outcome is Outcome.NEW for v in failing):
        lines.append("  no baseline yet: run `pytest --ortperf --ortperf-update` to take one")
    if any(v.outcome is Outcome.REGRESSED for v in failing):
        lines.append("  if the change is intended, refresh the baseline with --ortperf-update")
    return "\n".join(lines)
