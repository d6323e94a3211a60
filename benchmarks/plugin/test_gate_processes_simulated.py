"""What processes buy near the threshold where processes differ, by seeded simulation:
the table of "Baselines over several processes" in ``docs/pages/gating.md``. Pure
simulation (no timing): any machine gives the same figures.

Four variants of the same checks: baselines in one process or in three
(``--ortperf-update-processes=3``, whose spread the gate then measures), and checks in one
process or, as a what-if the gate has no mode for, with their own offset averaged over two
(:attr:`~gate_sim.Scenario.check_processes`). Every baseline and check draws from its own
seeded stream, the same for every variant, so the table counts the checks one variant
caught and the default (one process each) did not, and the other way round.

Run (about half an hour, one process, at 200 baselines)::

    pytest -s benchmarks/plugin/test_gate_processes_simulated.py

``ORTPERF_SIM_BASELINES`` [200] baselines per cell, 4 checks each. Asserts only that every
check ended with a ratio verdict (``gate_sim.check`` unpacks it) and was counted.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from gate_sim import STRESS, Scenario, Tally, simulate

from pytest_ortperf.results import Outcome
from pytest_ortperf.stats import wilson_interval

VARIANTS = ((1, 1), (3, 1), (1, 2), (3, 2))
"""(baseline processes, check processes); (1, 1) is the default."""
CELLS = (("process 0.5%", 0.06), ("process 0.5%", 0.04), ("process 1% (stress)", 0.06))
CHECKS = 4
SEED = 41


def cell(scenario: Scenario, baselines: int) -> Tally:
    """``CHECKS`` checks against each baseline, every baseline and check from its own
    stream, keyed by the scenario's process SD (tenths of a percent) and change."""
    key = [round(scenario.process * 1000), round(scenario.change * 1000)]
    return simulate(scenario, baselines, CHECKS, seed=SEED, streams=key)


def test_processes_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    baselines = int(os.environ.get("ORTPERF_SIM_BASELINES", "200"))
    rows = [
        "| scenario | change | baseline, check processes | regressed [95%] | inconclusive "
        "| budgets | caught here only | caught by (1, 1) only |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, change in CELLS:
        tallies = {
            (up, cp): cell(
                dataclasses.replace(
                    STRESS[name], change=change, update_processes=up, check_processes=cp
                ),
                baselines,
            )
            for up, cp in VARIANTS
        }
        for variant, tally in tallies.items():
            assert tally.checks == baselines * CHECKS
            low, high = wilson_interval(tally.total[Outcome.REGRESSED], tally.checks)
            only, lost = tally.caught_apart(tallies[(1, 1)])
            rows.append(
                f"| {name} | {change:+.0%} | {variant[0]}, {variant[1]} "
                f"| {tally.rate(Outcome.REGRESSED):.1%} [{low:.1%}, {high:.1%}] "
                f"| {tally.rate(Outcome.INCONCLUSIVE):.1%} "
                f"| {sum(tally.budgets) / len(tally.budgets):.2f} | {only} | {lost} |"
            )
    with capsys.disabled():
        print(f"\nwhat processes buy near the threshold ({baselines} baselines x {CHECKS})")
        print("\n".join(rows))
