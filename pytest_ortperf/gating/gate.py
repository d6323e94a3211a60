"""Gating as the recorder uses it: baseline entries of a test, verdicts, failure messages.

The statistics live in :mod:`pytest_ortperf.gating.rules` and the files in
:mod:`pytest_ortperf.gating.baseline`; this module ties them to test node ids and settings.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pytest_ortperf.gating.baseline import Baseline, BaselineError, baseline_path, load_baseline
from pytest_ortperf.gating.baseline_entries import entry_key, local_record, split_nodeid
from pytest_ortperf.gating.baseline_judge import judge_entry, ratio_baseline_of
from pytest_ortperf.gating.rules import (
    CHECK_PAIRS,
    RatioBaseline,
    decide_early,
    detectable_change,
    min_blocks_for,
    process_limit,
    ratio_baseline,
)
from pytest_ortperf.gating.settings import HISTORY_TAG, GateSettings
from pytest_ortperf.measuring.engine import Engine, EngineConfig, StopRule, TimingEngine
from pytest_ortperf.results import PROCESSES, Comparison, LatencyResult, Outcome, Verdict
from pytest_ortperf.units import format_change, format_interval

R = TypeVar("R", LatencyResult, Comparison)

UPDATE_BUDGET_FACTOR = 3.0
"""``--ortperf-update`` measures baselines with this many times the budget."""

FIGURE_ONLY_BUDGET = 0.25
"""The share of the budget a measurement gets where only its figure counts and no outcome
depends on its verdict: an unchanged latency (its figure goes to history,
:mod:`pytest_ortperf.recorder.beside`) and, in a test that fails already, a later
measurement's first one (:meth:`Gate.decide`'s ``brief``). A budget's ``slo=`` still gets
the blocks it needs (:func:`~pytest_ortperf.recorder.budgets.latency_blocks`). The messages
call it "a quarter of the budget"."""

BASELINE_RUNS = 30
"""Independent runs (each on fresh sessions) a baseline is taken as, sharing its budget:
their spread measures the between-run variance the gate allows for. A check's interval
carries that variance over these runs as well as over its own pairs, so with 10 it could
not get much narrower however long it measured, and a check near the threshold spent the
cap. With 30 at the same budget, such checks took 7% to 41% fewer budgets in the
simulations and were caught as often or more (within one check of 200), but for 389 of 400
against 399 where 3% of pairs read 7% off (docs, Performance figures)."""


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


CONFIRM_BUDGET_FACTOR = 1.0
"""A second measurement starts on this many times :data:`CHECK_PAIRS` fresh session
pairs, each with the same share of the budget as the first's, and measures on while its
verdict is undecided or a regression its fresh pairs alone do not show yet. With 6 fresh
pairs to start, every confirmed verdict spent at least three budgets; with 3, a gross
regression is confirmed in about two thirds of the time, at the same power and false
alarms in the simulations (docs, Performance figures)."""
EXTEND_BUDGETS = 5.0
"""An undecided measurement (:func:`undecided`: the first alone, the second pooled with
the first) adds session pairs until its verdict is clear or it has spent this many
budgets (15 pairs of its own: at most 30 pooled)."""
CONFIRM_LOOKS = 1 + round(CHECK_PAIRS * (EXTEND_BUDGETS - CONFIRM_BUDGET_FACTOR)) // CHECK_PAIRS
"""Looks a second measurement may take (at 3, 6, 9, 12 and 15 fresh pairs): at each, the
fresh pairs alone are judged at ``alpha / CONFIRM_LOOKS``, so that all of them together
alarm at most ``alpha``. The pooled pairs are judged at ``alpha``: they say how large the
change is and when it is decided, the fresh pairs alone guard against false alarms. With
the pooled pairs at ``alpha / CONFIRM_LOOKS`` too, a change near the threshold (+4% to +6%
at 5%) measured on for the wider interval: judged at ``alpha`` it takes 4% to 34% fewer
budgets in the simulations, with the same checks caught and no more false alarms (docs,
Performance figures)."""


DECIDED_WITHIN = 0.2
"""How near the threshold, as a share of it, a change past it may read: a verdict whose
estimate is past the threshold is decided once its interval's lower end is above
``threshold * (1 - DECIDED_WITHIN)`` (4% at 5%). Measuring on until the interval cleared
the threshold itself spent the cap on every change near it (a change of exactly the
threshold reads either side however long it is measured)."""
PASSES_WITHIN = 0.15
"""The same for a verdict whose estimate is within the threshold: decided once its
interval's upper end is below ``threshold * (1 + PASSES_WITHIN)`` (5.75% at 5%). Narrower
than :data:`DECIDED_WITHIN`, because a check that stops on a pass near the threshold
misses the slowdowns its own process offset hid, which more pairs often find (simulated
at a 0.5% process SD, +6% caught 88.0% against 85.6% with a fifth, 800 checks with the
same random numbers). Not narrower still: the 0.25% allowance for the process alone keeps
an interval at least +-0.7% wide at the confirmation's alpha, so with a tenth a pass
reading within about 0.2% of the threshold could never be decided, and a change of
exactly the threshold took 5.8 budgets (3.4 with 15%)."""


def undecided(verdict: Verdict) -> bool:
    """Whether more session pairs could change what ``verdict`` says: it is
    ``inconclusive``; or its interval reaches across the threshold on the side away from
    its estimate by more than :data:`DECIDED_WITHIN` of it (estimate past the threshold)
    or :data:`PASSES_WITHIN` (estimate within it), since an estimate near the threshold
    falls either side of it by chance; or it is ``unstable`` with its estimate past the
    threshold (a slowdown the machine's noise may be hiding)."""
    if verdict.metric == "structure":
        return False
    outcome = verdict.outcome
    if outcome is Outcome.INCONCLUSIVE:
        return True
    if outcome is Outcome.UNSTABLE and verdict.change > verdict.threshold:
        return True
    if outcome not in (Outcome.OK, Outcome.REGRESSED, Outcome.UNSTABLE):
        return False
    if verdict.change > verdict.threshold:
        return verdict.low < verdict.threshold * (1.0 - DECIDED_WITHIN)
    return verdict.high > verdict.threshold * (1.0 + PASSES_WITHIN)


@dataclass(frozen=True)
class Decision(Generic[R]):
    """What the gate decided about one measurement: the record it kept (after a second
    measurement, the first's pairs pooled with the fresh ones, or the fresh ones alone
    where their verdict is the answer: :func:`confirmed`), its verdicts, and the first
    measurement's verdicts when a second measurement replaced them."""

    record: R
    verdicts: list[Verdict]
    first: list[Verdict] | None = None
    detects: float | None = None
    """A baseline's smallest detectable slowdown (:func:`detects_of`), when one was taken."""

    @property
    def extra(self) -> dict[str, Any]:
        """What the recorded payload carries besides the record (the baseline entry keeps
        ``detects``)."""
        return {} if self.detects is None else {DETECTS: self.detects}


DETECTS = "detects"
"""Key of a baseline entry's smallest detectable slowdown (relative)."""


class BlindBaselineWarning(UserWarning):
    """A baseline too noisy to see a slowdown of its threshold, even after re-measuring."""


def detects_of(record: LatencyResult | Comparison, alpha: float) -> float | None:
    """The smallest slowdown a check against ``record`` taken as a baseline finds at
    ``alpha`` with 90% power (None: no ratio to judge, e.g. an absolute latency)."""
    data = record.to_dict()
    if data.get("kind") == "latency" and not data.get("control"):
        return None
    ratios = data.get("block_ratios")
    if not ratios:
        return None
    baseline = ratio_baseline(ratios, data.get("runs"), data.get(PROCESSES))
    return detectable_change(baseline, alpha=alpha, pairs=CHECK_PAIRS)


def blind_baseline_message(name: str, detects: float, threshold: float, runs: int) -> str:
    """What an update says of a baseline that cannot see its threshold."""
    return (
        f"baseline of {name!r} detects only slowdowns >= {detects:.1%} (threshold "
        f"{threshold:.1%}) after {runs} runs: the machine is too noisy for this threshold. "
        "Take the baseline on a quieter machine (no other jobs), raise the budget "
        "(@pytest.mark.ortperf(budget=...)) or the threshold; --ortperf-fail-blind makes "
        "this fail the update"
    )


class Gate:
    """Judges the measurements of one test against its module's baseline file.

    The procedure (docs, "How the gate decides"; :meth:`decide`): a first measurement over
    several session pairs, extended while undecided; a verdict that would fail the test, or
    one still undecided, is measured again on fresh pairs, pooled with the first and
    extended the same way, and a regression stands only where the fresh pairs alone read
    a significant slowdown at one of :data:`CONFIRM_LOOKS` looks, each judged at ``alpha /
    CONFIRM_LOOKS``: the whole procedure's false-alarm rate at no change is at most
    ``alpha``, whatever the first measurement's looks spent.
    """

    def __init__(
        self,
        settings: GateSettings,
        baselines: BaselineSource,
        environment: Callable[[], Mapping[str, Any]],
        history: Callable[[Mapping[str, Any]], Sequence[float] | None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.settings = settings
        self.baselines = baselines
        self.environment = environment
        self.history = history
        self.clock = clock
        """Seconds, for the time each verdict took (a fake one in tests)."""
        """Per-run medians of earlier runs of an absolute latency record on its
        fingerprint (None: no store to ask)."""

    def entry(self, nodeid: str, name: str) -> Mapping[str, Any] | None:
        """The stored entry; a broken baseline file fails the test with the file's error."""
        try:
            return self.baselines.entry(nodeid, name)
        except BaselineError as exc:
            raise GateFailure(f"ortperf baseline unusable: {exc}") from None

    def stop_rule(self, entry: Mapping[str, Any] | None) -> StopRule | None:
        """When one session pair of a measurement has said enough (see
        :func:`~pytest_ortperf.gating.rules.decide_early`). It may stop a pair on a clear
        regression only where a second measurement follows (``settings.confirm``): in the
        first measurement, fresh pairs must confirm it; in the second, at its sharper
        alpha, such a pair under no change is rare and is one of at least three whose mean
        must read a significant slowdown (the simulations count the procedure's false
        alarms with it). Stopping no slowed pair there had spent its pairs' whole budget
        on every regression, however gross."""
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
        )

    def decide(
        self,
        measure: Callable[[TimingEngine, StopRule | None, bool], R],
        engine: TimingEngine,
        entry: Mapping[str, Any] | None,
        merge: Callable[[Sequence[R]], R],
        *,
        brief: str = "",
    ) -> Decision[R]:
        """Measure with ``measure(engine, stop_rule, fresh)`` (``fresh``: on a newly created
        session pair), judge, extend what is undecided and confirm what would fail.
        ``brief``: why the first measurement alone is enough (the test already fails on
        another verdict): its :data:`CHECK_PAIRS` pairs sharing :data:`FIGURE_ONLY_BUDGET`
        of the budget, no more and no second measurement, and each timing verdict says so.

        Against a ratio baseline, a check spreads over :data:`CHECK_PAIRS` session pairs
        (the test's own, then fresh ones), each with its share of the budget, so the verdict
        holds the check's own between-pair spread. While the verdict is undecided
        (:func:`undecided`: inconclusive, or its interval reaches across the threshold by
        more than a margin) it adds pairs, up to :data:`EXTEND_BUDGETS` budgets. A verdict
        that would fail the test, or one still undecided there, is measured on
        :data:`CONFIRM_BUDGET_FACTOR` times the budget of fresh pairs more, extended the
        same way while the pooled verdict is undecided or a regression the fresh pairs
        alone do not show yet (at most :data:`EXTEND_BUDGETS` budgets more), and
        :func:`confirmed` decides: the pooled pairs say how large the
        change is, the fresh ones alone must show the slowdown. Each of the second
        measurement's :data:`CONFIRM_LOOKS` looks judges the fresh pairs alone at ``alpha /
        CONFIRM_LOOKS`` (the pooled ones at ``alpha``): a false alarm needs the fresh pairs
        alone to read a significant slowdown at one of them, so the procedure's
        false-alarm rate is at most ``alpha`` however many looks the first measurement
        took. Against a baseline whose processes read so far apart
        that a check's own process hides a slowdown of the threshold
        (:func:`~pytest_ortperf.gating.rules.process_limit`), neither measurement adds pairs
        beyond its first ones, only a verdict that would fail is measured a second time, and
        an undecided verdict says why.
        """
        started = self.clock()
        baseline = ratio_baseline_of(entry)
        if baseline is None:  # new, absolute, ...: nothing to pair against
            first = measure(engine, None, False)
            return Decision(first, self.timed(self.judge(first.to_dict(), entry), started, 1))
        hidden = self._hidden_by_processes(baseline, entry)
        per_pair = engine.scaled((FIGURE_ONLY_BUDGET if brief else 1.0) / CHECK_PAIRS)
        first_stop = self.stop_rule(entry)
        parts: list[R] = []
        record, verdicts = self._until_decided(
            measure, per_pair, first_stop, self.judge, entry, merge, parts, step=1,
            most=CHECK_PAIRS if hidden or brief else None,
        )  # fmt: skip
        if brief:
            note = (
                "; a first measurement only (a quarter of the budget), not measured further: "
                + brief
            )
            return Decision(record, self.timed(_told(verdicts, note), started, len(parts)))
        settings = self.settings
        # At the cap, still undecided: measured again, unless the processes hide it.
        unsettled = any(undecided(v) for v in verdicts) and not hidden
        if not (settings.confirm and (self._would_fail(verdicts) or unsettled)):
            return Decision(record, self.timed(_noted(verdicts, hidden), started, len(parts)))
        sharper = self.at_alpha(settings.alpha / CONFIRM_LOOKS)
        confirm = sharper.stop_rule(entry)
        second = engine.scaled(1.0 / CHECK_PAIRS)  # a measurement of its own
        fresh = [
            measure(second, confirm, True)
            for _ in range(round(CHECK_PAIRS * CONFIRM_BUDGET_FACTOR))
        ]

        def unshown(verdicts: list[Verdict]) -> bool:
            """A pooled regression the fresh pairs alone do not show (yet)."""
            if not any(v.outcome is Outcome.REGRESSED for v in verdicts):
                return False
            alone = sharper.judge(merge(fresh).to_dict(), entry)
            return not confirmed(verdicts, alone, len(fresh))[1]

        pooled, together = self._until_decided(
            measure, second, confirm, self.judge, entry, merge, fresh, step=CHECK_PAIRS,
            before=parts, most=len(fresh) if hidden else None, unsettled=unshown,
        )  # fmt: skip
        alone = merge(fresh)
        final, shown = confirmed(together, sharper.judge(alone.to_dict(), entry), len(fresh))
        kept = pooled if shown else alone
        final = _looked(_noted(final, hidden), settings.alpha)
        pairs = len(parts) + len(fresh) if shown else len(fresh)
        return Decision(kept, self.timed(final, started, pairs), verdicts)

    def _until_decided(
        self,
        measure: Callable[[TimingEngine, StopRule | None, bool], R],
        per_pair: TimingEngine,
        stop: StopRule | None,
        judge: Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[Verdict]],
        entry: Mapping[str, Any] | None,
        merge: Callable[[Sequence[R]], R],
        parts: list[R],
        *,
        step: int,
        before: Sequence[R] = (),
        most: int | None = None,
        unsettled: Callable[[list[Verdict]], bool] | None = None,
    ) -> tuple[R, list[Verdict]]:
        """``parts`` (none: the first pair is the test's own sessions, every other one
        fresh) extended to at least :data:`CHECK_PAIRS` session pairs, then by ``step``
        pairs while ``judge`` finds ``before`` and ``parts`` together :func:`undecided` (or
        ``unsettled`` says their verdicts are not settled yet), up to ``most`` pairs
        (default: :data:`EXTEND_BUDGETS` budgets) of ``parts``: the merged record and its
        verdicts (``parts`` grows in place)."""
        most = round(CHECK_PAIRS * EXTEND_BUDGETS) if most is None else most
        while True:
            while len(parts) < CHECK_PAIRS:
                parts.append(measure(per_pair, stop, bool(parts)))
            record = merge(list(before) + parts)
            verdicts = judge(record.to_dict(), entry)
            settled = not any(undecided(v) for v in verdicts) and not (
                unsettled is not None and unsettled(verdicts)
            )
            if len(parts) >= most or settled:
                return record, verdicts
            parts.extend(measure(per_pair, stop, True) for _ in range(step))

    def _hidden_by_processes(self, baseline: RatioBaseline, entry: Mapping[str, Any] | None) -> str:
        """Why more session pairs cannot settle a verdict against ``baseline``, whose
        processes read so far apart that a check's own process could hide a slowdown of
        the threshold (:func:`process_limit`); empty when they can."""
        if not baseline.measured_process:
            return ""
        limit = process_limit(baseline, alpha=self.settings.alpha)
        if limit <= self.threshold_of(entry):
            return ""
        return (
            f"; not measured further: the baseline's {baseline.processes} processes read "
            f"{math.sqrt(baseline.process):.1%} apart (standard deviation), so a check's own "
            f"process hides slowdowns below {limit:.1%} however long it measures; take the "
            "baseline again on a quieter machine (--ortperf-update)"
        )

    def threshold_of(self, entry: Mapping[str, Any] | None) -> float:
        """The threshold a measurement against ``entry`` is judged at: a latency's
        (``--ortperf-latency-threshold``) where set, else the run's."""
        latency = entry is not None and entry.get("kind") == "latency"
        return self.settings.of_latencies if latency else self.settings.threshold

    def at_alpha(self, alpha: float) -> Gate:
        """This gate (its kind, sources and state shared) judging at ``alpha``."""
        sharper = copy.copy(self)
        sharper.settings = dataclasses.replace(self.settings, alpha=alpha)
        return sharper

    def timed(self, verdicts: list[Verdict], started: float, pairs: int) -> list[Verdict]:
        """Each timing verdict with the time its measurement took since ``started`` (a
        reading of :attr:`clock`) and the session pairs behind it (:attr:`Verdict.seconds`,
        :attr:`Verdict.pairs`), said in its message."""
        seconds = self.clock() - started
        took = f"; measured in {seconds:.1f} s over {pairs} session pair" + (
            "s" if pairs != 1 else ""
        )
        return _told(verdicts, took, seconds=seconds, pairs=pairs)

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


def _told(verdicts: Sequence[Verdict], text: str, **fields: Any) -> list[Verdict]:
    """``verdicts``, each timing one (not ``structure``) with ``text`` added to its message
    (and ``fields`` set)."""
    return [
        v if v.metric == "structure" else dataclasses.replace(v, message=v.message + text, **fields)
        for v in verdicts
    ]


def _noted(verdicts: Sequence[Verdict], note: str) -> list[Verdict]:
    """``verdicts``, each :func:`undecided` one with ``note`` (why it was not measured
    further) added to its message."""
    return [
        dataclasses.replace(v, message=v.message + note) if note and undecided(v) else v
        for v in verdicts
    ]


def _looked(verdicts: Sequence[Verdict], alpha: float) -> list[Verdict]:
    """A second measurement's ``verdicts`` (the gate's ``alpha``), each one its fresh pairs
    alone gave (:func:`confirmed`: judged at ``alpha / CONFIRM_LOOKS`` at each look) with
    its ``looks``, so that its own false-alarm rate reads ``alpha``; the pooled ones were
    judged at ``alpha`` itself."""
    return [
        dataclasses.replace(v, looks=CONFIRM_LOOKS)
        if v.metric != "structure" and v.alpha < alpha
        else v
        for v in verdicts
    ]


def confirmed(
    pooled: Sequence[Verdict], fresh: Sequence[Verdict], pairs: int
) -> tuple[list[Verdict], bool]:
    """The verdicts of a second measurement (:meth:`Gate.decide`) and whether they are the
    pooled ones. The first measurement's session pairs and the ``pairs`` fresh ones judged
    together say how large the change is; each verdict adds what the fresh pairs alone
    read. A pooled regression that is not a significant slowdown of the fresh pairs alone
    (their lower bound not above 0) gives way to their own verdict: a slowdown the first
    measurement read by chance (an odd session pair) is not confirmed. False (the fresh
    pairs' record is the one to keep) when any verdict gave way."""
    alone = {v.metric: v for v in fresh if v.metric != "structure"}
    verdicts: list[Verdict] = []
    shown = True
    for verdict in pooled:
        own = alone.get(verdict.metric)
        if verdict.metric == "structure" or own is None:
            verdicts.append(verdict)
        elif verdict.outcome is Outcome.REGRESSED and not own.low > 0:
            shown = False
            note = (
                f"; pooled with the first measurement it read {format_change(verdict.change)} "
                f"{format_interval(verdict.low, verdict.high)} -> regressed, a slowdown its "
                f"{pairs} fresh session pairs alone do not show"
            )
            verdicts.append(dataclasses.replace(own, message=own.message + note))
        else:
            note = (
                f"; the first measurement pooled with {pairs} fresh session pairs, which "
                f"alone read {format_change(own.change)} {format_interval(own.low, own.high)}"
            )
            verdicts.append(dataclasses.replace(verdict, message=verdict.message + note))
    return verdicts, shown


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
    return (
        "the verdict of a second measurement on fresh session pairs, pooled with the first "
        "where they confirm it; the first alone read " + "; ".join(parts)
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
