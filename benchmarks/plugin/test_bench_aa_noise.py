"""How far an A/A ratio strays from 1.0 by chance, and what one compare costs.

Run with ``pytest --ortperf -s benchmarks/plugin/test_bench_aa_noise.py``: the figures are
printed against their targets and recorded with ``record_property``; they are never
asserted, so a loaded machine cannot fail the test. Targets: >= 95% of the A/A ratios
within +-2% of 1.0, median wall time of one compare at the default budget <= 1.5 s.
"""

import math
import time

from pytest_ortperf import models

REPEATS = 50
TARGET_WITHIN = 0.95
TARGET_WALL_S = 1.5


def test_attention_aa_noise(ort_session, ort_feeds, ortperf, record_property):
    """An A/A compare (two sessions of the same attention model) repeated 50 times."""
    reference = ort_session(models.attention())
    candidate = ort_session(models.attention())
    feeds = ort_feeds(reference, dims={"B": 4})
    ratios, walls = [], []
    for i in range(REPEATS):
        t0 = time.perf_counter()
        result = ortperf.compare(reference, candidate, feeds, name=f"aa_{i:02d}")
        walls.append(time.perf_counter() - t0)
        ratios.append(result.ratio)
    within = sum(abs(r - 1.0) <= 0.02 for r in ratios) / len(ratios)
    deviations = sorted(abs(r - 1.0) for r in ratios)
    p95 = deviations[int(0.95 * len(deviations)) - 1]
    wall = sorted(walls)[len(walls) // 2]
    print(
        f"\nA/A: {within:.0%} of {REPEATS} ratios within +-2% (target >= {TARGET_WITHIN:.0%}), "
        f"95th percentile |ratio-1| = {p95:.4f}, median wall time per compare {wall:.2f} s "
        f"(target <= {TARGET_WALL_S} s)"
    )
    record_property("aa_within_2pct", within)
    record_property("aa_p95_deviation", p95)
    record_property("compare_wall_s", wall)
    assert len(ratios) == REPEATS
    assert all(math.isfinite(r) and r > 0 for r in ratios)
