"""The gate procedure in seeded simulations, at sizes the test suite cannot afford: the
table of the performance page. Pure simulation (no timing): any machine gives the same
figures for the same seed.

Run (about 8 minutes at 300 checks on 2 cores; 1000 take about 25)::

    pytest -s benchmarks/plugin/test_gate_simulation_table.py

``ORTPERF_SIM_CHECKS`` [1000] checks per no-change scenario (50 baselines), a fifth of that
per detection level. Prints rates with 95% Wilson intervals; asserts only that every check
ended with a verdict.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from gate_sim import SCENARIOS, STRESS, simulate

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
        "| +6% caught | +8% caught | +11% caught | 2x caught | budgets per check |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, (name, scenario) in enumerate({**SCENARIOS, **STRESS}.items()):
        aa = simulate(scenario, baselines, per, seed=100 + i)
        zero = simulate(scenario, baselines // 5, per, seed=200 + i, threshold=0.0)
        caught = []
        for j, change in enumerate((0.06, 0.08, 0.11, 1.0)):
            slowed = dataclasses.replace(scenario, change=change)
            tally = simulate(slowed, baselines // 5, per, seed=300 + 10 * i + j)
            caught.append(_rate(tally.total[Outcome.REGRESSED], tally.checks))
        n = aa.checks
        assert n == baselines * per
        rows.append(
            f"| {name} | {_rate(aa.total[Outcome.REGRESSED], n)} | "
            f"{_rate(aa.total[Outcome.INCONCLUSIVE], n)} | {_rate(aa.total[Outcome.UNSTABLE], n)} | "
            f"{_rate(zero.total[Outcome.REGRESSED], zero.checks)} | {' | '.join(caught)} | "
            f"{sum(aa.budgets) / len(aa.budgets):.2f} |"
        )
        print(rows[-1], flush=True)
    print("\n" + "\n".join(rows))
