"""Pure statistics: summaries of timing samples, distribution-free intervals and the rank
test (Wilcoxon signed-rank) with its Hodges-Lehmann estimate, Student's t, and the
summary of one run's values the gate works on.

Everything here takes plain sequences of floats and returns plain values, so it can be
tested with injected samples and reused by the gate, the store and the reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Summary:
    """Statistics of a measurement, in seconds per call."""

    n: int
    median: float
    mean: float
    std: float
    min: float
    max: float
    p90: float
    p99: float
    iqr: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of already sorted values."""
    if len(sorted_values) == 0:
        raise ValueError("quantile of an empty sequence")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def median(values: Sequence[float]) -> float:
    return quantile(sorted(float(x) for x in values), 0.5)


def summarize(samples: Sequence[float]) -> Summary:
    """Summary statistics of samples (seconds per call); ``std`` is the sample std."""
    if len(samples) == 0:
        raise ValueError("cannot summarize an empty list of samples")
    ordered = sorted(float(x) for x in samples)
    n = len(ordered)
    mean = math.fsum(ordered) / n
    var = math.fsum((x - mean) ** 2 for x in ordered) / (n - 1) if n > 1 else 0.0
    return Summary(
        n=n,
        median=quantile(ordered, 0.5),
        mean=mean,
        std=math.sqrt(var),
        min=ordered[0],
        max=ordered[-1],
        p90=quantile(ordered, 0.9),
        p99=quantile(ordered, 0.99),
        iqr=quantile(ordered, 0.75) - quantile(ordered, 0.25),
    )


def ratio_of_blocks(reference: Sequence[float], candidate: Sequence[float]) -> list[float]:
    """Per-pair ratios candidate/reference of block timings measured side by side."""
    if len(reference) != len(candidate):
        raise ValueError(
            f"paired samples differ in length: {len(reference)} reference vs "
            f"{len(candidate)} candidate"
        )
    ratios = []
    for ref, cand in zip(reference, candidate, strict=True):
        if ref <= 0:
            raise ValueError(f"reference block time must be positive, got {ref}")
        ratios.append(cand / ref)
    return ratios


def paired_ratio(ratios: Sequence[float], confidence: float = 0.95) -> RatioEstimate:
    """Hodges-Lehmann estimate of paired ratios (on log scale, the gate's estimator) with
    its distribution-free signed-rank interval; ``(min, max)`` when there are too few
    ratios to reach ``confidence``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    logs = np.log(np.asarray(ratios, dtype=np.float64))
    if logs.size == 0 or not np.all(np.isfinite(logs)):
        raise ValueError("paired ratios must be a non-empty sequence of positive numbers")
    shift = signed_rank_shift(logs, (1.0 - confidence) / 2.0)
    low = math.exp(shift.low) if math.isfinite(shift.low) else float(np.exp(logs.min()))
    high = math.exp(shift.high) if math.isfinite(shift.high) else float(np.exp(logs.max()))
    return RatioEstimate(math.exp(shift.estimate), low, high, confidence)


@dataclass(frozen=True)
class RatioEstimate:
    """A ratio candidate/reference and its confidence interval."""

    ratio: float
    low: float
    high: float
    confidence: float


# --------------------------------------------------------------------------- rank statistics

EXACT_MAX_N = 100
"""Largest sample size for which the signed-rank test uses its exact null distribution."""

_NORMAL = NormalDist()

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Shift:
    """A location shift on log scale: estimate, interval at ``1 - 2 * alpha`` and one-sided
    p-values for "greater than 0" and "less than 0". Infinite bounds: too few values."""

    estimate: float
    low: float
    high: float
    p_greater: float
    p_less: float
    n: int


def _upper_tail(z: float) -> float:
    """P(Z >= z) for a standard normal, accurate far in the tail."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _midranks(values: FloatArray) -> tuple[FloatArray, float]:
    """1-based ranks with ties averaged, and the tie term ``sum(t**3 - t)``."""
    n = values.size
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    cuts = np.flatnonzero(np.diff(ordered) != 0) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [n]))
    counts = ends - starts
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, counts)
    tie_term = float(np.sum(counts.astype(np.float64) ** 3 - counts))
    return ranks, tie_term


PAIRS_CACHED = 8
"""Sizes whose Walsh-average index pairs are kept (see ``_pairs``)."""


@cache
def _signed_rank_cdf(n: int) -> FloatArray:
    """Exact null CDF of the Wilcoxon signed-rank statistic T+ for n values (no ties)."""
    pmf = np.ones(1, dtype=np.float64)
    for i in range(1, n + 1):
        nxt = np.zeros(pmf.size + i, dtype=np.float64)
        nxt[: pmf.size] += pmf
        nxt[i:] += pmf
        pmf = nxt / 2.0
    cdf = np.cumsum(pmf)
    cdf.flags.writeable = False
    return cdf


