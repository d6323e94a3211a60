"""Seed 002: the ways to call onnxruntime on a tiny linear regression, and the harness's own
overhead on it."""

import time

import onnxruntime as ort

from pytest_ortperf import models
from pytest_ortperf.stats import median


def test_run_api_sweep(ort_session, ort_feeds, ortperf, record_property):
    session = ort_session(models.linear_regression(features=10))
    feeds = ort_feeds(session, dims={"N": 1})
    table = ortperf.api_sweep(session, feeds)
    print("\n" + table[["variant", "median", "iqr", "n", "ratio_to_fastest"]].to_string())
    record_property(
        "api_sweep", table[["variant", "median", "ratio_to_fastest"]].to_dict("records")
    )
    # IOBinding without copies does strictly less work than run() with its conversions.
    ratios = dict(zip(table["variant"], table["ratio_to_fastest"]))
    assert ratios["iobinding"] < ratios["run"]


def bare_block(binding, k: int) -> float:
    """The reference: a plain perf_counter_ns loop over the C-level run_with_iobinding."""
    run = binding.session.sess._sess.run_with_iobinding
    c_binding = binding.binding._iobinding
    options = ort.RunOptions()
    t0 = time.perf_counter_ns()
    for _ in range(k):
        run(c_binding, options)
    return (time.perf_counter_ns() - t0) * 1e-9 / k


def test_harness_overhead(ort_session, ort_feeds, ort_binding, ortperf, record_property):
    """The engine's timed block (what ``ortperf.latency`` reports per call) against a bare
    loop, interleaved block by block with the same number of calls, so drift cancels."""
    session = ort_session(models.linear_regression(features=10))
    binding = ort_binding(session, ort_feeds(session, dims={"N": 1}))
    result = ortperf.latency(binding, name="linear_regression_10")
    k = result.calls_per_block
    ratios = []
    for i in range(200):
        if i % 2:
            ours = ortperf.engine.time_block(binding.call, k)
            bare = bare_block(binding, k)
        else:
            bare = bare_block(binding, k)
            ours = ortperf.engine.time_block(binding.call, k)
        ratios.append(ours / bare)
    ratio = median(ratios)
    print(
        f"\nper call {result.median * 1e6:.2f} us ({k} calls per block); harness/bare ratio "
        f"{ratio:.4f} over 200 paired blocks"
    )
    record_property("harness_overhead_ratio", ratio)
    assert ratio <= 1.03
