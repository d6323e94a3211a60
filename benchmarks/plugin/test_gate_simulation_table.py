"""The gate procedure in seeded simulations, at sizes the test suite cannot afford: the
table of the performance page. Pure simulation (no timing): any machine gives the same
figures for the same seed.

Run (about 8 minutes at 300 checks on 2 cores; 1000 take about 25)::

    pytest -s benchmarks/plugin/test_gate_simulation_table.py

``ORTPERF_SIM_CHECKS`` [1000] checks per no-change scenario (50 baselines), a fifth of that
per detection level; ``ORTPERF_SIM_ONLY`` [all]: only the scenarios whose name holds this
text, or one of several comma-separated (each keeps its seeds, so its row reads as in the
whole table, and two processes can share the rows). The last rows are the benchmark's
second and third conditions (``gate_sim.CONDITIONS``): checks on a busy machine against
baselines taken quiet, and the other way round; then ``gate_sim.MEASURED``, the block
noise the three-conditions benchmark's compare reads quiet and beside neighbours. Prints rates with 95%
Wilson intervals and the mean budgets a check spent (unchanged, at +6% and at 2x); asserts
only that every check ended with a verdict.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from gate_sim import CONDITIONS, MEASURED, SCENARIOS, STRESS, simulate

from pytest_ortperf.results import Outcome
from pytest_ortperf.stats import wilson_interval


def _rate(k: int, n: int) -> str:
    low, high = wilson_interval(k, n)
    return f"{k / n:.1%} [{low:.1%}, {high:.1%}]"


def test_gate_simulation_table(capsys: object) -> None:
    checks = int(os.environ.get("ORTPERF_SIM_CHECKS", "1000"))
    baselines = 50
    per = max(checks // baselines, 1)
    rows = [
        "| scenario | false alarms (5%) | inconclusive | unstable | false alarms (threshold 0) "
        "| +6% caught | +8% caught | +11% caught | 2x caught | budgets per check "
        "| budgets at +6% | budgets at 2x |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    only = os.environ.get("ORTPERF_SIM_ONLY", "").split(",")
    for i, (name, scenario) in enumerate({**SCENARIOS, **STRESS, **CONDITIONS, **MEASURED}.items()):
        if not any(part in name for part in only):
            continue
        aa = simulate(scenario, baselines, per, seed=100 + i)
        zero = simulate(scenario, baselines // 5, per, seed=200 + i, threshold=0.0)
        caught, spent = [], []
        for j, change in enumerate((0.06, 0.08, 0.11, 1.0)):
            slowed = dataclasses.replace(scenario, change=change)
            tally = simulate(slowed, baselines // 5, per, seed=300 + 10 * i + j)
            caught.append(_rate(tally.total[Outcome.REGRESSED], tally.checks))
            spent.append(sum(tally.budgets) / len(tally.budgets))
        n = aa.checks
        assert n == baselines * per
        rows.append(
            f"| {name} | {_rate(aa.total[Outcome.REGRESSED], n)} | "
            f"{_rate(aa.total[Outcome.INCONCLUSIVE], n)} | {_rate(aa.total[Outcome.UNSTABLE], n)} | "
            f"{_rate(zero.total[Outcome.REGRESSED], zero.checks)} | {' | '.join(caught)} | "
            f"{sum(aa.budgets) / len(aa.budgets):.2f} | {spent[0]:.2f} | {spent[-1]:.2f} |"
        )
        print(rows[-1], flush=True)
    print("\n" + "\n".join(rows))


def _fine_rate(k: int, n: int) -> str:
    """A rate of many trials, to two decimals with its count (``0.00% [0.00%, 0.04%] of
    10000``)."""
    low, high = wilson_interval(k, n)
    return f"{k / n:.2%} [{low:.2%}, {high:.2%}] of {n}"


FAMILY_TESTS = 50
"""Tests in the simulated suite (issue 22: a suite of 50 gated tests)."""


def test_suite_level_table(capsys: object) -> None:
    """The suite level (``--ortperf-family-alpha``): a suite of 50 unchanged tests, each
    with its own baseline, run as CI runs it; without the option each verdict is gated at
    0.01, with ``--ortperf-family-alpha=0.01`` at 0.01/50. Rows: no process-level effect
    (0.5% between session pairs), a process SD of 2% (each baseline's and each check's
    process drawn apart), and the same with every baseline taken in three processes. The power cost: one test slowed +11% or 2x in such a suite,
    caught at each alpha.

    ``ORTPERF_SUITE_RUNS`` [40] CI runs per cell (split over 8 suites, each with baselines of
    its own); ``ORTPERF_SUITE_CHECKS`` [200] checks per detection cell. Runs of one
    suite share its baselines, so their Wilson intervals are a little optimistic.

    Run (about 3 minutes at the defaults; 200 runs and 400 checks, about 10)::

        pytest -s benchmarks/plugin/test_gate_simulation_table.py -k suite_level
    """
    from gate_sim import simulate_suite

    runs = int(os.environ.get("ORTPERF_SUITE_RUNS", "40"))
    checks = int(os.environ.get("ORTPERF_SUITE_CHECKS", "200"))
    suites = 8
    per_suite = max(runs // suites, 1)
    rows_of = {
        "process 0%": SCENARIOS["pairs 0.5%"],
        "process 2%": STRESS["process 2% (stress)"],
        "process 2%, baselines in 3 processes": STRESS["process 2%, baselines in 3 (stress)"],
    }
    alphas = {"none": 0.01, "--ortperf-family-alpha=0.01": 0.01 / FAMILY_TESTS}
    rows = [
        f"{FAMILY_TESTS} unchanged tests a run; rates with 95% Wilson intervals",
        "",
        "| scenario | option (alpha a verdict) | runs with a false alarm | tests failing "
        "| +11% caught "
        "| 2x caught |",
        "|---|---|---|---|---|---|",
    ]
    for i, (name, scenario) in enumerate(rows_of.items()):
        for j, (label, alpha) in enumerate(alphas.items()):
            seed = 500 + 10 * i + j
            tally = simulate_suite(
                scenario, FAMILY_TESTS, per_suite, suites=suites, seed=seed, alpha=alpha
            )
            assert tally.runs == suites * per_suite
            caught = []
            for k, change in enumerate((0.11, 1.0)):
                slowed = dataclasses.replace(scenario, change=change)
                detect = simulate(slowed, checks // 10, 10, seed=seed + 1000 * (k + 1), alpha=alpha)
                caught.append(_rate(detect.total[Outcome.REGRESSED], detect.checks))
            rows.append(
                f"| {name} | {label} ({alpha:.2g}) | {_rate(tally.failed_runs, tally.runs)} "
                f"| {_fine_rate(tally.failed_tests, tally.runs * FAMILY_TESTS)} "
                f"| {' | '.join(caught)} |"
            )
            print(rows[-1], flush=True)
    print("\n" + "\n".join(rows))
