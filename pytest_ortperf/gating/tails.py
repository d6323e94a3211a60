"""The tail rule: is a candidate's quantile of single calls (p99) slower than its reference's?

The statistic is the ratio of the two arms' ``q`` quantiles of single calls measured
interleaved in the same run (``ortperf.per_call(candidate, feeds, reference=...)``), so
machine-wide drift cancels as it does for the gate's block ratios. Single calls are not
independent (a burst of slow calls shares a cause), so the interval comes from a *paired
round bootstrap*: whole rounds are resampled with replacement, the same rounds for both
arms (they ran side by side), and the quantile ratio is recomputed on each resample; the
interval is the resamples' percentile interval at confidence ``1 - 2 * alpha``. No
distribution is assumed, and dependence within a round is kept.

The change is ``ratio / expected - 1`` (``expected`` 1.0: "no slower than the reference";
a baseline's ratio to judge drift against a stored run). Outcomes, as the gate's ratio rule
(:func:`pytest_ortperf.gating.rules.judge_ratio`): regressed when the change exceeds the
``threshold`` and the interval's lower bound is above 0; improved symmetrically;
inconclusive when beyond the threshold but not significant, when the interval reaches past
twice the threshold, or when the data cannot carry the quantile (fewer than
:data:`MIN_ROUNDS` rounds, or fewer than :data:`~pytest_ortperf.results.MIN_TAIL_CALLS`
calls beyond it); ok otherwise. ``p_value`` is the bootstrap's one-sided share of
resamples on the other side of ``expected``.

Pure: no I/O, no clock, no onnxruntime; the resampling is seeded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_ortperf.gating.settings import DEFAULT_ALPHA
from pytest_ortperf.results import MIN_TAIL_CALLS, Outcome, Verdict
from pytest_ortperf.stats import FloatArray
from pytest_ortperf.units import format_change, format_confidence, format_interval, format_ratio

MIN_ROUNDS = 10
"""Fewest paired rounds the bootstrap resamples; fewer make the verdict inconclusive."""

RESAMPLES = 1000
"""Bootstrap resamples of a verdict."""

Rounds = Sequence[Sequence[float] | FloatArray]
"""Single-call times (seconds) of one arm, one sequence per round."""


@dataclass(frozen=True)
class TailRatio:
    """Candidate over reference ``q`` quantile, with its bootstrap interval and the share
    of resamples at or below ``expected`` (``p_below``) and at or above it
    (``p_above``)."""

    q: float
    ratio: float
    low: float
    high: float
    p_below: float
    p_above: float
    rounds: int
    calls: tuple[int, int]


def quantile_label(q: float) -> str:
    """``p99`` for 0.99, ``p99.9`` for 0.999."""
    return f"p{q * 100:g}"


def check_tail(q: float, threshold: float, alpha: float) -> None:
    """Raise ``ValueError`` naming ``q``, ``threshold`` or ``alpha`` when out of range (so
    a measurement can refuse them before it starts)."""
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 < q < 1.0:
        raise ValueError(f"quantile q must be a number in (0, 1) such as 0.99, got {q!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ValueError(f"threshold must be a positive fraction such as 0.1, got {threshold!r}")
    if not (threshold > 0 and math.isfinite(threshold)):
        raise ValueError(f"threshold must be positive and finite, got {threshold!r}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")


def calls_for(q: float) -> int:
    """Fewest calls per arm that leave :data:`MIN_TAIL_CALLS` beyond the ``q`` quantile
    (1000 for p99, 10000 for p99.9), as :func:`judge_tail` counts them."""
    need = max(math.ceil(MIN_TAIL_CALLS / (1.0 - q)), 1)
    while int(need * (1.0 - q)) < MIN_TAIL_CALLS:  # floating point: 1 - 0.9 < 0.1
        need += 1
    return need


def _arrays(reference: Rounds, candidate: Rounds) -> tuple[list[FloatArray], list[FloatArray]]:
    if len(reference) != len(candidate):
        raise ValueError(
            f"paired rounds needed: reference has {len(reference)}, candidate {len(candidate)}"
        )
    ref = [np.asarray(r, dtype=np.float64) for r in reference]
    cand = [np.asarray(c, dtype=np.float64) for c in candidate]
    for what, arm in (("reference", ref), ("candidate", cand)):
        if any(a.size == 0 for a in arm):
            raise ValueError(f"{what} has an empty round")
        if any(not np.all(np.isfinite(a)) or np.any(a < 0) for a in arm):
            raise ValueError(f"{what} has a negative or non-finite call time")
    return ref, cand


def _pooler(arm: list[FloatArray]) -> Callable[[Any, float], float]:
    """The pooled ``q`` quantile of the rounds ``picks`` (rows of one array when the
    rounds are all of one size, as the measurement makes them)."""
    if len({a.size for a in arm}) == 1:
        table = np.stack(arm)
        return lambda picks, q: float(np.quantile(table[picks].ravel(), q))
    return lambda picks, q: float(np.quantile(np.concatenate([arm[i] for i in picks]), q))


def tail_ratio(
    reference: Rounds,
    candidate: Rounds,
    q: float = 0.99,
    *,
    alpha: float = DEFAULT_ALPHA,
    expected: float = 1.0,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> TailRatio:
    """The ratio of the ``q`` quantiles candidate/reference of paired rounds, with its
    paired round-bootstrap interval at confidence ``1 - 2 * alpha``."""
    ref, cand = _arrays(reference, candidate)
    if not ref:
        raise ValueError("no rounds to compare")
    all_ref, all_cand = np.concatenate(ref), np.concatenate(cand)
    ref_q = float(np.quantile(all_ref, q))
    ratio = float(np.quantile(all_cand, q)) / ref_q if ref_q > 0 else math.inf
    rng = np.random.default_rng(seed)
    n = len(ref)
    ref_at, cand_at = _pooler(ref), _pooler(cand)
    ratios = np.empty(resamples)
    for b in range(resamples):
        picks = rng.integers(0, n, n)
        r = ref_at(picks, q)
        ratios[b] = cand_at(picks, q) / r if r > 0 else math.inf
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return TailRatio(
        q=q,
        ratio=ratio,
        low=float(low),
        high=float(high),
        p_below=float(np.mean(ratios <= expected)),
        p_above=float(np.mean(ratios >= expected)),
        rounds=n,
        calls=(int(all_ref.size), int(all_cand.size)),
    )


def judge_tail(
    reference: Rounds,
    candidate: Rounds,
    q: float = 0.99,
    *,
    threshold: float = 0.10,
    alpha: float = DEFAULT_ALPHA,
    expected: float = 1.0,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Verdict:
    """The verdict on the candidate's ``q`` quantile against the reference's (module
    docstring). Metric ``p99`` (for ``q=0.99``); ``baseline`` is ``expected``,
    ``current`` the ratio."""
    check_tail(q, threshold, alpha)
    if not (expected > 0 and math.isfinite(expected)):
        raise ValueError(f"expected ratio must be positive and finite, got {expected}")
    metric = quantile_label(q)
    ref, cand = _arrays(reference, candidate)
    calls = min(sum(a.size for a in ref), sum(a.size for a in cand))
    beyond = int(calls * (1.0 - q))
    if len(ref) < MIN_ROUNDS or beyond < MIN_TAIL_CALLS:
        need = calls_for(q)
        why = (
            f"{len(ref)} rounds (the rule needs {MIN_ROUNDS})"
            if len(ref) < MIN_ROUNDS
            else f"{calls} calls per arm leave {beyond} beyond the {metric} "
            f"(needs {MIN_TAIL_CALLS}: {need} calls)"
        )
        return Verdict(
            metric=metric, outcome=Outcome.INCONCLUSIVE, baseline=expected, current=math.nan,
            change=math.nan, low=math.nan, high=math.nan, threshold=threshold, alpha=alpha,
            p_value=None, n=len(ref),
            message=f"{metric} ratio not judged: {why} -> inconclusive",
        )  # fmt: skip
    est = tail_ratio(
        reference, candidate, q, alpha=alpha, expected=expected, resamples=resamples, seed=seed
    )
    change = est.ratio / expected - 1.0
    low, high = est.low / expected - 1.0, est.high / expected - 1.0
    why = ""
    if change > threshold:
        outcome = Outcome.REGRESSED if low > 0 else Outcome.INCONCLUSIVE
        why = "" if low > 0 else "slower but not significant"
    elif change < -threshold:
        outcome = Outcome.IMPROVED if high < 0 else Outcome.INCONCLUSIVE
        why = "" if high < 0 else "faster but not significant"
    elif high > 2 * threshold:
        outcome, why = Outcome.INCONCLUSIVE, "interval reaches past twice the threshold"
    else:
        outcome = Outcome.OK
    p = est.p_below if change >= 0 else est.p_above
    message = (
        f"{metric} ratio candidate/reference {format_ratio(est.ratio)} vs expected "
        f"{format_ratio(expected)}: {format_change(change)} {format_interval(low, high)} "
        f"{format_confidence(1 - 2 * alpha)} (paired round bootstrap), threshold "
        f"{threshold * 100:g}%, p={p:.2g}, {est.rounds} rounds, {est.calls[1]} calls "
        f"-> {outcome.value}" + (f" ({why})" if why else "")
    )
    return Verdict(
        metric=metric,
        outcome=outcome,
        baseline=expected,
        current=est.ratio,
        change=change,
        low=low,
        high=high,
        threshold=threshold,
        alpha=alpha,
        p_value=p,
        n=est.rounds,
        message=message,
    )
