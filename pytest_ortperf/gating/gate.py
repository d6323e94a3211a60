"""Gating as the recorder uses it: baseline entries of a test, verdicts, failure messages.

The statistics live in :mod:`pytest_ortperf.gating.rules` and the files in
:mod:`pytest_ortperf.gating.baseline`; this module ties them to test node ids and settings.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pytest_ortperf.gating.baseline import (
    Baseline,
    BaselineError,
    baseline_path,
    entry_key,
    judge_entry,
    load_baseline,
    local_record,
    ratio_baseline_of,
    split_nodeid,
)
from pytest_ortperf.gating.rules import decide_early, min_blocks_for
from pytest_ortperf.gating.settings import HISTORY_TAG, GateSettings
from pytest_ortperf.measure import Engine, EngineConfig, StopRule, TimingEngine
from pytest_ortperf.results import Comparison, LatencyResult, Outcome, Verdict
from pytest_ortperf.units import format_change, format_interval

R = TypeVar("R", LatencyResult, Comparison)

UPDATE_BUDGET_FACTOR = 3.0
"""``--ortperf-update`` measures baselines with this many times the budget."""

BASELINE_RUNS = 10
"""Independent runs (each on fresh sessions) a baseline is taken as, sharing its budget:
their spread measures the between-run variance the gate allows for."""


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


class BaselineSource(Protocol):
    """Where a gate finds the baseline entry of a measurement."""

    def entry(self, nodeid: str, name: str) -> Mapping[str, Any] | None: ...


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


CONFIRM_BUDGET_FACTOR = 2.0
"""A confirming measurement runs at this many times the budget, with no early stop."""


@dataclass(frozen=True)
class Decision(Generic[R]):
    """What the gate decided about one measurement: the record it kept (the confirming
    one when there was a confirmation), its verdicts, and the first measurement's verdicts
    when a confirmation replaced them."""

    record: R
    verdicts: list[Verdict]
    first: list[Verdict] | None = None


def _load_average() -> float | None:
    """The one-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


class Gate:
    """Judges the measurements of one test against its module's baseline file.

    The procedure (README, "Gating"): a first measurement, with an early stop once its
    verdict is clear; only a verdict that would fail the test is measured again, with
    twice the budget and no early stop, and that second measurement decides. A false
    alarm needs both to fail, so its probability is at most that of the second, a
    fixed-size test at ``alpha``: the whole procedure's false-alarm rate is at most
    ``alpha``, whatever the first measurement's looks spent.
    """

    def __init__(
        self,
        settings: GateSettings,
        baselines: BaselineSource,
        environment: Callable[[], Mapping[str, Any]],
        history: Callable[[Mapping[str, Any]], Sequence[float] | None] | None = None,
    ) -> None:
        self.settings = settings
        self.baselines = baselines
        self.environment = environment
        self.history = history
        """Per-run medians of earlier runs of an absolute latency record on its
        fingerprint (None: no store to ask)."""

    def entry(self, nodeid: str, name: str) -> Mapping[str, Any] | None:
        """The stored entry; a broken baseline file fails the test with the file's error."""
        try:
            return self.baselines.entry(nodeid, name)
        except BaselineError as exc:
            raise GateFailure(f"ortperf baseline unusable: {exc}") from None

    def stop_rule(self, entry: Mapping[str, Any] | None) -> StopRule | None:
        """Early stop of a first measurement, once its verdict is clear (see
        :func:`~pytest_ortperf.gating.rules.decide_early`). It may stop on a clear
        regression only when a confirmation will decide."""
        baseline = ratio_baseline_of(entry)
        if baseline is None:
            return None
        settings = self.settings

        def clear(values: Sequence[Sequence[float]]) -> bool:
            reference, candidate = values[0], values[1]
            ratios = [c / r for r, c in zip(reference, candidate, strict=True)]
            return decide_early(
                ratios, baseline, threshold=settings.threshold, alpha=settings.alpha,
                may_reject=settings.confirm,
            )  # fmt: skip

        return clear

    def judge(self, record: Mapping[str, Any], entry: Mapping[str, Any] | None) -> list[Verdict]:
        earlier = None
        if record.get("kind") == "latency" and not record.get("control") and self.history:
            earlier = self.history(record)
        return judge_entry(
            entry,
            local_record(record),
            self.environment(),
            threshold=self.settings.threshold,
            latency_threshold=self.settings.latency_threshold,
            alpha=self.settings.alpha,
            fingerprint_ignore=self.settings.fingerprint_ignore,
            earlier_medians=earlier,
            load_average=_load_average(),
        )

    def decide(
        self,
        measure: Callable[[TimingEngine, StopRule | None], R],
        engine: TimingEngine,
        entry: Mapping[str, Any] | None,
    ) -> Decision[R]:
        """Measure with ``measure(engine, stop_rule)``, judge, and confirm what would fail."""
        first = measure(engine, self.stop_rule(entry))
        verdicts = self.judge(first.to_dict(), entry)
        if not (self.settings.confirm and self._would_fail(verdicts)):
            return Decision(first, verdicts)
        second = measure(engine.scaled(CONFIRM_BUDGET_FACTOR), None)
        return Decision(second, self.judge(second.to_dict(), entry), verdicts)

    def _would_fail(self, verdicts: Sequence[Verdict]) -> bool:
        """Whether a timing verdict would fail the test (structure needs no second look)."""
        return any(v.metric != "structure" and v in self.failing(verdicts) for v in verdicts)

    def failing(self, verdicts: Sequence[Verdict]) -> list[Verdict]:
        return [
            v
            for v in verdicts
            if v.failed(self.settings.strict)
            and (v.metric != "structure" or self.settings.structure)
        ]


class GateFailure(Exception):
    """A measurement failed its gate (or its baseline could not be read)."""


def first_note(first: Sequence[Verdict], verdicts: Sequence[Verdict]) -> str:
    """How the first measurement of a confirmed one read, for the failure or the report."""
    by_metric = {v.metric: v for v in verdicts}
    parts = [
        f"{v.metric} {format_change(v.change)} {format_interval(v.low, v.high)} -> "
        f"{v.outcome.value}"
        for v in first
        if v.metric != "structure" and by_metric.get(v.metric) is not None
    ]
    return "the verdict of a second measurement at twice the budget; the first read " + "; ".join(
        parts
    )


def failure_message(
    test_name: str,
    failing: Sequence[Verdict],
    verdicts: Sequence[Verdict],
    first: Sequence[Verdict] | None = None,
) -> str:
    """The failing test's report: every verdict, the failing ones first, with hints."""
    lines = [f"ortperf: {test_name!r} failed its performance gate"]
    for verdict in [*failing, *(v for v in verdicts if v not in failing)]:
        mark = "FAIL" if verdict in failing else "    "
        lines.append(f"  {mark} {verdict.metric}: {verdict.message}")
    if first is not None:
        lines.append(f"  ({first_note(first, verdicts)})")
    history = any(HISTORY_TAG in v.message for v in failing)
    if any(v.outcome is Outcome.NEW for v in failing):
        lines.append(
            "  no history baseline yet: the runs of `pytest --ortperf` on its branch build it"
            if history
            else "  no baseline yet: run `pytest --ortperf --ortperf-update` to take one"
        )
    if any(v.outcome is Outcome.REGRESSED for v in failing):
        lines.append(
            "  if the change is intended, the history baseline follows once the runs of its "
            "window on the branch show it"
            if history
            else "  if the change is intended, refresh the baseline with --ortperf-update"
        )
    return "\n".join(lines)
