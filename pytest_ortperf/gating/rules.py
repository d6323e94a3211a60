"""Pure decision rules: is a measurement regressed against its stored baseline?

Three metrics, strongest first (README, "Gating"):

- ``structure``: op-type histograms of the ORT-optimized graphs, compared exactly
  (:mod:`pytest_ortperf.gating.structure`).
- ``ratio``: paired block ratios of interleaved session pairs (candidate/reference, or a
  latency's target/control) against the baseline's runs. Each pair's location is the
  Hodges-Lehmann log-ratio of its blocks with a standard error from the signed-rank
  interval; the difference of the means is judged with Welch's t, its variance the
  between-pair spread measured on both sides (pooled) over their counts, both sides' own
  error (widened for dependent blocks) and an allowance for the process boundary, plus
  what a baseline taken in several processes measured of it (:func:`ratio_test`,
  :class:`RatioBaseline`).
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

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_ortperf.gating.settings import DEFAULT_ALPHA
from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.stats import (
    FloatArray,
    RunEstimate,
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

CHECK_PAIRS = 3
"""Session pairs a check spreads over (each with a third of the budget): the first is the
test's own sessions, the others are created fresh, so that the check measures its own
between-pair spread instead of assuming it."""

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

    ``estimate`` is the mean of its runs' Hodges-Lehmann log-ratios (each run on a freshly
    created session pair); ``variance`` (with ``df`` degrees of freedom) the sampling
    variance of that estimate; ``between`` the variance of the true log-ratio from one
    session pair to the next, measured from the spread of the runs (``between_df`` = runs
    - 1) or assumed (infinite ``between_df``); ``within`` the mean of the runs' own
    sampling variances (their blocks' noise).
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
    within: float = 0.0
    processes: int = 1
    """Processes the runs were taken in (``--ortperf-update-processes``)."""
    process: float = 0.0
    """Variance of a process's offset, measured from the spread of the processes' mean
    estimates less what their runs' own spread explains; 0 where a single process cannot
    show it. ``between`` is then the spread of the runs within their processes."""
    process_share: float = 1.0
    """Weight of the processes' offsets in ``estimate``: the sum of the squared shares of
    runs per process (1/``processes`` with as many runs in each)."""

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

    @property
    def measured_process(self) -> bool:
        """Whether the baseline's processes read further apart than the allowance
        (:data:`BETWEEN_PROCESS_FLOOR`) for a check's process and theirs."""
        return self.process_variance > BETWEEN_PROCESS_FLOOR**2

    @property
    def process_variance(self) -> float:
        """Variance of what differs between this baseline's processes and a check's, which
        no session pair inside one process shows: what the baseline's own processes
        measured (a check's offset and theirs, ``process * (1 + process_share)``), never
        below :data:`BETWEEN_PROCESS_FLOOR` squared. Taken as known, like the allowance:
        with the few degrees of freedom of a few processes in the t quantiles, a check
        against them could hardly decide anything (docs, "Baselines over several
        processes")."""
        return max(self.process * (1.0 + self.process_share), BETWEEN_PROCESS_FLOOR**2)


def split_runs(logs: FloatArray, run_sizes: Sequence[int] | None, what: str) -> list[FloatArray]:
    """``logs`` cut into consecutive runs of ``run_sizes`` (None or empty: one run)."""
    sizes = [int(s) for s in run_sizes] if run_sizes else [logs.size]
    if sum(sizes) != logs.size or any(s < 1 for s in sizes):
        raise ValueError(f"{what}: run sizes {sizes} do not split {logs.size} block ratios")
    return list(np.split(logs, np.cumsum(sizes)[:-1]))


