import math

import numpy as np
import pytest

from pytest_ortperf.stats import (
    paired_ratio,
    quantile,
    ratio_of_blocks,
    signed_rank_shift,
    summarize,
)


def test_summarize_matches_numpy():
    rng = np.random.default_rng(1)
    values = rng.lognormal(0, 0.3, 101)
    s = summarize(values)
    assert s.n == 101
    assert s.median == pytest.approx(np.median(values))
    assert s.mean == pytest.approx(values.mean())
    assert s.std == pytest.approx(values.std(ddof=1))
    assert s.p90 == pytest.approx(np.quantile(values, 0.9))
    assert s.p99 == pytest.approx(np.quantile(values, 0.99))
    q75, q25 = np.quantile(values, [0.75, 0.25])
    assert s.iqr == pytest.approx(q75 - q25)
    assert (s.min, s.max) == (values.min(), values.max())
    assert all(type(v) in (int, float) for v in s.to_dict().values())


def test_summarize_single_sample_and_empty():
    s = summarize([2.5])
    assert (s.n, s.median, s.std, s.iqr) == (1, 2.5, 0.0, 0.0)
    with pytest.raises(ValueError, match="empty"):
        summarize([])


def test_quantile_bounds():
    assert quantile([1.0, 2.0, 3.0], 0.0) == 1.0
    assert quantile([1.0, 2.0, 3.0], 1.0) == 3.0
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)


def test_paired_ratio():
    ratios = ratio_of_blocks([1.0, 2.0, 4.0, 1.0, 1.0, 2.0], [1.1, 2.2, 4.4, 1.1, 1.1, 2.2])
    est = paired_ratio(ratios)
    assert est.ratio == pytest.approx(1.1)
    assert est.low == pytest.approx(1.1) and est.high == pytest.approx(1.1)
    with pytest.raises(ValueError, match="differ in length"):
        ratio_of_blocks([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        ratio_of_blocks([0.0], [1.0])
    assert math.isfinite(est.confidence)


# --------------------------------------------------------------------------- rank statistics


def test_signed_rank_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    d = rng.normal(0.01, 0.02, 30)
    ours = signed_rank_shift(d, 0.01)
    assert ours.p_greater == pytest.approx(stats.wilcoxon(d, alternative="greater").pvalue)
    assert ours.p_less == pytest.approx(stats.wilcoxon(d, alternative="less").pvalue)
    tied = np.round(rng.normal(0.01, 0.02, 150), 2)  # ties and zeros: normal approximation
    ref = stats.wilcoxon(tied, alternative="greater", correction=True, method="approx")
    assert signed_rank_shift(tied, 0.01).p_greater == pytest.approx(ref.pvalue)


def test_intervals_cover_the_true_shift() -> None:
    rng = np.random.default_rng(9)
    trials = 400
    paired = sum(
        s.low <= 0.02 <= s.high
        for s in (signed_rank_shift(rng.normal(0.02, 0.01, 25), 0.01) for _ in range(trials))
    )
    # nominal 98% (two-sided 1 - 2 * alpha)
    assert paired / trials >= 0.96


def test_the_walsh_pairs_of_only_a_few_sizes_are_kept() -> None:
    # n(n+1)/2 index pairs a size: kept for every size a run met, they took gigabytes.
    from pytest_ortperf import stats

    for n in range(200, 200 + 3 * stats.PAIRS_CACHED):
        stats.paired_ratio([1.0 + 0.001 * (i % 7) for i in range(n)], 0.95)
    assert stats._pairs.cache_info().currsize <= stats.PAIRS_CACHED
