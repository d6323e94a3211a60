"""How near the threshold a verdict may be decided, compared by seeded simulation: the
table of "Why a pass is held to 15%" in ``docs/pages/gating.md``. Pure simulation (no
timing): any machine gives the same figures.

Each rule is :data:`~pytest_ortperf.gating.gate.DECIDED_WITHIN` (a verdict past the
threshold) and :data:`~pytest_ortperf.gating.gate.PASSES_WITHIN` (one within it), set for
the run. Every baseline and every check draws from its own seeded stream, the same for
every rule, so two rules see the same processes and differ only where the rule makes a
check measure more; the table counts the checks one rule caught and the other did not.

Run (about an hour, one process, at 200 baselines)::

    pytest -s benchmarks/plugin/test_gate_decided_within.py

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

from gate_sim import BUSY, SCENARIOS, STRESS, Scenario, Tally, simulate

from pytest_ortperf.gating import gate
from pytest_ortperf.results import Outcome

RULES = ((0.0, 0.0), (0.2, 0.2), (0.2, 0.15), (0.2, 0.1))
"""(past, within): the threshold itself (with today's confirmation, whose pairs stop early;
the procedure before the margins did not); a fifth either side; today's; a tenth within."""
CELLS = (
    ("process 0.5%", 0.06),
    ("process 0.5%", 0.04),
    ("pairs 2%", 0.06),
    ("pairs 2%", 0.04),
    ("process 1% (stress)", 0.06),
    ("busy", 0.06),
    ("iid", 0.05),
    ("process 2% (stress)", 0.0),
)
CHECKS = 4


def cell(scenario: Scenario, baselines: int) -> Tally:
    """``CHECKS`` checks against each baseline, every baseline and check from its own
    stream, keyed by the scenario's name length and change (as the runs the docs quote
    were; distinct for every cell of :data:`CELLS`)."""
    key = [len(scenario.name), int(scenario.change * 1000)]
    return simulate(scenario, baselines, CHECKS, seed=39, streams=key)


def test_decided_within(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    baselines = int(os.environ.get("ORTPERF_SIM_BASELINES", "200"))
    todays = (gate.DECIDED_WITHIN, gate.PASSES_WITHIN)
    assert todays in RULES
    scenarios = {**SCENARIOS, **STRESS, "busy": BUSY}
    results: dict[tuple[float, float], dict[tuple[str, float], Tally]] = {}
    for rule in RULES:
        monkeypatch.setattr(gate, "DECIDED_WITHIN", rule[0])
        monkeypatch.setattr(gate, "PASSES_WITHIN", rule[1])
        results[rule] = {
            (name, change): cell(dataclasses.replace(scenarios[name], change=change), baselines)
            for name, change in CELLS
        }
    today = results[todays]
    rows = [
        "| scenario | change | past, within | regressed | budgets | caught by this rule only | caught by today's only |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, change in CELLS:
        for rule in RULES:
            tally = results[rule][(name, change)]
            assert tally.checks == baselines * CHECKS
            spent = sum(tally.budgets) / len(tally.budgets)
            only, lost = tally.caught_apart(today[(name, change)])
            rows.append(
                f"| {name} | {change:+.0%} | {rule[0]:.2f}, {rule[1]:.2f} "
                f"| {tally.rate(Outcome.REGRESSED):.1%} | {spent:.2f} | {only} | {lost} |"
            )
    with capsys.disabled():
        print(f"\nhow near the threshold a verdict is decided ({baselines} baselines x {CHECKS})")
        print("\n".join(rows))