@lru_cache(maxsize=PAIRS_CACHED)
def _pairs(n: int) -> tuple[np.ndarray[Any, np.dtype[np.intp]], np.ndarray[Any, np.dtype[np.intp]]]:
    """The index pairs ``i <= j`` of ``n`` values (their Walsh averages), built once per n:
    the gate asks its stop rule many times at the same sizes. Only the last few sizes are
    kept: n(n+1)/2 pairs take 36 MB at 1500 values, and a run meets many sizes."""
    i, j = np.triu_indices(n)
    i.flags.writeable = False
    j.flags.writeable = False
    return i, j


def _bounds(ordered: FloatArray, c: int) -> tuple[float, float]:
    """``[x_(c), x_(M+1-c)]`` (1-based order statistics), infinite when ``c < 1``."""
    if c < 1:
        return -math.inf, math.inf
    return float(ordered[c - 1]), float(ordered[ordered.size - c])


def signed_rank_shift(d: Sequence[float] | FloatArray, alpha: float) -> Shift:
    """Hodges-Lehmann estimate, interval and one-sided Wilcoxon p-values for paired values.

    Zeros are dropped from the test (Wilcoxon's method) but kept in the estimate. The exact
    null distribution is used without ties or zeros up to :data:`EXACT_MAX_N` values, else
    the normal approximation with tie correction and continuity correction.
    """
    x = np.asarray(d, dtype=np.float64)
    n_all = x.size
    if n_all == 0:
        raise ValueError("no values to test")
    i, j = _pairs(n_all)
    walsh = np.sort((x[i] + x[j]) / 2.0)
    middle = walsh.size // 2
    estimate = float(walsh[middle] if walsh.size % 2 else (walsh[middle - 1] + walsh[middle]) / 2)

    nonzero = x[x != 0]
    n = nonzero.size
    z = _NORMAL.inv_cdf(1.0 - alpha)
    if n == 0:
        p_greater = p_less = 1.0
    else:
        ranks, tie_term = _midranks(np.abs(nonzero))
        t_plus = float(ranks[nonzero > 0].sum())
        if tie_term == 0 and n == n_all and n <= EXACT_MAX_N:
            cdf = _signed_rank_cdf(n)
            t = round(t_plus)
            top = cdf.size - 1  # n(n+1)/2; T+ is symmetric about top / 2
            p_greater = float(cdf[top - t])
            p_less = float(cdf[t])
        else:
            mean = n * (n + 1) / 4.0
            var = n * (n + 1) * (2 * n + 1) / 24.0 - tie_term / 48.0
            sd = math.sqrt(max(var, 0.0))
            if sd == 0:
                p_greater = p_less = 1.0
            else:
                p_greater = _upper_tail((t_plus - mean - 0.5) / sd)
                p_less = _upper_tail((mean - t_plus - 0.5) / sd)

    # Interval from the null distribution of all n_all values (ties ignored, as usual).
    if n_all <= EXACT_MAX_N:
        cdf = _signed_rank_cdf(n_all)
        c = int(np.searchsorted(cdf, alpha * (1 + 1e-9), side="right"))
    else:
        mean = n_all * (n_all + 1) / 4.0
        sd = math.sqrt(n_all * (n_all + 1) * (2 * n_all + 1) / 24.0)
        c = math.floor(mean - 0.5 - z * sd) + 1
    low, high = _bounds(walsh, c)
    return Shift(estimate, low, high, min(p_greater, 1.0), min(p_less, 1.0), n_all)


def min_attainable_p(n: int) -> float:
    """The smallest one-sided p-value the signed-rank test can give with ``n`` pairs."""
    return 0.5**n if n > 0 else 1.0


# --------------------------------------------------------------------------- Student's t

_EPS = 1e-15
_TINY = 1e-300
_MAX_ITER = 500


def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz's method)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_ITER + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta ({a}, {b}, {x}): no convergence")


