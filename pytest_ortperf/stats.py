"""Pure statistics: summaries of timing samples and distribution-free intervals.

Everything here takes plain sequences of floats and returns plain values, so it can be
tested with injected samples and reused by the gate, the store and the reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


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


def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return math.fsum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2.0**n


def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median (binomial order statistics).

    Returns the widest interval ``(min, max)`` when there are too few values to reach the
    requested confidence.
    """
    if len(values) == 0:
        raise ValueError("median_ci of an empty sequence")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    ordered = sorted(float(x) for x in values)
    n = len(ordered)
    alpha = 1.0 - confidence
    # Largest k with P(X <= k - 1) <= alpha / 2: the interval is [x_(k), x_(n-k+1)] (1-based).
    k = 0
    while k + 1 <= n // 2 and _binom_cdf(k, n) <= alpha / 2:
        k += 1
    if k == 0:
        return ordered[0], ordered[-1]
    return ordered[k - 1], ordered[n - k]


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
    """Median of paired ratios with its distribution-free interval."""
    low, high = median_ci(ratios, confidence)
    return RatioEstimate(ratio=median(ratios), low=low, high=high, confidence=confidence)


@dataclass(frozen=True)
class RatioEstimate:
    """A ratio candidate/reference and its confidence interval."""

    ratio: float
    low: float
    high: float
    confidence: float