def ratio_baseline(
    block_ratios: Sequence[float],
    run_sizes: Sequence[int] | None = None,
    processes: Sequence[int] | None = None,
) -> RatioBaseline:
    """The :class:`RatioBaseline` of stored block ratios taken as ``run_sizes`` consecutive
    runs (``--ortperf-update`` measures several, each on a fresh session pair; None: one),
    ``processes`` of them in each process where the update took them in several.

    With several runs, the spread of their estimates less their own noise measures the
    between-run variance (never below :data:`BETWEEN_RUN_FLOOR`), with runs - 1 degrees
    of freedom: the t quantiles of the test carry its uncertainty. With one run,
    :data:`BETWEEN_RUN_UNKNOWN` is assumed. Runs in several processes (with more runs
    than processes) split that spread in two, one-way random effects: the runs' spread
    within their processes (``between``, runs - processes degrees of freedom) and the
    processes' own (``process``, :func:`_nested`). A run far from the others of its
    process (a session pair that read 7% off while nine agreed within 0.5%, seen here once
    in a hundred) is set aside rather than allowed to widen every later verdict; a process
    whose runs all read apart from another's is what several processes are there to
    average.
    """
    ratios = tuple(float(x) for x in block_ratios)
    return _ratio_baseline(
        ratios,
        tuple(int(s) for s in run_sizes) if run_sizes else None,
        tuple(int(p) for p in processes) if processes else None,
    )


@functools.lru_cache(maxsize=256)
def _ratio_baseline(
    block_ratios: tuple[float, ...],
    run_sizes: tuple[int, ...] | None,
    processes: tuple[int, ...] | None,
) -> RatioBaseline:
    # Cached: a check asks for its entry's baseline at every look of every session pair.
    logs = np.log(_positive(block_ratios, "baseline block ratios"))
    runs = [run_estimate(part) for part in split_runs(logs, run_sizes, "baseline")]
    groups: list[list[RunEstimate]] = []
    if processes and sum(processes) == len(runs) and all(p > 0 for p in processes):
        ends = np.cumsum(processes)
        groups = [
            _without_outlier_runs(runs[a:b]) for a, b in zip(ends - processes, ends, strict=True)
        ]
        kept = [r for group in groups for r in group]
    else:
        kept = _without_outlier_runs(runs)
    set_aside = len(runs) - len(kept)
    runs = kept
    # Several runs: the mean of their estimates (a pooled Hodges-Lehmann estimate would
    # behave like a median of the runs' offsets, less efficient than their mean).
    estimate = math.fsum(r.estimate for r in runs) / len(runs)
    within_each = [(r.se * r.inflation) ** 2 for r in runs]
    within = math.fsum(within_each) / len(within_each)
    if len(runs) == 1:
        return RatioBaseline(
            estimate, within, max(runs[0].n - 1, 1), BETWEEN_RUN_UNKNOWN**2, math.inf, 1,
            logs.size, 0, within,
        )  # fmt: skip
    if len(groups) > 1 and len(runs) > len(groups):
        return _nested(groups, estimate, within, logs.size, set_aside)
    k = len(runs)
    spread = float(np.var([r.estimate for r in runs], ddof=1))
    between = max(spread - within, BETWEEN_RUN_FLOOR**2)
    return RatioBaseline(
        estimate, (between + within) / k, k - 1, between, k - 1, k, logs.size, set_aside,
        within,
    )  # fmt: skip


