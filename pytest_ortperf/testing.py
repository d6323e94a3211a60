"""Helpers for testing code that uses pytest-ortperf without depending on timing luck."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_ortperf.measuring.engine import (
    Call,
    Clock,
    Samples,
    StopRule,
    asks_stop_rule,
)

if TYPE_CHECKING:
    from pytest_ortperf.measuring.coldstart import Launch

__all__ = ["ScriptedEngine", "ScriptedLauncher"]

GATED_MIN_BLOCKS = 9
"""The fewest blocks of a gated measurement at the default alpha 0.01 (the plugin raises the
engine's ``min_blocks`` to ``gating.rules.min_blocks_for(alpha)``): a ScriptedEngine asks
its stop rule at the same rounds as the engine it stands in for."""


CONTROL_SECONDS = 1e-4
"""Seconds per call a ScriptedEngine gives a normalized measurement's control workload, in
every round: the target/control ratio then moves exactly as the scripted target does."""


def _no_time() -> int:
    return 0


T = TypeVar("T")


def _next(queue: list[T], what: str) -> T:
    """The next scripted item; the last one repeats."""
    if not queue:
        raise ValueError(f"ScriptedEngine has no {what} samples scripted")
    return queue.pop(0) if len(queue) > 1 else queue[0]


@dataclass
class _Script:
    """What an engine and its scaled copies share: the queues and the log."""

    measure: list[tuple[float, ...]]
    interleave: list[list[tuple[float, ...]]]
    preempted: list[int] = field(default_factory=list)
    log: list[object] = field(default_factory=list)
    stopped_at: list[int] = field(default_factory=list)
    watch_cpu: list[bool] = field(default_factory=list)


class ScriptedEngine:
    """A :class:`~pytest_ortperf.measuring.engine.TimingEngine` that runs each target once (so
    outputs are still computed) and returns scripted samples instead of timings.

    ``measure`` and ``interleave`` are queues of samples (seconds per call) consumed one per
    measurement; the last one repeats. A measurement the gate spreads over several session
    pairs (or a baseline over several runs) replays its one entry for each of them.
    Assign it to ``ortperf.engine`` in a test.
    ``preempted`` is a queue of preempted-block counts consumed the same way (none: 0),
    reported in :attr:`Samples.preempted` of every arm (when the measurement was asked to
    ``watch_cpu``, else 0); each measurement's ``watch_cpu`` lands in ``watch_cpu``. A
    normalized measurement (``measure`` with a ``control``) gets the scripted target
    samples and ``control_seconds`` in every round for the control workload.

    It behaves like the real engine where the gate relies on it: an interleaved measurement
    replays its rounds one by one and asks ``should_stop`` when the real engine would
    (:func:`~pytest_ortperf.measuring.engine.asks_stop_rule`), ending early when told to (the
    round count lands in ``stopped_at``); ``scaled(factor)`` returns an engine with
    ``budget_factor`` multiplied that shares the queues and the log. ``log`` records what
    was asked (``"measure"``, ``"interleave"``, ``("scaled", 2.0)``), so a test can check
    that a confirmation re-measure happened.
    """

    def __init__(
        self,
        *,
        measure: Iterable[Sequence[float]] = (),
        interleave: Iterable[Sequence[Sequence[float]]] = (),
        calls_per_block: int = 1,
        min_blocks: int = GATED_MIN_BLOCKS,
        preempted: Iterable[int] = (),
        control_seconds: float = CONTROL_SECONDS,
    ) -> None:
        self.control_seconds = control_seconds
        self._script = _Script(
            measure=[tuple(s) for s in measure],
            interleave=[[tuple(s) for s in arms] for arms in interleave],
            preempted=[int(n) for n in preempted],
        )
        self.calls_per_block = calls_per_block
        self.min_blocks = min_blocks
        self.budget_factor = 1.0
        self.clock: Clock = _no_time
        self._replay = False
        """A copy scaled down to a share of the budget measures one of several session
        pairs (or baseline runs) of one measurement: it takes one scripted entry and
        replays it for each of them."""
        self._held: dict[str, Any] = {}

    @property
    def log(self) -> list[object]:
        return self._script.log

    @property
    def stopped_at(self) -> list[int]:
        return self._script.stopped_at

    @property
    def watch_cpu(self) -> list[bool]:
        """The ``watch_cpu`` of each measurement, in order."""
        return self._script.watch_cpu

    def _samples(self, values: tuple[float, ...], watch_cpu: bool, preempted: int) -> Samples:
        return Samples(
            values, self.calls_per_block, preempted=preempted if watch_cpu else 0, watched=watch_cpu
        )

    def _take(self, queue: list[T], what: str) -> T:
        """The next scripted item, or the one this replaying copy holds."""
        if self._replay and what in self._held:
            return self._held[what]  # type: ignore[no-any-return]
        item = _next(queue, what)
        if self._replay:
            self._held[what] = item
        return item

    def _next_preempted(self, watch_cpu: bool) -> int:
        """Log ``watch_cpu`` and take the next scripted preempted count (0 if none)."""
        self.watch_cpu.append(watch_cpu)
        return self._take(self._script.preempted, "preempted") if self._script.preempted else 0

    def scaled(self, factor: float) -> ScriptedEngine:
        self.log.append(("scaled", factor))
        child = ScriptedEngine(
            calls_per_block=self.calls_per_block,
            min_blocks=self.min_blocks,
            control_seconds=self.control_seconds,
        )
        child._script = self._script
        child.budget_factor = self.budget_factor * factor
        child._replay = factor < 1.0
        return child

    def for_providers(self, providers: Sequence[str]) -> ScriptedEngine:
        """This engine: scripted samples have no warm-up."""
        return self

    def measure(
        self,
        call: Call,
        *,
        watch_cpu: bool = True,
        control: Call | None = None,
        should_stop: StopRule | None = None,
    ) -> Samples:
        call()
        values = self._take(self._script.measure, "measure")
        self.log.append("measure")
        preempted = self._next_preempted(watch_cpu)
        if control is None:
            return self._samples(values, watch_cpu, preempted)
        control()
        steady = (self.control_seconds,) * len(values)
        rounds = self._rounds([steady, values], should_stop)
        return dataclasses.replace(
            self._samples(values[:rounds], watch_cpu, preempted),
            control=self._samples(steady[:rounds], watch_cpu, preempted),
        )

    def _rounds(self, arms: Sequence[Sequence[float]], should_stop: StopRule | None) -> int:
        """Rounds replayed before ``should_stop`` ends them, asked when the engine would."""
        rounds = len(arms[0])
        if should_stop is not None:
            for done in range(1, rounds + 1):
                if asks_stop_rule(done, self.min_blocks) and should_stop(
                    [values[:done] for values in arms]
                ):
                    self.stopped_at.append(done)
                    return done
        return rounds

    def interleave(
        self,
        calls: Sequence[Call],
        *,
        should_stop: StopRule | None = None,
        watch_cpu: bool = True,
    ) -> list[Samples]:
        for call in calls:
            call()
        arms = self._take(self._script.interleave, "interleave")
        self.log.append("interleave")
        preempted = self._next_preempted(watch_cpu)
        if len(arms) != len(calls):
            raise ValueError(f"scripted {len(arms)} arms for {len(calls)} targets")
        if any(len(values) != len(arms[0]) for values in arms):
            raise ValueError(f"scripted arms differ in length: {[len(v) for v in arms]}")
        rounds = self._rounds(arms, should_stop)
        return [self._samples(values[:rounds], watch_cpu, preempted) for values in arms]


class ScriptedLauncher:
    """Stands in for :func:`pytest_ortperf.measuring.coldstart.launch` (set it as a recorder's
    ``cold_launcher``): starts no process and returns scripted figures instead.

    ``create`` maps a model's role (``"reference"``, ``"candidate"``, or ``"model"`` for
    ``ortperf.cold_start``) to the seconds its successive launches take to create the
    session (the last value repeats; the untimed warm-up launch takes the first value
    without using it up). ``first_run`` and ``new_shape`` are scripted alike; a role
    missing from ``first_run`` takes its ``create`` times, one missing from ``new_shape``
    has no new-shape figure. ``log`` lists the roles launched, in order."""

    def __init__(
        self,
        create: Mapping[str, Sequence[float]],
        first_run: Mapping[str, Sequence[float]] | None = None,
        new_shape: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        self._create = {k: list(v) for k, v in create.items()}
        self._first = {k: list(v) for k, v in (first_run or {}).items()}
        self._shape = {k: list(v) for k, v in (new_shape or {}).items()}
        self._seen: set[str] = set()
        self.log: list[str] = []

    def __call__(self, spec: Path, label: str, timeout: float) -> Launch:
        from pytest_ortperf.measuring.coldstart import Launch

        role = spec.name.removesuffix("-spec.json")
        if role not in self._create:
            raise ValueError(f"ScriptedLauncher has no times scripted for {role!r}")
        self.log.append(role)
        if role not in self._seen:  # the warm-up launch (or smoke mode's only one)
            self._seen.add(role)
            create = self._create[role][0]
            return Launch(create, create, None, 0.0)
        create = _next(self._create[role], "create")
        first = _next(self._first[role], "first_run") if role in self._first else create
        shape = _next(self._shape[role], "new_shape") if role in self._shape else None
        return Launch(create, first, shape, 0.0)
