"""Pure decision rules: is a measurement regressed against its stored baseline?

Three metrics, strongest first (README, "Gating"):

- ``structure``: op-type histograms of the ORT-optimized graphs, compared exactly.
- ``ratio``: paired block ratios of one interleaved run (candidate/reference, or a latency's
  target/control) against the baseline's. Each run's location is the Hodges-Lehmann
  log-ratio of its blocks with a standard error from the signed-rank interval; the
  difference current - baseline is judged with Welch's t, its variance the sum of the
  current run's error (widened for dependent blocks), one between-run deviation and the
  baseline's own error (:class:`RatioBaseline`).
- absolute latencies are judged against earlier runs' medians
  (:mod:`pytest_ortperf.gating.history`), never against the blocks of one run.

The rule, for an effect-size ``threshold`` (relative, 0.05 = 5%) and a one-sided ``alpha``:
regressed when the estimated change exceeds the threshold and "slower" is significant;
improved symmetrically; inconclusive when the estimate is beyond the threshold but not
significant, or the interval reaches past twice the threshold (too noisy to tell);
unstable when the blocks depend on each other and only that decides; ok otherwise.
Intervals are two-sided at confidence ``1 - 2 * alpha`` (each bound a one-sided
``1 - alpha`` bound), so "lower bound > 0" matches "p < alpha".

Everything here is pure: no I/O, no clock, no onnxruntime, no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.stats import (
    FloatArray,
    RunEstimate,
    chi2_quantile,
    min_attainable_p,
    run_estimate,
    satterthwaite,
    t_quantile,
    t_sf,
)
from pytest_ortperf.units import (
    format_change,
    format_confidence,
    format_interval,
    format_metric,
)

MIN_EARLY_ROUNDS = 8
"""Fewest rounds :func:`decide_early` ever stops at."""

FUSED_OPS = frozenset(
    {
        "Attention",
        "BiasAdd",
        "BiasDropout",
        "BiasGelu",
        "BiasSoftmax",
        "BiasSplitGelu",
        "DecoderMaskedMultiHeadAttention",
        "DynamicQuantizeMatMul",
        "EmbedLayerNormalization",
        "FastGelu",
        "FusedConv",
        "FusedGemm",
        "FusedMatMul",
        "Gelu",
        "GemmFastGelu",
        "GroupNorm",
        "GroupQueryAttention",
        "LayerNormalization",
        "MatMulIntegerToFloat",
        "MatMulNBits",
        "MultiHeadAttention",
        "NhwcConv",
        "PackedAttention",
        "QAttention",
        "QuickGelu",
        "RotaryEmbedding",
        "SimplifiedLayerNormalization",
        "SkipGroupNorm",
        "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "SparseAttention",
    }
)
"""ORT contrib ops produced by graph fusions (besides any ``Fused*`` / ``QLinear*`` op)."""

# --------------------------------------------------------------------------- decision rule


def min_blocks_for(alpha: float) -> int:
    """Blocks (pairs) needed before the rank tests can reach significance ``alpha`` at all,
    with a margin of two: below it a regression could never fail the gate."""
    n = 1
    while min_attainable_p(n) >= alpha:
        n += 1
    return n + 2


def _check_settings(threshold: float, alpha: float) -> None:
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be a non-negative fraction, got {threshold}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")


def _positive(values: Sequence[float], what: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what}: need a non-empty sequence of numbers")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{what}: values must be finite and positive")
    return arr


@dataclass(frozen=True)
class RatioBaseline:
    """What a baseline knows about a ratio, on log scale.

    ``estimate`` is the mean of its runs' Hodges-Lehmann log-ratios; ``variance`` (with
    ``df`` degrees of freedom) the sampling variance of that estimate; ``between`` the
    variance of the true log-ratio from one run to the next (session pairs, processes),
    with ``between_df`` degrees of freedom (infinite: an assumed floor, not a measurement).
    """

    estimate: float
    variance: float
    df: float
    between: float
    between_df: float
    runs: int
    n: int
    set_aside: int = 0
    """Runs left out as outliers (see :func:`ratio_baseline`); ``runs`` counts the others."""

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate)

    @property
    def measured_between(self) -> bool:
        """Whether ``between`` was measured (several runs) rather than assumed."""
        return self.runs > 1

    def interval(self, confidence: float) -> tuple[float, float]:
        """The ratio's two-sided interval at ``confidence`` (its own sampling error)."""
        half = t_quantile((1.0 + confidence) / 2.0, self.df) * math.sqrt(self.variance)
        return math.exp(self.estimate - half), math.exp(self.estimate + half)


