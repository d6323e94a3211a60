"""Fused vs unfused graphs: ``ortperf.compare`` measures a reference and a candidate session
interleaved, block by block, and reports the candidate/reference time ratio with its interval.

A ratio below 1 means the candidate is faster. Each comparison below is one call; the
``ortperf`` table at the end of the run lists them all.
"""

import pytest

from pytest_ortperf import models


@pytest.mark.parametrize("size", [64, 256])
def test_gemm_concat_vs_one_gemm(ort_session, ort_feeds, ortperf, size):
    """Two Gemm + Concat (reference) against Concat + one Gemm (candidate), at two sizes:
    one call saved matters on small matrices and fades as the arithmetic grows."""
    reference = ort_session(models.gemm_concat(fused=False))
    candidate = ort_session(models.gemm_concat(fused=True))
    feeds = ort_feeds(reference, dims={"M": size, "K": size, "N": size})
    result = ortperf.compare(reference, candidate, feeds, name=f"gemm_concat_{size}")
    print(f"\n{size}: candidate/reference {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}]")


def test_attention_fusion(ort_session, ort_feeds, ortperf):
    """ORT folds Transpose + MatMul into FusedMatMul: the same model with graph optimization
    on (candidate) and off (reference). The op histogram shows the fusion happened."""
    reference = ort_session(models.attention(), optimization="disable")
    candidate = ort_session(models.attention())
    assert candidate.op_histogram().get("FusedMatMul") == 1
    feeds = ort_feeds(reference, dims={"B": 4})
    result = ortperf.compare(reference, candidate, feeds, name="attention_fused")
    print(f"\nfused/unfused {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}]")


def test_kmeans_graph_optimized(ort_session, ort_feeds, ortperf):
    """A KMeans graph (ReduceSumSquare, Gemm, ArgMin) with graph optimization on vs off."""
    reference = ort_session(models.kmeans(clusters=16, features=32), optimization="disable")
    candidate = ort_session(models.kmeans(clusters=16, features=32))
    feeds = ort_feeds(reference, dims={"N": 256})
    result = ortperf.compare(reference, candidate, feeds, name="kmeans_optimized")
    print(f"\noptimized/disabled {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}]")