def regularized_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` for ``a, b > 0``, ``0 <= x
    <= 1`` (continued fraction, relative error about 1e-13)."""
    if not (a > 0 and b > 0):
        raise ValueError(f"regularized_beta: a and b must be positive, got {a}, {b}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"regularized_beta: x must be in [0, 1], got {x}")
    return _ibeta(a, b, x, 1.0 - x)


def _ibeta(a: float, b: float, x: float, y: float) -> float:
    """``I_x(a, b)`` with ``y = 1 - x`` given as accurately as the caller knows it."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    front = math.exp(log_front)
    # The fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, y) / b


T_NORMAL_DF = 1e7
"""Degrees of freedom from which Student's t is taken as the standard normal (an
infinite ``df``: a variance known exactly)."""


def t_sf(t: float, df: float) -> float:
    """Upper tail ``P(T > t)`` of Student's t with ``df > 0`` (possibly infinite) degrees
    of freedom."""
    if not df > 0:
        raise ValueError(f"t_sf: degrees of freedom must be positive, got {df}")
    if math.isnan(t):
        return math.nan
    if math.isinf(t * t):
        return 0.0 if t > 0 else 1.0
    if df >= T_NORMAL_DF:
        return _upper_tail(t)
    # P(|T| > |t|) = I_x(df / 2, 1 / 2) with x = df / (df + t^2); 1 - x computed directly
    # (for small |t|, x rounds to 1).
    t2 = t * t
    both = _ibeta(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))
    tail = 0.5 * both
    return tail if t >= 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    """``P(T <= t)`` of Student's t with ``df > 0`` degrees of freedom."""
    return t_sf(-t, df)


def _t_pdf(t: float, df: float) -> float:
    """The density of Student's t with ``df > 0`` (possibly infinite) degrees of freedom."""
    if df >= T_NORMAL_DF:
        return math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    log_norm = math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df > 0`` degrees of freedom, ``0 < q < 1``
    (bracketing, then Newton's method on the tail kept inside the bracket, bisecting where
    a step would leave it; to machine precision)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"t_quantile: q must be in (0, 1), got {q}")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    tail = 1.0 - q
    low, high = 0.0, 1.0
    while t_sf(high, df) > tail:
        low, high = high, high * 2.0
        if high > 1e300:
            return math.inf
    # The gate asks at every look: bisection to machine precision took about 60 tails.
    t = min(max(_NORMAL.inv_cdf(q), low), high)
    for _ in range(200):
        excess = t_sf(t, df) - tail  # > 0: t is below the quantile
        if excess > 0:
            low = t
        else:
            high = t
        density = _t_pdf(t, df)
        step = excess / density if density > 0 else math.inf
        nxt = t + step
        if not low < nxt < high:
            nxt = 0.5 * (low + high)
        if abs(nxt - t) <= 1e-15 * abs(t) or nxt in (low, high):
            return nxt
        t = nxt
    return t


def satterthwaite(parts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Sum of independent variance estimates ``(variance, degrees of freedom)`` and the
    Welch-Satterthwaite degrees of freedom of the sum (infinite parts are known exactly)."""
    total = math.fsum(v for v, _ in parts)
    denominator = math.fsum(v * v / df for v, df in parts if v > 0 and math.isfinite(df))
    if total <= 0:
        return 0.0, math.inf
    return total, (total * total / denominator) if denominator > 0 else math.inf


# --------------------------------------------------------------------------- one run


DEPENDENCE_CAP = 0.8
"""Largest lag-1 autocorrelation :class:`RunEstimate` corrects for; beyond it the blocks say
too little about the run to be corrected."""


def lag1_autocorrelation(values: Sequence[float] | FloatArray) -> float:
    """Lag-1 autocorrelation of values around their median (robust to a few outliers);
    0 for fewer than three values or no spread."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 3:
        return 0.0
    centred = x - np.median(x)
    denominator = float(np.dot(centred, centred))
    if denominator == 0:
        return 0.0
    return float(np.dot(centred[:-1], centred[1:]) / denominator)


@dataclass(frozen=True)
class RunEstimate:
    """The location of one measurement's values (log-ratios, log-times): Hodges-Lehmann
    estimate, its standard error from the signed-rank 95% interval, and the lag-1
    autocorrelation of the values in measuring order."""

    estimate: float
    se: float
    rho: float
    n: int

    @property
    def inflation(self) -> float:
        """Factor on ``se`` for positively dependent values (AR(1) variance of a mean)."""
        r = min(max(self.rho, 0.0), DEPENDENCE_CAP)
        return math.sqrt((1.0 + r) / (1.0 - r))

    @property
    def dependent(self) -> bool:
        """Whether the autocorrelation is significant (one-sided 5%, white-noise bound)."""
        return self.n >= 8 and self.rho > 1.645 / math.sqrt(self.n)


def run_estimate(values: Sequence[float] | FloatArray) -> RunEstimate:
    """:class:`RunEstimate` of one measurement's values in measuring order."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no values to estimate from")
    shift = signed_rank_shift(x, 0.025)
    if math.isfinite(shift.low) and math.isfinite(shift.high):
        se = (shift.high - shift.low) / (2.0 * 1.959964)
    elif x.size >= 2:
        se = float(np.std(x, ddof=1)) / math.sqrt(x.size)
    else:
        se = math.inf
    return RunEstimate(shift.estimate, se, lag1_autocorrelation(x), int(x.size))


Z95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n`` (95% by default); (nan, nan)
    when ``n`` is 0. The benchmarks report their rates (false alarms, detections) with it."""
    if n <= 0:
        return math.nan, math.nan
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