def _nested(
    groups: Sequence[Sequence[RunEstimate]],
    estimate: float,
    within: float,
    blocks: int,
    set_aside: int,
) -> RatioBaseline:
    """The baseline of runs taken in several processes (``groups``, more runs than
    groups): each run's estimate a process's offset plus a session pair's plus its own
    noise. The runs' spread around their process's mean measures the pairs' variance
    (``between``, plus ``within``); the spread of the processes' means less what the pairs
    and the noise explain of it, the processes' (``process``)."""
    sizes = np.array([len(g) for g in groups], dtype=np.float64)
    means = np.array([math.fsum(r.estimate for r in g) / len(g) for g in groups])
    k, count = int(sizes.sum()), len(groups)
    within_df = k - count
    within_spread = (
        math.fsum(
            (r.estimate - mean) ** 2 for g, mean in zip(groups, means, strict=True) for r in g
        )
        / within_df
    )
    between = max(within_spread - within, BETWEEN_RUN_FLOOR**2)
    explained = float(np.mean(1.0 / sizes)) * within_spread  # the pairs' share in the means
    means_spread = float(np.var(means, ddof=1))
    process = max(means_spread - explained, 0.0)
    share = float(np.sum(sizes**2)) / k**2
    variance, df = satterthwaite([(process * share, math.inf), ((between + within) / k, within_df)])
    return RatioBaseline(
        estimate, variance, df, between, within_df, k, blocks, set_aside, within, count,
        process, share,
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
    """The current measurement's log-ratio against a :class:`RatioBaseline`: the
    difference, its standard error and degrees of freedom, the pooled estimate of the
    current runs (``run``: mean estimate, standard error of that mean, block-weighted
    lag-1 autocorrelation, all blocks) and how many session pairs (``pairs``) it spans."""

    difference: float
    se: float
    df: float
    run: RunEstimate
    baseline: RatioBaseline
    widened: bool
    """Whether ``se`` carries the widening for dependent blocks."""
    pairs: int = 1
    between: float = 0.0
    """The between-pair variance the test used for the current pairs (their own; the
    baseline's for a single pair)."""

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
    block_ratios: Sequence[float],
    baseline: RatioBaseline,
    *,
    widen: bool = True,
    runs: Sequence[int] | None = None,
) -> RatioTest:
    """Set the current blocks (``runs``: their sizes per session pair; None: one pair)
    against ``baseline``: Welch's t on the mean Hodges-Lehmann log-ratios of the pairs.

    The variance of the difference is the baseline's between-pair variance over its k
    pairs plus the current pairs' own over their m (the true ratio moves from one session
    pair to the next, and by how much depends on the machine at the time) plus both sides'
    own sampling error (the current one widened for dependent blocks when ``widen``) plus
    what differs between the two processes and no pair inside one shows
    (:attr:`RatioBaseline.process_variance`: an allowance, or what a baseline taken in
    several processes measured where more); Satterthwaite's degrees of freedom. Each side's
    spread is its own (Welch): three pairs beside busy neighbours read 2.7% apart, and
    pooled with a quiet baseline's 29 degrees of freedom their 2 counted for little, so
    their interval was too narrow to hold a slowdown of 1.2 times the threshold in 6 of 40
    checks (docs, Performance figures). One pair alone has no spread of its own: the
    baseline's stands for it.
    """
    logs = np.log(_positive(block_ratios, "block ratios"))
    parts = [_pair_estimate(part.tobytes()) for part in split_runs(logs, runs, "current")]
    m = len(parts)
    infl = [(r.inflation if widen else 1.0) for r in parts]
    within_c = math.fsum((r.se * f) ** 2 for r, f in zip(parts, infl, strict=True)) / m
    estimates = [r.estimate for r in parts]
    current = math.fsum(estimates) / m
    own = max(float(np.var(estimates, ddof=1)) - within_c, 0.0) if m > 1 else None
    k = baseline.runs
    n = sum(r.n for r in parts)
    rho = math.fsum(r.rho * r.n for r in parts) / n
    pooled = RunEstimate(current, math.sqrt(within_c / m), rho, n)
    base_within = baseline.within if baseline.within else baseline.variance
    floor = BETWEEN_RUN_FLOOR**2
    base_between = max(baseline.between, floor)
    if not math.isfinite(baseline.between_df):  # assumed, not measured
        between = max(base_between, own or 0.0)
        spreads = [(between * (1.0 / k + 1.0 / m), math.inf)]
    elif own is None:  # one pair: its spread is the baseline's as far as anyone knows
        between = base_between
        spreads = [(between * (1.0 / k + 1.0 / m), baseline.between_df)]
    else:
        between = max(own, floor)
        spreads = [(base_between / k, baseline.between_df), (between / m, m - 1)]
    variance, df = satterthwaite(
        [
            *spreads,
            (base_within / k, max(baseline.n - k, 1)),
            (within_c / m, max(n - m, 1)),
            (baseline.process_variance, math.inf),
        ]
    )
    return RatioTest(
        current - baseline.estimate, math.sqrt(variance), df, pooled, baseline,
        widen and any(f > 1.0 for f in infl), m, between,
    )  # fmt: skip


