"""The harness's own overhead: the engine's timed block against a bare loop.

Run with ``pytest --ortperf -s benchmarks/plugin/test_bench_harness.py``: the figure is
printed against its target and recorded with ``record_property``; it is never asserted, so
a loaded machine cannot fail the test. Target: harness/bare ratio <= 1.03.
"""

import math
import time

import onnxruntime as ort

from pytest_ortperf import models
from pytest_ortperf.stats import median

TARGET_RATIO = 1.03
PAIRS = 200


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
    for i in range(PAIRS):
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
        f"{ratio:.4f} over {PAIRS} paired blocks (target <= {TARGET_RATIO})"
    )
    record_property("harness_overhead_ratio", ratio)
    assert len(ratios) == PAIRS
    assert all(math.isfinite(r) and r > 0 for r in ratios)
