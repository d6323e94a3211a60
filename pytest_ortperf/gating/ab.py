"""Pure rules of an A/B without baseline: is B slower than A, and which fusions changed?

An upgrade gate judges one interleaved measurement of A (say onnxruntime 1.31.1) and B
(1.32.0) on its own: "B may not be slower than A by more than the threshold". The rule is
:func:`~pytest_ortperf.gating.rules.judge_ratio` against a ratio of exactly 1 known without
error, so the interval carries the run's own sampling error (widened for dependent blocks)
and one between-run deviation of :data:`~pytest_ortperf.gating.rules.BETWEEN_RUN_UNKNOWN`
(1%): the spread of an A/B from one pair of processes to the next, which one run cannot
see. Everything here is pure: no I/O, no clock, no onnxruntime.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from pytest_ortperf.gating.rules import (
    RatioBaseline,
    RatioTest,
    _classify,
    _positive,
    _verdict,
    judge_ratio,
)
from pytest_ortperf.gating.settings import DEFAULT_ALPHA
from pytest_ortperf.gating.structure import is_fused_op
from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.stats import RunEstimate, run_estimate
from pytest_ortperf.units import format_change, format_confidence, format_interval, format_ratio

AB_METRIC = "ratio"
"""The metric an A/B verdict is reported under (reports show it as a ratio)."""


def judge_ab(
    block_ratios: Sequence[float],
    *,
    threshold: float = 0.05,
    alpha: float = DEFAULT_ALPHA,
    a: str = "A",
    b: str = "B",
) -> Verdict:
    """The verdict on paired block ratios B/A: ``regressed`` when B is slower than A by
    more than ``threshold`` with significance ``alpha`` (one-sided), ``improved``
    symmetrically, ``inconclusive`` or ``unstable`` as :func:`judge_ratio` says, else
    ``ok``. ``a`` and ``b`` name the arms in the message."""
    verdict = judge_ratio(block_ratios, 1.0, threshold=threshold, alpha=alpha, metric=AB_METRIC)
    why = ""
    if verdict.outcome in (Outcome.INCONCLUSIVE, Outcome.UNSTABLE) and "(" in verdict.message:
        why = " (" + verdict.message.split(f"-> {verdict.outcome.value} (", 1)[-1]
        why = why if why.endswith(")") else ""
    p = "" if verdict.p_value is None else f", p={verdict.p_value:.2g}"
    message = (
        f"{b} / {a} = {format_ratio(verdict.current)}: {format_change(verdict.change)} "
        f"{format_interval(verdict.low, verdict.high)} {format_confidence(1 - 2 * alpha)}, "
        f"threshold {threshold * 100:g}% (no baseline: judged on the A/B itself){p}, "
        f"{verdict.n} blocks -> {verdict.outcome.value}{why}"
    )
    return replace(verdict, message=message)


def pair_runs(pair_block_ratios: Sequence[Sequence[float]]) -> list[RunEstimate]:
    """One run estimate per worker-process pair: the Hodges-Lehmann log-ratio B/A of its
    blocks with its standard error (:func:`~pytest_ortperf.stats.run_estimate`)."""
    return [
        run_estimate(np.log(_positive(r, f"block ratios of process pair {j + 1}")))
        for j, r in enumerate(pair_block_ratios)
    ]


def pairs_test(pair_block_ratios: Sequence[Sequence[float]]) -> RatioTest:
    """The A/B's log-ratio B/A from several worker-process pairs measured interleaved, as
    a :class:`~pytest_ortperf.gating.rules.RatioTest` against a ratio of exactly 1.

    Each pair gives one run estimate (the Hodges-Lehmann log-ratio of its blocks, with its
    standard error widened for dependent blocks); the A/B's estimate is their mean. Its
    variance is the pairs' spread over ``k`` (which holds the process-level differences
    besides the blocks' noise), never less than their mean own error over ``k``, judged
    with t on ``k - 1`` degrees of freedom."""
    if len(pair_block_ratios) < 2:
        raise ValueError(f"need at least 2 process pairs, got {len(pair_block_ratios)}")
    runs = pair_runs(pair_block_ratios)
    k = len(runs)
    estimate = math.fsum(r.estimate for r in runs) / k
    within = math.fsum((r.se * r.inflation) ** 2 for r in runs) / k
    spread = float(np.var([r.estimate for r in runs], ddof=1))
    # The spread of the k estimates holds the within-pair error too: as the variance of
    # their mean it has k - 1 degrees of freedom, whatever its parts. Splitting it into
    # between + within parts (Satterthwaite), or falling back to the within part with the
    # blocks' degrees of freedom when the spread reads below it, read 2-3% false alarms at
    # alpha 1% in simulation (tests/test_ab_pairs.py): the spread reads low by chance
    # exactly when that fallback is taken.
    variance, df = max(spread, within) / k, k - 1.0
    n = sum(r.n for r in runs)
    run = RunEstimate(estimate, math.sqrt(variance), 0.0, n)
    baseline = RatioBaseline(0.0, 0.0, math.inf, 0.0, math.inf, 1, 0)  # exactly 1
    return RatioTest(estimate, math.sqrt(variance), df, run, baseline, False)


def judge_ab_pairs(
    pair_block_ratios: Sequence[Sequence[float]],
    *,
    threshold: float = 0.05,
    alpha: float = DEFAULT_ALPHA,
    a: str = "A",
    b: str = "B",
) -> Verdict:
    """The verdict on the block ratios B/A of several worker-process pairs (one sequence
    per pair, measured interleaved): as :func:`judge_ab`, with the interval of
    :func:`pairs_test`, which measures the spread between processes instead of assuming
    one. A single pair is judged by :func:`judge_ab`."""
    if len(pair_block_ratios) == 1:
        return judge_ab(pair_block_ratios[0], threshold=threshold, alpha=alpha, a=a, b=b)
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be a non-negative fraction, got {threshold}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    test = pairs_test(pair_block_ratios)
    outcome, why = _classify(test, threshold, alpha)
    verdict = _verdict(AB_METRIC, test, threshold, alpha, why, outcome, None)
    estimates = [r.estimate for r in pair_runs(pair_block_ratios)]
    k = len(estimates)
    spread = math.expm1(float(np.std(estimates, ddof=1)))
    p = "" if verdict.p_value is None else f", p={verdict.p_value:.2g}"
    message = (
        f"{b} / {a} = {format_ratio(verdict.current)}: {format_change(verdict.change)} "
        f"{format_interval(verdict.low, verdict.high)} {format_confidence(1 - 2 * alpha)}, "
        f"threshold {threshold * 100:g}% (no baseline: judged on the A/B itself){p}, "
        f"{k} process pairs (spread between them {spread * 100:.2g}%), {verdict.n} blocks "
        f"-> {verdict.outcome.value}" + (f" ({why})" if why else "")
    )
    return replace(verdict, message=message)


def histogram_changes(
    a: Mapping[str, int], b: Mapping[str, int], *, a_name: str = "A", b_name: str = "B"
) -> list[str]:
    """What differs between two op-type histograms of optimized graphs, one line per op
    type: ``FusedMatMul 1 -> 0 (a fusion A applies and B does not)``; empty when equal."""
    lines = []
    for op in sorted(set(a) | set(b)):
        old, new = int(a.get(op, 0)), int(b.get(op, 0))
        if old == new:
            continue
        line = f"{op} {old} -> {new}"
        if is_fused_op(op):
            lost = new < old
            line += (
                f" (a fusion {a_name} applies and {b_name} does not)"
                if lost
                else f" (a fusion {b_name} applies and {a_name} does not)"
            )
        lines.append(line)
    return lines
