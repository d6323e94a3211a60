"""Suite level: how many timing verdicts a run gated, the chance of a false alarm anywhere
among them, and the family-wise control (``--ortperf-family-alpha``) that bounds it.

Each gated verdict's procedure is held to its own alpha (:class:`~pytest_ortperf.gating.gate.Gate`):
``n`` verdicts at 0.01 alarm somewhere ``1 - 0.99**n`` of the time when they are
independent (39% for 50), and at most ``0.01 * n`` whatever their dependence (the union
bound). The family-wise control splits a run-wide alpha ``A`` evenly over the verdicts the
run plans to gate (Bonferroni): each gets ``A / planned``, so the union bound is at most
``A`` with no assumption on how the tests' noise is related.

Bonferroni, not Holm: pytest reports each test as it ends, so a verdict cannot wait for the
others' p-values, and Holm's step-down needs them all. A streaming form (a test gets
``A / (planned - regressions so far)``) is valid only while the tests' noise is independent
and makes a verdict depend on the order tests ran in; it gains power only after a true
regression. The even split holds under any dependence and gives every test the same alpha,
known before it runs.

Pure logic, no I/O: the plugin counts the planned verdicts at collection.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ortperf.gating.baseline_entries import entry_test
from pytest_ortperf.gating.baseline_schema import RECIPE
from pytest_ortperf.results import Judgement, Outcome, Verdict

TIMING_KINDS = ("compare", "latency")
"""Baseline entry kinds whose verdict is a test at alpha (a memory entry's is a tolerance)."""


@dataclass(frozen=True)
class Family:
    """A run-wide ``alpha`` split evenly over the ``planned`` timing verdicts."""

    alpha: float
    planned: int

    @property
    def share(self) -> float:
        """Each verdict's alpha: ``alpha / planned``."""
        return self.alpha / max(self.planned, 1)

    def alpha_of(self, alpha: float) -> float:
        """The alpha a verdict is gated at: its own (run or marker), lowered to the share.
        A family never raises it: a small suite keeps its per-test alpha."""
        return min(alpha, self.share)

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "planned": self.planned, "per_verdict": self.share}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Family:
        return cls(alpha=float(data["alpha"]), planned=int(data["planned"]))


def planned_verdicts(entries_per_test: Iterable[int]) -> int:
    """The timing verdicts a run plans to gate: per test that measures, its timing baseline
    entries, at least one (a test without an entry yet still gates in-run comparisons)."""
    return sum(max(int(n), 1) for n in entries_per_test)


def timing_entries(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """How many timing verdicts the timing entries of a baseline file's ``entries`` plan,
    per test (the id inside its module): one each, and a second for a compare that kept
    its candidate's recipe (whose candidate, once changed, is also judged beside the
    baseline's candidate: counted whether or not it changed, which can only make each
    verdict's share smaller)."""
    found: dict[str, int] = {}
    for key, entry in entries.items():
        kind = entry.get("kind")
        if kind in TIMING_KINDS:
            test = entry_test(key, entry)
            beside = kind == "compare" and entry.get(RECIPE) is not None
            found[test] = found.get(test, 0) + 1 + beside
    return found


def counts(verdict: Verdict) -> bool:
    """Whether a verdict is a gated test at its alpha: a timing verdict with a change,
    judged against a baseline (not new, not incomparable)."""
    return (
        verdict.metric != "structure"
        and math.isfinite(verdict.change)
        and math.isfinite(verdict.alpha)
        and verdict.alpha > 0
        and verdict.outcome not in (Outcome.NEW, Outcome.NOT_COMPARABLE)
    )


@dataclass(frozen=True)
class SuiteRate:
    """The run's gated verdicts, by their alphas, and what they add up to."""

    alphas: tuple[float, ...]
    family: Family | None = None
    seconds: float | None = None
    """How long the gate measured for these verdicts in all (:attr:`Verdict.seconds`;
    None: none says)."""

    @property
    def gated(self) -> int:
        return len(self.alphas)

    @property
    def independent(self) -> float:
        """A false alarm anywhere, when the verdicts' noise is independent:
        ``1 - prod(1 - alpha_i)``."""
        return 1.0 - math.prod(1.0 - a for a in self.alphas)

    @property
    def bound(self) -> float:
        """A false alarm anywhere, whatever the dependence (union bound): ``sum(alpha_i)``,
        at most 1."""
        return min(math.fsum(self.alphas), 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gated": self.gated,
            "alpha_max": max(self.alphas, default=None),
            "alpha_min": min(self.alphas, default=None),
            "false_alarm_if_independent": self.independent,
            "false_alarm_bound": self.bound,
            "family": None if self.family is None else self.family.to_dict(),
            "measuring_s": self.seconds,
        }

    def text(self) -> str:
        """One sentence for the terminal and the reports."""
        n, low, high = self.gated, min(self.alphas), max(self.alphas)
        if n == 1:
            head = f"1 timing verdict gated at alpha {high:.3g}"
        else:
            less = " or less" if low < high else ""
            head = f"{n} timing verdicts gated at alpha {high:.3g}{less} each"
        family = self.family
        if family is not None:
            planned = f"{family.planned} planned verdict{'s' if family.planned != 1 else ''}"
            head += f" (family alpha {family.alpha:g} over {planned})"
        if n == 1:
            line = f"{head}: a false alarm in this run is at most {self.bound:.1%} likely"
        else:
            line = (
                f"{head}: a false alarm anywhere in this run is {self.independent:.1%} likely "
                f"if their noise is independent, at most {self.bound:.1%} in any case"
            )
        if family is not None and self.bound > family.alpha * (1 + 1e-9):
            line += (
                ", above the family alpha: the run gated more timing verdicts than its "
                "baseline entries planned for"
            )
        elif family is None and n > 1:
            line += " (--ortperf-family-alpha bounds it)"
        if self.seconds is not None:
            line += f"; measured in {self.seconds:.1f} s in all"
        return line


def suite_rate(verdicts: Iterable[Verdict], family: Family | None = None) -> SuiteRate | None:
    """The suite-level figures of a run's verdicts (None: nothing was gated)."""
    counted = [v for v in verdicts if counts(v)]
    if not counted:
        return None
    timed = [v.seconds for v in counted if v.seconds is not None]
    seconds = math.fsum(timed) if timed else None
    return SuiteRate(tuple(v.procedure_alpha for v in counted), family, seconds)


def judged_verdicts(judgements: Sequence[Judgement]) -> list[Verdict]:
    """Every verdict of ``judgements``; a later judgement of a measurement replaces an
    earlier one (as the reports show them)."""
    latest = {(j.test, j.name): j.verdicts for j in judgements}
    return [v for verdicts in latest.values() for v in verdicts]
