"""Seeded simulations of the whole gate procedure (see ``tests/gate_sim.py``): session
pairs, extension, confirmation on fresh pairs, baselines in their own process, driven
through the real :meth:`Gate.decide` and :func:`judge_entry`.

Sizes are what a test suite affords (a few hundred checks a scenario); the README's table
comes from ``benchmarks/plugin/test_gate_simulation_table.py`` at larger sizes.
"""

from __future__ import annotations

import dataclasses

import pytest
from gate_sim import SCENARIOS, simulate

from pytest_ortperf.gating.gate import undecided
from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.stats import wilson_interval


def at_most(failures: int, n: int, rate: float) -> bool:
    """Whether a simulated rate is consistent with at most ``rate``: the 99% Wilson
    interval of ``failures / n`` reaches down to it."""
    return wilson_interval(failures, n, z=2.576)[0] <= rate


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_change_false_alarms_within_one_percent(name: str) -> None:
    tally = simulate(SCENARIOS[name], baselines=12, checks=15, seed=11)
    total = tally.total
    assert at_most(total[Outcome.REGRESSED], tally.checks, 0.01), total
    # The procedure answers: at no change nearly every check ends ok.
    assert tally.rate(Outcome.OK) >= 0.9, total


def test_no_change_at_threshold_zero_stays_within_alpha() -> None:
    # Threshold 0 flags any significant slowdown: the hardest case for alpha.
    tally = simulate(SCENARIOS["pairs 1%"], baselines=8, checks=10, seed=12, threshold=0.0)
    assert at_most(tally.total[Outcome.REGRESSED], tally.checks, 0.01), tally.total


def test_no_baseline_makes_its_checks_fail_often() -> None:
    # A baseline is shared by every later check: an unlucky one must not fail them all.
    tally = simulate(SCENARIOS["pairs 2%"], baselines=15, checks=12, seed=13)
    assert tally.worst_baseline <= 1 / 12, [t[Outcome.REGRESSED] for t in tally.per_baseline]


@pytest.mark.parametrize(("change", "least"), [(0.08, 0.70), (0.11, 0.90)])
def test_detection_at_a_two_percent_between_pair_spread(change: float, least: float) -> None:
    scenario = dataclasses.replace(SCENARIOS["pairs 2%"], change=change)
    tally = simulate(scenario, baselines=8, checks=10, seed=14)
    assert tally.rate(Outcome.REGRESSED) >= least, tally.total


def test_a_slowdown_just_past_the_threshold_is_measured_until_caught() -> None:
    # +6%, 1.2x the threshold: a look whose interval straddles 5% reads either side of it
    # by chance, so the first measurement and the confirmation both measure on.
    scenario = dataclasses.replace(SCENARIOS["pairs 0.5%"], change=0.06)
    tally = simulate(scenario, baselines=8, checks=10, seed=18)
    assert tally.rate(Outcome.REGRESSED) >= 0.95, tally.total
    assert sum(tally.budgets) / len(tally.budgets) > 3.5, "it was not measured further"


def _verdict(outcome: Outcome, change: float, low: float, high: float) -> Verdict:
    return Verdict("ratio", outcome, 1.0, 1.0 + change, change, low, high, 0.05, 0.01, 0.1, 50, "")


@pytest.mark.parametrize(
    ("verdict", "more"),
    [
        (_verdict(Outcome.OK, 0.01, -0.01, 0.03), False),
        (_verdict(Outcome.OK, 0.045, 0.035, 0.055), True),  # straddles 5%
        (_verdict(Outcome.REGRESSED, 0.055, 0.045, 0.065), True),
        (_verdict(Outcome.REGRESSED, 0.11, 0.09, 0.13), False),
        (_verdict(Outcome.INCONCLUSIVE, 0.08, -0.01, 0.17), True),
        (_verdict(Outcome.UNSTABLE, 0.09, 0.06, 0.12), True),  # a slowdown the noise may hide
        (_verdict(Outcome.UNSTABLE, 0.0, -0.02, 0.02), False),
        (_verdict(Outcome.IMPROVED, -0.1, -0.12, -0.08), False),
        (dataclasses.replace(_verdict(Outcome.OK, 0.05, 0.04, 0.06), metric="structure"), False),
    ],
)
def test_what_is_measured_further(verdict: Verdict, more: bool) -> None:
    assert undecided(verdict) is more


@pytest.mark.parametrize("name", ["iid", "AR(1) 0.5", "heavy tails", "odd pairs"])
def test_gross_regressions_are_always_caught(name: str) -> None:
    scenario = dataclasses.replace(SCENARIOS[name], change=1.0)  # 2x slower
    tally = simulate(scenario, baselines=4, checks=5, seed=15)
    assert tally.rate(Outcome.REGRESSED) == 1.0, tally.total


def test_strict_mode_fails_almost_no_unchanged_test() -> None:
    # Strict fails inconclusive and unstable too: with measuring until decided, an
    # unchanged test on a quiet machine fails at most 1% of the time.
    tally = simulate(SCENARIOS["pairs 0.5%"], baselines=10, checks=15, seed=16, strict=True)
    assert at_most(tally.total[Outcome.REGRESSED], tally.checks, 0.01), tally.total


def test_a_quiet_check_spends_a_fraction_of_its_budget() -> None:
    # The per-pair stop rule ends each pair once it has said enough.
    tally = simulate(SCENARIOS["iid"], baselines=3, checks=10, seed=17)
    assert sum(tally.budgets) / len(tally.budgets) < 1.0, tally.budgets
