"""The family-wise control in seeded simulations of the whole procedure (``tests/gate_sim.py``,
through the real :meth:`Gate.decide`): a suite of 50 unchanged tests gated at the share of
``--ortperf-family-alpha=0.01`` stays quiet, and a slowed test in it is still caught. The
benchmark's table (``benchmarks/plugin/test_gate_simulation_table.py -k suite_level``) has
the figures at larger sizes, process-level effects included."""

from __future__ import annotations

import dataclasses

from gate_sim import SCENARIOS, simulate, simulate_suite

from pytest_ortperf.gating.suite import Family
from pytest_ortperf.results import Outcome

SUITE = 50
SHARE = Family(alpha=0.01, planned=SUITE).share  # 0.0002 a verdict


def test_a_suite_of_fifty_unchanged_tests_at_the_family_share_stays_quiet() -> None:
    tally = simulate_suite(SCENARIOS["pairs 0.5%"], SUITE, runs=6, seed=21, alpha=SHARE)
    assert tally.runs == 6 and tally.failed_runs == 0, tally.alarms


def test_a_slowed_test_in_such_a_suite_is_still_caught() -> None:
    quiet = SCENARIOS["pairs 0.5%"]
    gross = simulate(dataclasses.replace(quiet, change=1.0), 2, 5, seed=22, alpha=SHARE)
    assert gross.rate(Outcome.REGRESSED) == 1.0, gross.total
    eleven = simulate(dataclasses.replace(quiet, change=0.11), 6, 10, seed=23, alpha=SHARE)
    assert eleven.rate(Outcome.REGRESSED) >= 0.9, eleven.total