def ratio_baseline(
    block_ratios: Sequence[float], run_sizes: Sequence[int] | None = None
) -> RatioBaseline:
    """The :class:`RatioBaseline` of stored block ratios taken as ``run_sizes`` consecutive
    runs (``--ortperf-update`` measures several, each on a fresh session pair; None: one).

    With several runs, the spread of their estimates measures the between-run variance,
    taken at its :data:`BETWEEN_RUN_CONFIDENCE` upper bound (and at least
    :data:`BETWEEN_RUN_FLOOR`); with one, :data:`BETWEEN_RUN_UNKNOWN` is assumed. A run far
    from the others (a session pair that read 7% off while nine agreed within 0.5%, seen
    here once in a hundred) is set aside rather than allowed to widen every later verdict.
    """
    logs = np.log(_positive(block_ratios, "baseline block ratios"))
    sizes = [int(s) for s in run_sizes] if run_sizes else [logs.size]
    if sum(sizes) != logs.size or any(s < 1 for s in sizes):
        raise ValueError(f"run sizes {sizes} do not split {logs.size} block ratios")
    cuts = np.cumsum(sizes)[:-1]
    runs = [run_estimate(part) for part in np.split(logs, cuts)]
    kept = _without_outlier_runs(runs)
    set_aside = len(runs) - len(kept)
    runs = kept
    # Several runs: the mean of their estimates (a pooled Hodges-Lehmann estimate would
    # behave like a median of the runs' offsets, less efficient than their mean).
    estimate = math.fsum(r.estimate for r in runs) / len(runs)
    within = [(r.se * r.inflation) ** 2 for r in runs]
    if len(runs) == 1:
        return RatioBaseline(
            estimate, within[0], max(runs[0].n - 1, 1), BETWEEN_RUN_UNKNOWN**2, math.inf, 1,
            logs.size,
        )  # fmt: skip
    k = len(runs)
    spread = float(np.var([r.estimate for r in runs], ddof=1))
    # The spread of k runs is a rough estimate (k - 1 degrees of freedom): take its
    # one-sided upper confidence bound, so that no single baseline, unlucky in its runs,
    # makes its later checks fail often.
    spread_up = (k - 1) * spread / chi2_quantile(1.0 - BETWEEN_RUN_CONFIDENCE, k - 1)
    mean_within = math.fsum(within) / len(within)
    between = max(spread_up - mean_within, BETWEEN_RUN_FLOOR**2)
    return RatioBaseline(
        estimate, max(spread_up, mean_within) / k, math.inf, between, math.inf, k, logs.size,
        set_aside,
    )  # fmt: skip


