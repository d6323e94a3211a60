"""Helpers for testing code that uses pytest-ortperf without depending on timing luck."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_ortperf.measure import Call, Samples, StopRule


class ScriptedEngine:
    """Stands in for :class:`~pytest_ortperf.measure.Engine`: runs each target once (so
    outputs are still computed) and returns scripted samples instead of timings.

    ``measure`` and ``interleave`` are queues of samples (seconds per call) consumed one per
    measurement; the last one repeats. Assign it to ``ortperf.engine`` in a test. ``log``
    records what was asked (``"measure"``, ``"interleave"``, ``("scaled", 2.0)``), so a test
    can check that a confirmation re-measure happened.
    """

    def __init__(
        self,
        *,
        measure: Iterable[Sequence[float]] = (),
        interleave: Iterable[Sequence[Sequence[float]]] = (),
        calls_per_block: int = 1,
    ) -> None:
        self._measure = [tuple(s) for s in measure]
        self._interleave = [[tuple(s) for s in arms] for arms in interleave]
        self.calls_per_block = calls_per_block
        self.log: list[object] = []

    @staticmethod
    def clock() -> int:
        return 0

    def scaled(self, factor: float) -> ScriptedEngine:
        self.log.append(("scaled", factor))
        return self

    def measure(self, call: Call) -> Samples:
        call()
        self.log.append("measure")
        values = self._measure.pop(0) if len(self._measure) > 1 else self._measure[0]
        return Samples(values, self.calls_per_block)

    def interleave(
        self, calls: Sequence[Call], *, should_stop: StopRule | None = None
    ) -> list[Samples]:
        for call in calls:
            call()
        self.log.append("interleave")
        arms = self._interleave.pop(0) if len(self._interleave) > 1 else self._interleave[0]
        if len(arms) != len(calls):
            raise ValueError(f"scripted {len(arms)} arms for {len(calls)} targets")
        return [Samples(values, self.calls_per_block) for values in arms]
