"""Latency budgets: calls and time to a decision against the distance between the true p99
and the budget, and the calls a decision takes against MLPerf LoadGen's minimums.

Pure simulation with a fake clock (no timing: the figures do not depend on the machine).
Single calls are drawn from a lognormal distribution (sigma 0.5: p99 about 3.2 times the
median, a typical CPU single-call tail) and the clock advances by each call's duration. A
measurement starts as ``ortperf.per_call`` does (1000 calls) and goes on as
:func:`pytest_ortperf.gating.slo.keep_measuring` decides, against a p99 budget 10%, 20% and
50% above and below the true p99, and at it. Per cell: the share of each verdict (Wilson
95% intervals), the calls at the decision (median and 90th percentile), and the time to the
decision in calls' worth of the median call and in seconds for a 1 ms median.

Then the minimums: the calls a budget with no call over it needs before it is ``met``, at
99% confidence (LoadGen's figures, 64 for p90 and 662 for p99) and at the per-look
confidence the plugin uses (``1 - alpha / LOOKS``), with the cap a measurement is kept
going to.

Run with ``pytest -s benchmarks/plugin/test_bench_slo.py`` (about a minute; set
``ORTPERF_SLO_N`` to change the simulations per cell, default 500). What is asserted is
only that every cell ran and that the minimums are LoadGen's.
"""

from __future__ import annotations

import math
import os

import numpy as np

from pytest_ortperf.gating import slo
from pytest_ortperf.stats import wilson_interval

SIMULATIONS = int(os.environ.get("ORTPERF_SLO_N", "500"))
SIGMA = 0.5
TRUE_P99 = math.exp(SIGMA * 2.3263478740408408)
FIRST_CALLS = 1000
ALPHA = 0.01
DISTANCES = (0.5, 0.2, 0.1, 0.0, -0.1, -0.2, -0.5)
MEDIAN_CALL_S = 1e-3


def rate(k: int, n: int) -> str:
    low, high = wilson_interval(k, n)
    return f"{k / n:6.1%} [{low:.1%}, {high:.1%}]"


def simulate(distance: float, seed: int) -> tuple[str, int, float]:
    """One measurement against a budget ``distance`` above the true p99: its verdict, its
    calls and the fake clock's reading at the decision (in median calls)."""
    rng = np.random.default_rng(seed)
    clock = [0.0]

    def draw(m: int) -> list[float]:
        calls = rng.lognormal(0.0, SIGMA, m)
        clock[0] += float(calls.sum())
        return list(calls.tolist())

    budget = slo.Budget("p99", 0.99, (1.0 + distance) * TRUE_P99)
    values, (verdict,) = slo.keep_measuring(draw(FIRST_CALLS), draw, [budget], ALPHA)
    return verdict.outcome, len(values), clock[0]


def test_time_to_decision_by_distance() -> None:
    print(
        f"\n{SIMULATIONS} simulations per cell; lognormal calls (sigma {SIGMA}); first look "
        f"at {FIRST_CALLS} calls; alpha {ALPHA} over at most {slo.LOOKS} looks; cap "
        f"{slo.cap_calls(0.99, ALPHA)} calls"
    )
    print(
        f"{'budget vs true p99':>19}  {'met':>21}  {'violated':>21}  {'inconclusive':>21}  "
        f"{'calls p50':>9}  {'calls p90':>9}  {'time p50':>10}  {'at 1 ms':>8}"
    )
    for distance in DISTANCES:
        runs = [simulate(distance, 1000 * i + 7) for i in range(SIMULATIONS)]
        outcomes = [r[0] for r in runs]
        calls = np.array([r[1] for r in runs])
        times = np.array([r[2] for r in runs])
        t50 = float(np.median(times))
        print(
            f"{distance:>+18.0%}   {rate(outcomes.count('met'), SIMULATIONS)}  "
            f"{rate(outcomes.count('violated'), SIMULATIONS)}  "
            f"{rate(outcomes.count('inconclusive'), SIMULATIONS)}  "
            f"{np.median(calls):>9.0f}  {np.quantile(calls, 0.9):>9.0f}  "
            f"{t50:>8.0f} x  {t50 * MEDIAN_CALL_S:>6.2f} s"
        )
        assert len(runs) == SIMULATIONS


def test_calls_per_decision_against_loadgen() -> None:
    print(f"\n{'quantile':>8}  {'LoadGen 99%':>11}  {'per look':>9}  {'cap':>7}")
    for q in (0.9, 0.99, 0.999):
        loadgen = slo.calls_needed(q, 0.99)
        per_look = slo.calls_needed(q, 1.0 - ALPHA / slo.LOOKS)
        print(
            f"{'p' + format(q * 100, 'g'):>8}  {loadgen:>11}  {per_look:>9}  {slo.cap_calls(q, ALPHA):>7}"
        )
    assert slo.calls_needed(0.9, 0.99) == 64
    assert slo.calls_needed(0.99, 0.99) == 662
