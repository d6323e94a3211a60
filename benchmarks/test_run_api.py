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


def bare_loop_median(binding, k: int, blocks: int) -> float:
    """The reference: a plain perf_counter_ns loop over the C-level run_with_iobinding."""
    run = binding.session.sess._sess.run_with_iobinding
    c_binding = binding.binding._iobinding
    options = ort.RunOptions()
    per_call = []
    for _ in range(blocks):
        t0 = time.perf_counter_ns()
        for _ in range(k):
            run(c_binding, options)
        per_call.append((time.perf_counter_ns() - t0) * 1e-9 / k)
    return median(per_call)


def test_harness_overhead(ort_session, ort_feeds, ort_binding, ortperf, record_property):
    """Median per call reported by the engine vs a bare loop, interleaved ten times."""
    session = ort_session(models.linear_regression(features=10))
    binding = ort_binding(session, ort_feeds(session, dims={"N": 1}))
    ratios = []
    for _ in range(10):
        samples = ortperf.engine.measure(binding.call)
        ours = median(samples.values)
        theirs = bare_loop_median(binding, samples.calls_per_block, len(samples.values))
        ratios.append(ours / theirs)
    ratio = median(ratios)
    result = ortperf.latency(binding, name="linear_regression_10")
    print(
        f"\nper call {result.median * 1e6:.2f} us; harness/bare ratio {ratio:.4f} "
        f"(min {min(ratios):.4f}, max {max(ratios):.4f})"
    )
    record_property("harness_overhead_ratio", ratio)
    assert ratio <= 1.03