@functools.lru_cache(maxsize=256)
def _pair_estimate(logs: bytes) -> RunEstimate:
    """:func:`~pytest_ortperf.stats.run_estimate` of one session pair's log-ratios, given as
    their float64 bytes. Cached: a check's stop rule asks at every look, and the pairs
    measured before the current one read the same each time (about 40% of the estimates
    a simulated check asked for)."""
    return run_estimate(np.frombuffer(logs, dtype=np.float64))


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

GROSS_FACTOR = 2.0
"""A regression whose interval's lower bound lies past this many times the threshold is
gross: no rule about the machine (busy, drifting, dependent blocks) may turn it into
``unstable``; it fails, with the warning attached."""


def is_gross(verdict: Verdict) -> bool:
    """Whether a regressed verdict is too far past its threshold to be muted."""
    return verdict.outcome is Outcome.REGRESSED and verdict.low > GROSS_FACTOR * verdict.threshold


def downgrade(verdict: Verdict, rule: str) -> Verdict:
    """``verdict`` (regressed) turned ``unstable`` by ``rule`` (which names the figure
    that triggered it), unless it is gross (:func:`is_gross`): then it stays regressed and
    only carries the rule as a warning. The message always says which happened."""
    if verdict.outcome is not Outcome.REGRESSED:
        return dataclasses.replace(verdict, message=f"{verdict.message}; {rule}")
    if is_gross(verdict):
        note = (
            f"; not downgraded although {rule}: the interval's lower bound "
            f"{format_change(verdict.low)} is past {GROSS_FACTOR:g}x the threshold"
        )
        return dataclasses.replace(verdict, message=verdict.message + note)
    message = verdict.message.replace("-> regressed", "-> unstable", 1)
    return dataclasses.replace(
        verdict,
        outcome=Outcome.UNSTABLE,
        message=f"{message}; downgraded from regressed because {rule}",
    )


def judge_ratio(
    block_ratios: Sequence[float],
    baseline: RatioBaseline | float,
    *,
    threshold: float = 0.05,
    alpha: float = DEFAULT_ALPHA,
    metric: str = "ratio",
    shown_baseline: float | None = None,
    runs: Sequence[int] | None = None,
) -> Verdict:
    """Judge the current paired block ratios candidate/reference against a baseline.

    ``runs`` gives the sizes of the current blocks' session pairs (None: one pair). A
    normalized latency passes its target/control block ratios with ``metric="latency"``
    and ``shown_baseline``, the baseline's median seconds per call: the verdict then shows
    seconds (that median scaled by the normalized change).

    A bare float baseline is a ratio known without error but from one unknown run (the
    between-run variance is :data:`BETWEEN_RUN_UNKNOWN`). The test is Welch's t on the
    pairs' Hodges-Lehmann log-ratios (see :func:`ratio_test`); ``current`` is the pairs'
    mean ratio, the interval the ``1 - 2 * alpha`` interval of the change. Blocks with
    significant lag-1 autocorrelation widen the interval; a verdict that would be
    regressed only without that widening, or whose halves disagree about the regression
    (a drift), is ``unstable``, unless the regression is gross (:func:`downgrade`).
    """
    _check_settings(threshold, alpha)
    if not isinstance(baseline, RatioBaseline):
        if not (math.isfinite(baseline) and baseline > 0):
            raise ValueError(f"baseline ratio must be finite and positive, got {baseline}")
        baseline = RatioBaseline(math.log(baseline), 0.0, math.inf, BETWEEN_RUN_UNKNOWN**2,
                                 math.inf, 1, 0)  # fmt: skip
    test = ratio_test(block_ratios, baseline, runs=runs)
    outcome, why = _classify(test, threshold, alpha)
    rule = ""
    if test.run.dependent:
        advice = UNSTABLE_ADVICE.format(rho=test.run.rho)
        if outcome is Outcome.REGRESSED:
            halves = _drifted_halves(block_ratios, baseline.estimate, runs, alpha)
            if halves is not None and min(halves) <= math.log1p(threshold):
                rule = (
                    f"the measurement's first and second half read "
                    f"{format_change(math.expm1(halves[0]))} and "
                    f"{format_change(math.expm1(halves[1]))}: {advice}"
                )
        else:
            naive, _ = _classify(
                ratio_test(block_ratios, baseline, widen=False, runs=runs), threshold, alpha
            )
            if naive is Outcome.REGRESSED or outcome is Outcome.INCONCLUSIVE:
                outcome, why = Outcome.UNSTABLE, advice
            elif outcome is Outcome.OK:
                why = f"interval widened: {advice}"
    verdict = _verdict(metric, test, threshold, alpha, why, outcome, shown_baseline)
    return downgrade(verdict, rule) if rule else verdict


