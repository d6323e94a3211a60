"""What one test's measurements leave behind: names, ``user_properties`` and failures.

Every failure message of a measurement is built here, and kept until the test body has
run (so a failing measurement does not keep the next ones from being measured and stored).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_ortperf.gating.gate import failure_message
from pytest_ortperf.results import (
    ATTRIBUTION_PROPERTY,
    GATED,
    USER_PROPERTY,
    VERDICTS_PROPERTY,
    Judgement,
    Record,
    Verdict,
)

if TYPE_CHECKING:
    from pytest_ortperf.results import SloVerdict


class Recording:
    """The names, records and deferred failures of one test, and its ``user_properties``
    (the records reach the controller, the store and the reports through them)."""

    def __init__(self, test: str, measured: bool, user_properties: list[tuple[str, object]]):
        self.test = test
        self.measured = measured
        self.records: list[Record] = []
        self.failures: list[str] = []
        """Failures of this test, raised together once the test body has run."""
        self._failed_on: list[str] = []
        """What each failure is, in a few words (:meth:`fails_already`)."""
        self._user_properties = user_properties
        self._names: set[str] = set()

    def claim(self, name: str, *, gated: bool) -> None:
        """Reserve a measurement name in this test (every kind shares the namespace;
        ``gated``: the name keys a baseline entry)."""
        if name in self._names:
            what = "latency/compare" if gated else "measurement"
            keyed = " (baseline entries are keyed by it)" if gated else ""
            raise ValueError(
                f"measurement name {name!r} is already used in this test: give each "
                f"{what} its own name={keyed}"
            )
        self._names.add(name)

    def record(
        self,
        record: Record,
        *,
        gated: bool = False,
        verdicts: Sequence[Verdict] = (),
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Keep ``record`` and, when measured, attach it (with ``extra`` fields) and its
        ``verdicts`` to the test."""
        self.records.append(record)
        if self.measured:
            payload = record.to_dict()
            if gated:
                payload[GATED] = True
            payload.update(extra or {})
            self._user_properties.append((USER_PROPERTY, payload))
            if verdicts:
                judgement = Judgement(record.test, record.name, tuple(verdicts))
                self._user_properties.append((VERDICTS_PROPERTY, judgement.to_dict()))

    def attach(self, key: str, value: object) -> None:
        """Attach one more property to the test (a profile's per-op summary)."""
        self._user_properties.append((key, value))

    # ----------------------------------------------------------------------- failures

    def gate_failed(
        self,
        name: str,
        failing: Sequence[Verdict],
        verdicts: Sequence[Verdict],
        first: Sequence[Verdict] | None = None,
        attribution: Callable[[], list[str]] | None = None,
    ) -> None:
        """A measurement failed its gate: every verdict, the failing ones first; with an
        ``attribution`` (asked only when a timing verdict fails), the lines that say
        where the time went, also attached to the test."""
        message = failure_message(name, failing, verdicts, first)
        metrics = ", ".join(dict.fromkeys(v.metric for v in failing))
        self._failed_on.append(f"{name!r} {metrics}")
        if attribution is not None and any(v.metric != "structure" for v in failing):
            lines = attribution()
            message += "\n" + "\n".join(lines)
            self.attach(ATTRIBUTION_PROPERTY, {"test": self.test, "name": name, "lines": lines})
        self.failures.append(message)

    def tail_failed(self, name: str, failing: Sequence[Verdict]) -> None:
        """A single-call measurement failed its tail rule."""
        lines = [f"ortperf: {name!r} failed its tail rule"]
        lines += [f"  FAIL {v.metric}: {v.message}" for v in failing]
        self.failures.append("\n".join(lines))
        self._failed_on.append(f"{name!r} tail")

    def budgets_failed(self, name: str, verdicts: Sequence[SloVerdict], *, strict: bool) -> None:
        """A measurement's latency budgets, where one is violated (or, ``strict``, not
        decided)."""
        from pytest_ortperf.gating.slo import failure_message as budget_message

        message = budget_message(name, verdicts, strict=strict)
        if message is not None:
            self.failures.append(message)
            self._failed_on.append(f"{name!r} budgets")

    def fails_already(self) -> str:
        """Why this test fails already, in a few words (empty while it does not): a later
        gated measurement cannot change its outcome, so it takes a first measurement only
        (:meth:`~pytest_ortperf.gating.gate.Gate.decide`'s ``brief``)."""
        if not self._failed_on:
            return ""
        return f"the test already fails on {'; '.join(self._failed_on)}"

    def blind_baseline(self, message: str) -> None:
        """A baseline too noisy to see its threshold (``--ortperf-fail-blind``)."""
        self.failures.append(f"ortperf: {message}")