def _without_outlier_runs(runs: Sequence[RunEstimate]) -> list[RunEstimate]:
    """The runs without those far from the others: more than :data:`OUTLIER_RUN_Z` robust
    standard deviations (1.4826 MAD, at least the runs' own error and the between-run floor)
    from their median, at most a quarter of them, and only from five runs on."""
    if len(runs) < 5:
        return list(runs)
    estimates = np.array([r.estimate for r in runs])
    centre = float(np.median(estimates))
    within = math.sqrt(math.fsum((r.se * r.inflation) ** 2 for r in runs) / len(runs))
    scale = max(1.4826 * float(np.median(np.abs(estimates - centre))), within, BETWEEN_RUN_FLOOR)
    distance = np.abs(estimates - centre) / scale
    far = [i for i in np.argsort(-distance) if distance[i] > OUTLIER_RUN_Z]
    drop = set(far[: (len(runs) - 1) // 4])
    return [r for i, r in enumerate(runs) if i not in drop]


@dataclass(frozen=True)
class RatioTest:
    """The current run's log-ratio against a :class:`RatioBaseline`: the difference, its
    standard error and degrees of freedom, and the run's own estimate (for dependence)."""

    difference: float
    se: float
    df: float
    run: RunEstimate
    baseline: RatioBaseline
    widened: bool
    """Whether ``se`` carries the widening for dependent blocks."""

    def p_above(self, x: float) -> float:
        """One-sided p-value of "the difference is above ``x``" being false."""
        return t_sf((self.difference - x) / self.se, self.df) if self.se > 0 else 0.5

    def p_below(self, x: float) -> float:
        return t_sf((x - self.difference) / self.se, self.df) if self.se > 0 else 0.5

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The two-sided ``1 - 2 * alpha`` interval of the difference."""
        half = t_quantile(1.0 - alpha, self.df) * self.se
        return self.difference - half, self.difference + half


def ratio_test(
    block_ratios: Sequence[float], baseline: RatioBaseline, *, widen: bool = True
) -> RatioTest:
    """Set the current run's block ratios against ``baseline``: the difference of the
    Hodges-Lehmann log-ratios, with the current run's sampling error (widened for
    dependent blocks when ``widen``), one between-run deviation and the baseline's error."""
    run = run_estimate(np.log(_positive(block_ratios, "block ratios")))
    within = run.se * (run.inflation if widen else 1.0)
    if baseline.between_df == baseline.df:
        # Both come from the spread of the same runs: one estimate, not two.
        parts = [(baseline.between + baseline.variance, baseline.df)]
    else:
        parts = [(baseline.between, baseline.between_df), (baseline.variance, baseline.df)]
    variance, df = satterthwaite([(within**2, max(run.n - 1, 1)), *parts])
    if math.isfinite(baseline.between_df):
        # Never more confident than the runs that measured the between-run spread.
        df = min(df, baseline.between_df)
    return RatioTest(
        run.estimate - baseline.estimate, math.sqrt(variance), df, run, baseline,
        widen and run.inflation > 1.0,
    )  # fmt: skip


def _classify(test: RatioTest, threshold: float, alpha: float) -> tuple[Outcome, str]:
    """The outcome of a test and, for inconclusive ones, why. Readable from the interval:
    regressed needs an estimate past the threshold and a lower bound above 0; ok needs
    an upper bound within twice the threshold."""
    limit = math.log1p(threshold)
    d = test.difference
    if d > limit:
        if test.p_above(0.0) < alpha:
            return Outcome.REGRESSED, ""
        return Outcome.INCONCLUSIVE, "slower but not significant"
    if d < -limit:
        if test.p_below(0.0) < alpha:
            return Outcome.IMPROVED, ""
        return Outcome.INCONCLUSIVE, "faster but not significant"
    if test.p_below(math.log1p(2 * threshold)) >= alpha:
        return Outcome.INCONCLUSIVE, "interval reaches past twice the threshold: too noisy to tell"
    return Outcome.OK, ""


UNSTABLE_ADVICE = (
    "the blocks drift or depend on each other (lag-1 autocorrelation {rho:.2f}): something "
    "on the machine changed during the measurement; run on a quieter runner, or pin the "
    "process to cores"
)


def judge_ratio(
    block_ratios: Sequence[float],
    baseline: RatioBaseline | float,
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    metric: str = "ratio",
    shown_baseline: float | None = None,
) -> Verdict:
    """Judge the current run's paired block ratios candidate/reference against a baseline.

    A normalized latency passes its target/control block ratios with ``metric="latency"``
    and ``shown_baseline``, the baseline's median seconds per call: the verdict then shows
    seconds (that median scaled by the normalized change).

    A bare float baseline is a ratio known without error but from one unknown run (the
    between-run variance is :data:`BETWEEN_RUN_UNKNOWN`). The test is Welch's t on the
    Hodges-Lehmann log-ratios (see :func:`ratio_test`); ``current`` is the run's
    Hodges-Lehmann ratio, the interval the ``1 - 2 * alpha`` interval of the change.
    Blocks with significant lag-1 autocorrelation widen the interval; a verdict that would
    be regressed only without that widening, or whose run's halves disagree about the
    regression (a drift), is ``unstable``.
    """
    _check_settings(threshold, alpha)
    if not isinstance(baseline, RatioBaseline):
        if not (math.isfinite(baseline) and baseline > 0):
            raise ValueError(f"baseline ratio must be finite and positive, got {baseline}")
        baseline = RatioBaseline(math.log(baseline), 0.0, math.inf, BETWEEN_RUN_UNKNOWN**2,
                                 math.inf, 1, 0)  # fmt: skip
    test = ratio_test(block_ratios, baseline)
    outcome, why = _classify(test, threshold, alpha)
    if test.run.dependent:
        advice = UNSTABLE_ADVICE.format(rho=test.run.rho)
        if outcome is Outcome.REGRESSED:
            halves = _halves(block_ratios, baseline.estimate)
            if min(halves) <= math.log1p(threshold):
                outcome = Outcome.UNSTABLE
                why = (
                    f"the run's first and second half read {format_change(math.expm1(halves[0]))}"
                    f" and {format_change(math.expm1(halves[1]))}: {advice}"
                )
        else:
            naive, _ = _classify(ratio_test(block_ratios, baseline, widen=False), threshold, alpha)
            if naive is Outcome.REGRESSED or outcome is Outcome.INCONCLUSIVE:
                outcome, why = Outcome.UNSTABLE, advice
            elif outcome is Outcome.OK:
                why = f"interval widened: {advice}"
    return _verdict(metric, test, threshold, alpha, why, outcome, shown_baseline)


def _halves(block_ratios: Sequence[float], baseline: float) -> tuple[float, float]:
    """The log-change read by the first and by the second half of a run's blocks."""
    logs = np.log(_positive(block_ratios, "block ratios"))
    middle = logs.size // 2
    return (
        run_estimate(logs[:middle]).estimate - baseline,
        run_estimate(logs[middle:]).estimate - baseline,
    )


def _verdict(
    metric: str,
    test: RatioTest,
    threshold: float,
    alpha: float,
    why: str,
    outcome: Outcome,
    shown_baseline: float | None,
) -> Verdict:
    low, high = test.bounds(alpha)
    change = math.expm1(test.difference)
    baseline = test.baseline.ratio if shown_baseline is None else shown_baseline
    current = baseline * (1.0 + change)
    p = test.p_above(0.0) if test.difference >= 0 else test.p_below(0.0)
    base = test.baseline
    aside = f", {base.set_aside} set aside as outliers" if base.set_aside else ""
    source = (
        f"{base.runs} runs{aside}, {base.n} blocks" if base.runs > 1
        else f"{base.n} blocks" if base.n else "a single figure"
    )  # fmt: skip
    normalized = " normalized by its control," if shown_baseline is not None else ""
    message = (
        f"{metric} {format_metric(metric, current)} vs baseline "
        f"{format_metric(metric, baseline)} ({source}):{normalized} {format_change(change)} "
        f"{format_interval(math.expm1(low), math.expm1(high))} "
        f"{format_confidence(1 - 2 * alpha)}, threshold {threshold * 100:g}%, p={p:.2g}, "
        f"{test.run.n} blocks -> {outcome.value}" + (f" ({why})" if why else "")
    )
    return Verdict(
        metric=metric,
        outcome=outcome,
        baseline=baseline,
        current=current,
        change=change,
        low=math.expm1(low),
        high=math.expm1(high),
        threshold=threshold,
        alpha=alpha,
        p_value=p,
        n=test.run.n,
        message=message,
    )


def decide_early(
    block_ratios: Sequence[float],
    baseline: RatioBaseline,
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    may_reject: bool = True,
    min_rounds: int = MIN_EARLY_ROUNDS,
) -> bool:
    """True when measuring more rounds cannot reasonably change the verdict.

    With at least ``min_rounds`` ratios: the ``1 - 2 * alpha`` interval of the change lies
    inside ``(-threshold, +threshold)`` (clearly ok), below ``-threshold`` (clearly
    improved), or, when ``may_reject``, above the threshold (clearly regressed: allowed
    only where a confirming measurement decides, since stopping on a regression at an
    interim look would spend more than ``alpha``); or the run's own error has become small
    beside what the baseline and the between-run spread leave (more blocks cannot narrow
    the interval), when ``may_reject`` or the interval already excludes a regression.
    """
    _check_settings(threshold, alpha)
    if len(block_ratios) < max(min_rounds, 2):
        return False
    test = ratio_test(block_ratios, baseline)
    limit = math.log1p(threshold)
    not_slower = test.p_below(limit) < alpha
    if not_slower and (test.p_above(-limit) < alpha or test.p_below(-limit) < alpha):
        return True
    if may_reject and test.p_above(limit) < alpha:
        return True
    fixed = math.sqrt(baseline.between + baseline.variance)
    return (may_reject or not_slower) and test.run.se * test.run.inflation < SETTLED * fixed


SETTLED = 0.3
"""The early stop ends a run once its own standard error is below this share of the
baseline's and the between-run part (the interval then narrows by under 5% more)."""

BETWEEN_RUN_FLOOR = 0.0025
"""Least standard deviation of a log-ratio between runs assumed where it was measured:
a quarter percent (measured on the development VM: 0.37% between processes, 0.45%
between session pairs in one process, both within the runs' own noise)."""

OUTLIER_RUN_Z = 5.0
"""How many robust standard deviations from the other runs a baseline run may read before
it is set aside (normal runs go that far about once in two million)."""

BETWEEN_RUN_CONFIDENCE = 0.99
"""Confidence of the upper bound taken of the between-run spread a baseline's runs show."""

BETWEEN_RUN_UNKNOWN = 0.01
"""Standard deviation of a log-ratio between runs assumed where nothing measured it (a
baseline of one run, schema 1 files): one percent, conservative."""


# --------------------------------------------------------------------------- structure


def is_fused_op(op_type: str) -> bool:
    """Whether ``op_type`` is one ORT graph fusions produce."""
    return op_type.startswith(("Fused", "QLinear")) or op_type in FUSED_OPS


def judge_structure(
    baseline: Mapping[str, Mapping[str, int]], current: Mapping[str, Mapping[str, int]]
) -> Verdict:
    """Compare op-type histograms per role (``reference``, ``candidate``) exactly.

    Any difference is a regression (``candidate lost fusion: FusedMatMul 1 -> 0, ...``;
    "lost fusion" when a fused op's count went down, else "structure changed"). A role with
    an empty histogram on either side is skipped; with no baseline histograms at all the
    outcome is ``new``, with no current ones ``not_comparable``. ``baseline``/``current``
    are total node counts of the roles compared, ``n`` the number of op types that moved.
    """
    roles = sorted(set(baseline) | set(current))
    parts: list[str] = []
    skipped: list[str] = []
    compared: list[str] = []
    total_b = total_c = moved = 0
    for role in roles:
        b = baseline.get(role) or {}
        c = current.get(role) or {}
        if not b or not c:
            skipped.append(role)
            continue
        compared.append(role)
        total_b += sum(int(v) for v in b.values())
        total_c += sum(int(v) for v in c.values())
        changes = [
            (op, int(b.get(op, 0)), int(c.get(op, 0)))
            for op in sorted(set(b) | set(c))
            if int(b.get(op, 0)) != int(c.get(op, 0))
        ]
        if changes:
            moved += len(changes)
            lost = any(new < old and is_fused_op(op) for op, old, new in changes)
            what = "lost fusion" if lost else "structure changed"
            parts.append(f"{role} {what}: " + ", ".join(f"{op} {o} -> {n}" for op, o, n in changes))
    if not compared:
        any_current = any(current.get(r) for r in roles)
        any_baseline = any(baseline.get(r) for r in roles)
        if any_current and not any_baseline:
            outcome, message = Outcome.NEW, "structure: no op histograms in the baseline"
        else:
            outcome, message = Outcome.NOT_COMPARABLE, "structure: no op histograms recorded"
        return Verdict("structure", outcome, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None, 0, message)
    if parts:
        outcome, message = Outcome.REGRESSED, "; ".join(parts)
    else:
        sizes = ", ".join(f"{r} {sum(int(v) for v in current[r].values())} nodes" for r in compared)
        outcome, message = Outcome.OK, f"structure unchanged: {sizes}"
    if skipped:
        message += f" (no histogram for {', '.join(skipped)})"
    change = total_c / total_b - 1.0 if total_b else 0.0
    return Verdict(
        metric="structure",
        outcome=outcome,
        baseline=float(total_b),
        current=float(total_c),
        change=change,
        low=change,
        high=change,
        threshold=0.0,
        alpha=0.0,
        p_value=None,
        n=moved,
        message=message,
    )


# --------------------------------------------------------------------------- environment


def not_comparable(
    metric: str, current: float, baseline: float, keys: Sequence[str], n: int = 0
) -> Verdict:
    """A verdict for a figure measured on another machine or settings: reported only."""
    change = current / baseline - 1.0 if baseline > 0 else 0.0
    message = (
        f"{metric} {format_metric(metric, current)} vs baseline {format_metric(metric, baseline)} "
        f"({format_change(change)}): not comparable here ({'; '.join(keys)}), not gated"
    )
    return Verdict(
        metric, Outcome.NOT_COMPARABLE, baseline, current, change, change, change, 0.0, 0.0, None,
        n, message,
    )  # fmt: skip


def new(metric: str, current: float, n: int = 0) -> Verdict:
    """A verdict for a measurement without baseline entry."""
    message = (
        f"{metric} {format_metric(metric, current)}: no baseline "
        "(run with --ortperf-update to store it)"
    )
    return Verdict(
        metric, Outcome.NEW, math.nan, current, math.nan, math.nan, math.nan, 0.0, 0.0, None, n,
        message,
    )  # fmt: skip