def _drifted_halves(
    block_ratios: Sequence[float], baseline: float, runs: Sequence[int] | None, alpha: float
) -> tuple[float, float] | None:
    """The log-change read by the first and by the second half of a measurement, when
    they may disagree; None when they agree within the measurement's own spread.

    One session pair: the halves of its blocks (nothing else says how far they may
    disagree: the dependence that brought the rule here already widened the interval).
    Several pairs: the mean change of the first and of the second half of the pairs, and
    only when they differ significantly at ``alpha`` (Welch's t on the pairs' spread
    within each half): the pairs' spread already carries in the test's interval any drift
    that moves them, so a near-threshold regression is not muted because one half of its
    pairs read, by chance, just under the threshold.
    """
    logs = np.log(_positive(block_ratios, "block ratios"))
    parts = split_runs(logs, runs, "current")
    if len(parts) == 1:
        middle = logs.size // 2
        return (
            run_estimate(logs[:middle]).estimate - baseline,
            run_estimate(logs[middle:]).estimate - baseline,
        )
    estimates = np.array([run_estimate(part).estimate for part in parts])
    first, second = estimates[: estimates.size // 2], estimates[estimates.size // 2 :]
    halves = (float(first.mean()) - baseline, float(second.mean()) - baseline)
    if min(first.size, second.size) < 2:
        return None
    va, vb = float(np.var(first, ddof=1)) / first.size, float(np.var(second, ddof=1)) / second.size
    variance, df = satterthwaite([(va, first.size - 1), (vb, second.size - 1)])
    if variance <= 0:
        return halves if halves[0] != halves[1] else None
    significant = t_sf(abs(halves[0] - halves[1]) / math.sqrt(variance), df) < alpha / 2
    return halves if significant else None


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
    where = f" in {base.processes} processes" if base.processes > 1 else ""
    source = (
        f"{base.runs} runs{where}{aside}, {base.n} blocks" if base.runs > 1
        else f"{base.n} blocks" if base.n else "a single figure"
    )  # fmt: skip
    normalized = " normalized by its control," if shown_baseline is not None else ""
    pairs = f"{test.pairs} session pairs, " if test.pairs > 1 else ""
    sees = (
        f", baseline detects >= {detectable_change(base, alpha=alpha) * 100:.1f}%"
        if base.runs > 1
        else ""
    )
    message = (
        f"{metric} {format_metric(metric, current)} vs baseline "
        f"{format_metric(metric, baseline)} ({source}):{normalized} {format_change(change)} "
        f"{format_interval(math.expm1(low), math.expm1(high))} "
        f"{format_confidence(1 - 2 * alpha)}, threshold {threshold * 100:g}%{sees}, p={p:.2g}, "
        f"{pairs}{test.run.n} blocks -> {outcome.value}" + (f" ({why})" if why else "")
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
    alpha: float = DEFAULT_ALPHA,
    may_reject: bool = True,
    min_rounds: int = MIN_EARLY_ROUNDS,
) -> bool:
    """True when measuring more rounds of one session pair cannot reasonably change what
    it contributes (the gate then moves on to the next pair, or decides).

    With at least ``min_rounds`` ratios: the ``1 - 2 * alpha`` interval of the pair's
    change lies inside ``(-threshold, +threshold)`` (clearly ok), below ``-threshold``
    (clearly improved), or, when ``may_reject``, above the threshold (clearly regressed:
    only where a second measurement on fresh pairs follows, in both of its measurements,
    :meth:`~pytest_ortperf.gating.gate.Gate.stop_rule`; such a pair, stopped while it reads
    high, is pooled with the others, which matters only well past the threshold, where a
    pair can stop so); or the pair's own error has become small
    beside the between-pair spread (more blocks cannot narrow the interval), when
    ``may_reject`` or the interval already excludes a regression.
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
    fixed = math.sqrt(max(baseline.between, BETWEEN_RUN_FLOOR**2))
    return (may_reject or not_slower) and test.run.se * test.run.inflation < SETTLED * fixed


def detectable_change(
    baseline: RatioBaseline,
    *,
    alpha: float = DEFAULT_ALPHA,
    power: float = 0.9,
    pairs: int = CHECK_PAIRS,
) -> float:
    """The smallest slowdown (relative, 0.05 = 5%) a check of ``pairs`` session pairs, as
    noisy as the baseline's own runs, finds significant with probability ``power`` at
    one-sided ``alpha`` against ``baseline`` (the "detects >= X%" of the reports). A figure
    of the baseline's noise: the check's spread is taken as known as well as the
    baseline's runs know it, where :func:`ratio_test` gives the check's own pairs their
    own m - 1 degrees of freedom and a check near the threshold measures on until decided."""
    k, m = baseline.runs, max(int(pairs), 1)
    between = max(baseline.between, BETWEEN_RUN_FLOOR**2)
    within = baseline.within if baseline.within else baseline.variance
    return _detectable(
        [
            (between * (1.0 / k + 1.0 / m), baseline.between_df + m - 1),
            (within * (1.0 / k + 1.0 / m), max(baseline.n - k, 1)),
            (baseline.process_variance, math.inf),
        ],
        alpha,
        power,
    )


def process_limit(baseline: RatioBaseline, *, alpha: float = DEFAULT_ALPHA) -> float:
    """The smallest slowdown (relative) a check against ``baseline`` finds with 90% power
    at one-sided ``alpha`` were its session pairs and the baseline's without error: what
    the difference between the check's process and the baseline's leaves
    (:attr:`RatioBaseline.process_variance`). Where a baseline's processes measured that
    past the threshold, more session pairs cannot settle a verdict, and a check does not
    measure on (:class:`~pytest_ortperf.gating.gate.Gate`)."""
    return _detectable([(baseline.process_variance, math.inf)], alpha, 0.9)


def _detectable(parts: Sequence[tuple[float, float]], alpha: float, power: float) -> float:
    variance, df = satterthwaite(parts)
    sd = math.sqrt(variance)
    return math.expm1((t_quantile(1.0 - alpha, df) + t_quantile(power, df)) * sd)


SETTLED = 0.3
"""A session pair's measurement ends once its own standard error is below this share of the
between-pair spread (its estimate then moves less than the pairs differ)."""

BETWEEN_RUN_FLOOR = 0.0025
"""Least standard deviation of a log-ratio between session pairs assumed where it was
measured: a quarter percent (measured on the development VM: 0.37% between processes,
0.45% between session pairs in one process, both within the runs' own noise)."""

BETWEEN_PROCESS_FLOOR = 0.0025
"""Standard deviation allowed for what differs between the baseline's process and the
check's and no session pair inside one process can show (allocation alignment, ASLR, the
cores the process got): a quarter percent, the size of the between-process spread
measured on the development VM (0.37%, within the runs' own noise)."""

OUTLIER_RUN_Z = 5.0
"""How many robust standard deviations from the other runs a baseline run may read before
it is set aside (normal runs go that far about once in two million)."""

BETWEEN_RUN_UNKNOWN = 0.01
"""Standard deviation of a log-ratio between runs assumed where nothing measured it (a
baseline of one run, schema 1 files): one percent, conservative."""


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
