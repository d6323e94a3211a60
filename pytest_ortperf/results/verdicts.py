"""Verdicts: what the gate says about one metric (:class:`Verdict`), the verdicts of one
measurement (:class:`Judgement`), and a latency budget's verdict (:class:`SloVerdict`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pytest_ortperf.results.codec import Decoded


class Outcome(str, Enum):
    """What a verdict says about one metric. Members are declared in display order (most
    urgent first), which every report uses: see :attr:`rank`."""

    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"
    UNSTABLE = "unstable"
    """The measurement itself is not trustworthy (dependent blocks, most blocks preempted):
    it passes unless strict, and says what to do about the machine."""
    NEW = "new"
    IMPROVED = "improved"
    NOT_COMPARABLE = "not_comparable"
    OK = "ok"
    RECORDED = "recorded"
    """Not a verdict: a measurement that no gate judged (reports list it last)."""

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        """Position in display order (0 is shown first)."""
        return _OUTCOME_RANK[self]

    @property
    def needs_attention(self) -> bool:
        """Regressed, inconclusive or unstable: shown first, whether or not the test failed
        (inconclusive and unstable verdicts fail only under ``--ortperf-strict``)."""
        return self in (Outcome.REGRESSED, Outcome.INCONCLUSIVE, Outcome.UNSTABLE)


_OUTCOME_RANK = {outcome: i for i, outcome in enumerate(Outcome)}


@dataclass(frozen=True)
class Verdict(Decoded):
    """The judgement of one metric against its baseline.

    ``change`` is ``current / baseline - 1`` (``current`` is the baseline scaled by the
    estimated change, so the identity is exact); ``low``/``high`` bound the change at
    confidence ``1 - 2 * alpha``. ``p_value`` is the one-sided p-value in the direction of the
    estimate (None for structure and for verdicts without a test).
    """

    metric: str
    outcome: Outcome
    baseline: float
    current: float
    change: float
    low: float
    high: float
    threshold: float
    alpha: float
    p_value: float | None
    n: int
    message: str
    looks: int = 1
    """Tests at ``alpha`` the procedure that reached this verdict could have alarmed on (a
    confirmation that extends judges each of its looks at a share of the gate's alpha):
    the verdict's own false-alarm rate is at most ``alpha * looks``."""
    seconds: float | None = None
    """How long the gate measured for this verdict, from its first session pair to the
    verdict, extension and confirmation included (None: not measured through the gate,
    e.g. structure, or a latency run once under ``--ortperf-skip-unchanged``)."""
    pairs: int | None = None
    """The session pairs behind the verdict (the fresh ones alone where they gave it)."""

    @property
    def procedure_alpha(self) -> float:
        """At most how often the procedure behind this verdict alarms at no change."""
        return self.alpha * self.looks

    def failed(self, strict: bool = False) -> bool:
        """Regressed always fails; inconclusive, unstable and new only under ``strict``."""
        if self.outcome is Outcome.REGRESSED:
            return True
        if self.outcome in (Outcome.INCONCLUSIVE, Outcome.UNSTABLE, Outcome.NEW):
            return strict
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "outcome": self.outcome.value,
            "baseline": self.baseline,
            "current": self.current,
            "change": self.change,
            "low": self.low,
            "high": self.high,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "p_value": self.p_value,
            "n": self.n,
            "message": self.message,
            **({"looks": self.looks} if self.looks != 1 else {}),
            **({"seconds": self.seconds} if self.seconds is not None else {}),
            **({"pairs": self.pairs} if self.pairs is not None else {}),
        }


@dataclass(frozen=True)
class Judgement(Decoded):
    """The verdicts of one measurement (``test``, ``name``) of a gated run."""

    test: str
    name: str
    verdicts: tuple[Verdict, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "name": self.name,
            "verdicts": [v.to_dict() for v in self.verdicts],
        }


SLO_OUTCOMES = ("violated", "inconclusive", "met", "not_gated")
"""What a latency budget's verdict says (:mod:`pytest_ortperf.gating.slo`), most urgent
first; only ``violated`` fails a test."""


@dataclass(frozen=True)
class SloVerdict(Decoded):
    """A latency budget (``slo=``) judged on one figure: its quantile's ``estimate`` and
    distribution-free bounds ``low``/``high`` at ``confidence`` (NaN or infinite where the
    values are too few), against ``budget`` (seconds; calls per second, a minimum, when
    ``floor``). ``n`` values of ``unit`` (calls, blocks, windows, launches), ``over`` of
    them on the wrong side of the budget (``over_preempted`` of those preempted); ``more``:
    how many more, all within the budget, would decide an inconclusive one. ``machine``:
    the machine class whose budget applied."""

    figure: str
    outcome: str
    budget: float
    floor: bool
    estimate: float
    low: float
    high: float
    n: int
    unit: str
    over: int
    over_preempted: int
    more: int
    confidence: float
    machine: str
    message: str

    @property
    def headroom(self) -> float:
        """The share of the budget left at the estimate (0.25: a quarter to spare; below
        0: over budget); NaN where not gated."""
        if not (math.isfinite(self.budget) and math.isfinite(self.estimate)) or not self.budget:
            return math.nan
        if self.floor:
            return self.estimate / self.budget - 1.0
        return 1.0 - self.estimate / self.budget

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: a missing bound or estimate (NaN, infinite) is None, as PostgreSQL's
        JSON and strict readers take no NaN."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["headroom"] = self.headroom  # derived, for readers of the JSON
        return {
            k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()
        }
