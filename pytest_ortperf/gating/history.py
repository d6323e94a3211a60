"""Pure rule for absolute latency judged against the history of earlier runs.

DESIGN.md 3, item 3: an absolute latency varies between runs (processes, machines of one
kind, days) by more than the blocks of one run show, so the unit of replication is the
run. The current run's median is judged against the per-run medians of earlier runs on a
matching fingerprint (:func:`pytest_ortperf.store.history.run_medians` reads them), never against
the blocks of one stored run.

Method, on log scale: the ``k`` earlier run medians ``y_i`` give mean ``m`` and standard
deviation ``s`` (``k - 1`` degrees of freedom). If the current run ``x`` comes from the
same distribution (normal on log scale), ``(x - m) / (s * sqrt(1 + 1/k))`` follows
Student's t with ``k - 1`` degrees of freedom: a one-sided prediction-interval test. The
estimated change is ``exp(x - m) - 1``; its interval is the ``1 - 2 * alpha`` prediction
interval, so "lower bound > 0" matches "p < alpha" as in :mod:`~pytest_ortperf.gating.rules`.

Outlier runs: an earlier run whose median the others predict with a two-sided p-value
under :data:`OUTLIER_P` / ``k`` (a deleted-residual test, :func:`outlier_runs`) is set aside
(at most a quarter of them, from :data:`MIN_RUNS` runs on), and said so: one run on a busy
runner would otherwise widen every later verdict's interval until it gates nothing.

Outcomes, for a relative ``threshold`` and a one-sided ``alpha``: regressed when the change
exceeds the threshold and ``p < alpha``; improved symmetrically (below ``-log1p(threshold)``
on log scale, as in :mod:`~pytest_ortperf.gating.rules`); inconclusive when beyond the
threshold but not significant, or when within it but the interval reaches past twice the
threshold (too noisy to tell: never ``ok``, as in :mod:`~pytest_ortperf.gating.rules`); ok
otherwise. With fewer than :data:`MIN_RUNS` earlier runs
the figure is reported, not gated (:data:`NOT_GATED`).

Everything here is pure: no I/O, no clock (Student's t comes from
:mod:`pytest_ortperf.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.stats import t_cdf, t_quantile, t_sf
from pytest_ortperf.units import format_change, format_interval, format_seconds

MIN_RUNS = 5
"""Fewest earlier runs (per-run medians on a matching fingerprint) a latency is gated
against. With 4 degrees of freedom the one-sided 99% t quantile is already 3.75 (vs 2.33
for a known spread): fewer runs give an interval too wide to gate anything, and a spread
estimated from 2 to 4 values is itself unreliable. Below it the latency is reported only."""

MIN_SPREAD = 0.005
"""Floor on the spread of the earlier runs' log-medians (0.5%, relative). Earlier runs
that agree to better than this (identical medians, a cached figure, a very quiet history)
would otherwise make any small difference "significant"; no CPU latency repeats across
processes to better than this."""

NOT_GATED = Outcome.NOT_COMPARABLE
"""Outcome of a latency with too few earlier runs: it passes under ``--ortperf-strict``
too (``new`` fails there, and its hints say ``--ortperf-update`` would record a baseline,
which is not what is missing here: more runs are), and every report shows it as a
reported-but-not-gated figure (``recorded`` means "no gate looked at it", and the terminal
summary drops it from the gated table)."""

OUTLIER_P = 0.001
"""Chance that an earlier run is set aside as an outlier when none is (Bonferroni over the
runs): small, since each one set aside narrows the prediction interval."""

METRIC = "latency"


# --------------------------------------------------------------------------- the rule


def _check(
    current: float, earlier: Sequence[float], threshold: float, alpha: float, min_runs: int
) -> list[float]:
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be a non-negative fraction, got {threshold}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    if min_runs < 2:
        raise ValueError(f"min_runs must be at least 2 (a spread needs two runs), got {min_runs}")
    if not (math.isfinite(current) and current > 0):
        raise ValueError(f"current latency must be finite and positive, got {current}")
    values = [float(v) for v in earlier]
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError("earlier run medians must be finite and positive")
    return values


def outlier_runs(logs: Sequence[float]) -> list[int]:
    """Indexes of the log values far from the others (see the module's docstring), the
    farthest first: one at a time, the value farthest from the mean, set aside when its
    distance from the mean of the others, in their standard deviation (at least
    :data:`MIN_SPREAD`) as a prediction, has a two-sided Student's t p-value under
    :data:`OUTLIER_P` divided by the number of values; at most a quarter of them, none
    below :data:`MIN_RUNS` values. (The deleted residual grows with the distance from the
    mean of all, so the farthest value is the one to test.) O(k) per value set aside."""
    kept = dict(enumerate(float(y) for y in logs))
    total = math.fsum(kept.values())
    squares = math.fsum(y * y for y in kept.values())
    far: list[int] = []
    while len(kept) >= MIN_RUNS and len(far) < (len(logs) - 1) // 4:
        n = len(kept)
        mean = total / n
        i = max(kept, key=lambda j: abs(kept[j] - mean))
        y = kept[i]
        m = (total - y) / (n - 1)
        var = max((squares - y * y) - (n - 1) * m * m, 0.0) / (n - 2)
        scale = max(math.sqrt(var), math.log1p(MIN_SPREAD)) * math.sqrt(1.0 + 1.0 / (n - 1))
        if 2.0 * t_sf(abs(y - m) / scale, n - 2) >= OUTLIER_P / n:
            break
        far.append(i)
        del kept[i]
        total, squares = total - y, squares - y * y
    return far


def _runs(k: int) -> str:
    return f"{k} run median" + ("" if k == 1 else "s")


def judge_against_runs(
    current: float,
    earlier: Sequence[float],
    *,
    threshold: float,
    alpha: float,
    min_runs: int = MIN_RUNS,
) -> Verdict:
    """Judge the current run's median latency (seconds per call) against the per-run
    medians of ``earlier`` runs on a matching fingerprint (metric ``latency``).

    ``baseline`` in the verdict is the geometric mean of the earlier medians, ``current``
    is ``current``, ``change`` is ``current / baseline - 1`` and ``[low, high]`` its
    ``1 - 2 * alpha`` prediction interval; ``p_value`` is one-sided in the direction of the
    change, ``n`` the number of earlier runs. With fewer than ``min_runs`` earlier runs the
    outcome is :data:`NOT_GATED` (passes, even under strict) with ``p_value`` None and the
    message ``... not gated: N of MIN earlier runs on this fingerprint``. The spread of the
    earlier runs is floored at :data:`MIN_SPREAD`.
    """
    values = _check(current, earlier, threshold, alpha, min_runs)
    k = len(values)
    logs = [math.log(v) for v in values]
    x = math.log(current)
    if k < min_runs:
        gated = f"not gated: {k} of {min_runs} earlier runs on this fingerprint"
        if k == 0:
            message = f"{METRIC} {format_seconds(current)}: {gated}"
            nan = math.nan
            return Verdict(METRIC, NOT_GATED, nan, current, nan, nan, nan, threshold, alpha,
                           None, 0, message)  # fmt: skip
        m = math.fsum(logs) / k
        baseline = math.exp(m)
        change = math.expm1(x - m)
        message = (
            f"{METRIC} {format_seconds(current)} vs earlier runs {format_seconds(baseline)} "
            f"(geometric mean of {_runs(k)}, {format_change(change)}): {gated}"
        )
        return Verdict(METRIC, NOT_GATED, baseline, current, change, change, change, threshold,
                       alpha, None, k, message)  # fmt: skip

    far = outlier_runs(logs)
    aside = [logs[i] for i in far]
    logs = [y for i, y in enumerate(logs) if i not in far]
    k = len(logs)
    m = math.fsum(logs) / k
    outliers = [math.expm1(y - m) for y in aside]
    s = math.sqrt(math.fsum((y - m) ** 2 for y in logs) / (k - 1))
    floor = math.log1p(MIN_SPREAD)
    floored = s < floor
    spread = max(s, floor)
    scale = spread * math.sqrt(1.0 + 1.0 / k)
    df = k - 1
    d = x - m
    t = d / scale
    p_greater, p_less = t_sf(t, df), t_cdf(t, df)
    q = t_quantile(1.0 - alpha, df)
    limit = math.log1p(threshold)
    why = ""
    if d > limit:
        if p_greater < alpha:
            outcome = Outcome.REGRESSED
        else:
            outcome, why = Outcome.INCONCLUSIVE, "slower but not significant"
    elif d < -limit:
        if p_less < alpha:
            outcome = Outcome.IMPROVED
        else:
            outcome, why = Outcome.INCONCLUSIVE, "faster but not significant"
    elif d + q * scale > math.log1p(2 * threshold):
        outcome = Outcome.INCONCLUSIVE
        why = "interval reaches past twice the threshold: too noisy to tell"
    else:
        outcome = Outcome.OK
    baseline = math.exp(m)
    change = math.expm1(d)
    low, high = math.expm1(d - q * scale), math.expm1(d + q * scale)
    p = p_greater if d >= 0 else p_less
    notes = [why] if why else []
    if outliers:
        shown = ", ".join(format_change(x) for x in outliers)
        notes.append(f"{_runs(len(outliers))} set aside as outliers ({shown} from the others)")
    if floored:
        notes.append(f"spread of earlier runs {math.expm1(s) * 100:.2g}% taken as {MIN_SPREAD:.1%}")
    message = (
        f"{METRIC} {format_seconds(current)} vs earlier runs {format_seconds(baseline)} "
        f"(geometric mean of {_runs(k)}): {format_change(change)} "
        f"{format_interval(low, high)} "
        f"{(1 - 2 * alpha) * 100:g}% prediction interval, threshold {threshold * 100:g}%, "
        f"p={p:.2g}, {k} runs -> {outcome.value}" + (f" ({'; '.join(notes)})" if notes else "")
    )
    return Verdict(
        metric=METRIC,
        outcome=outcome,
        baseline=baseline,
        current=current,
        change=change,
        low=low,
        high=high,
        threshold=threshold,
        alpha=alpha,
        p_value=p,
        n=k,
        message=message,
    )
