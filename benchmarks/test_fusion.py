"""Seed 003 and the attention block: fused vs unfused, measured interleaved in one call."""

import pytest

from pytest_ortperf import models


@pytest.mark.parametrize("size", [64, 256])
def test_gemm_concat_vs_one_gemm(ort_session, ort_feeds, ortperf, size):
    """Two Gemm + Concat (reference) against Concat + one Gemm (candidate)."""
    reference = ort_session(models.gemm_concat(fused=False))
    candidate = ort_session(models.gemm_concat(fused=True))
    feeds = ort_feeds(reference, dims={"M": size, "K": size, "N": size})
    result = ortperf.compare(reference, candidate, feeds, name=f"gemm_concat_{size}")
    print(f"\n{size}: candidate/reference {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}]")


def test_attention_fusion(ort_session, ort_feeds, ortperf):
    """ORT folds Transpose + MatMul into FusedMatMul: optimized vs optimization disabled."""
    reference = ort_session(models.attention(), optimization="disable")
    candidate = ort_session(models.attention())
    assert candidate.op_histogram().get("FusedMatMul") == 1
    feeds = ort_feeds(reference, dims={"B": 4})
    result = ortperf.compare(reference, candidate, feeds, name="attention_fused")
    print(f"\nfused/unfused {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}]")


def test_kmeans_graph_optimized(ort_session, ort_feeds, ortperf):
    """Seed 001's KMeans graph (ReduceSumSquare, Gemm, ArgMin) optimized vs not."""
    reference = ort_session(models.kmeans(clusters=16, features=32), optimization="disable")
    candidate = ort_session(models.kmeans(clusters=16, features=32))
    feeds = ort_feeds(reference, dims={"N": 256})
    result = ortperf.compare(reference, candidate, feeds, name="kmeans_optimized")
    print(f"\noptimized/disabled {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}]")


def test_attention_aa_noise(ort_session, ort_feeds, ortperf, record_property):
    """An A/A compare repeated 50 times: how far from 1.0 a ratio strays by chance, and the
    wall time of one compare at the default budget."""
    import time

    reference = ort_session(models.attention())
    candidate = ort_session(models.attention())
    feeds = ort_feeds(reference, dims={"B": 4})
    ratios, walls = [], []
    for i in range(50):
        t0 = time.perf_counter()
        result = ortperf.compare(reference, candidate, feeds, name=f"aa_{i:02d}")
        walls.append(time.perf_counter() - t0)
        ratios.append(result.ratio)
    within = sum(abs(r - 1.0) <= 0.02 for r in ratios) / len(ratios)
    deviations = sorted(abs(r - 1.0) for r in ratios)
    p95 = deviations[int(0.95 * len(deviations)) - 1]
    wall = sorted(walls)[len(walls) // 2]
    print(
        f"\nA/A: {within:.0%} of 50 ratios within +-2%, 95th percentile |ratio-1| = {p95:.4f}, "
        f"median wall time per compare {wall:.2f} s"
    )
    record_property("aa_within_2pct", within)
    record_property("aa_p95_deviation", p95)
    record_property("compare_wall_s", wall)
    assert within >= 0.95
    assert wall <= 1.5
