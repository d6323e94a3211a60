"""Seeded simulations of the whole ratio-gate procedure: early stop, confirmation and the
between-run model, driven through the real :meth:`Gate.decide` and :func:`judge_entry`.

A simulated check is one CI job: its own between-run offset ``u`` (shared by the first
measurement and a confirmation, as they share a process), block log-ratios around it, and
the stop rule asked at the rounds the real engine asks it. A baseline is taken the way
``--ortperf-update`` takes it: :data:`BASELINE_RUNS` runs, each with its own offset.

What the figures do not cover: real blocks are heavier-tailed than these normal ones (the
signed-rank standard error is robust to that, a mean-based one would not be), and a real
between-run spread need not be normal or the same for every session pair.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from pytest_ortperf.gating.gate import BASELINE_RUNS, Gate
from pytest_ortperf.gating.settings import GateSettings
from pytest_ortperf.measure import Call, Samples, StopRule, asks_stop_rule
from pytest_ortperf.recorder import comparison
from pytest_ortperf.results import Comparison, LatencyResult, Outcome
from pytest_ortperf.testing import GATED_MIN_BLOCKS

ROUNDS = 25
"""Rounds of a 1 s budget at 20 ms blocks and two arms."""
BASELINE_ROUNDS = 8
"""Rounds of each of a baseline's runs (3 s shared by ten runs)."""
SIGMA = 0.01
"""Standard deviation of one block's log-ratio (the A/A figure measured here: 0.9%)."""


def wilson(failures: int, n: int, z: float = 2.576) -> tuple[float, float]:
    """The 99% Wilson interval of a proportion: the Monte Carlo error of a simulated rate."""
    p = failures / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def at_most(failures: int, n: int, rate: float) -> bool:
    """Whether a simulated rate is consistent with at most ``rate``: the 99% Wilson
    interval of ``failures / n`` reaches down to it."""
    return wilson(failures, n)[0] <= rate


@dataclass
class Scenario:
    """How blocks are drawn: the true change, between-run spread, block dependence."""

    change: float = 0.0
    between: float = 0.0
    rho: float = 0.0

    def blocks(self, rng: np.random.Generator, n: int, offset: float) -> np.ndarray:
        noise = rng.normal(0.0, SIGMA, n)
        if self.rho:
            # AR(1) with the same marginal spread: e_t = rho e_(t-1) + sqrt(1 - rho^2) z_t.
            scale = math.sqrt(1 - self.rho**2)
            for i in range(1, n):
                noise[i] = self.rho * noise[i - 1] + scale * noise[i]
        return np.asarray(offset + noise, dtype=np.float64)


class SimulatedEngine:
    """A TimingEngine whose interleaved rounds come from a scenario: the reference arm at
    1 ms per call, the candidate at ``exp(log-ratio)`` ms."""

    def __init__(self, draw: Callable[[int], np.ndarray], factor: float = 1.0) -> None:
        self.draw = draw
        self.factor = factor
        self.clock = lambda: 0

    def scaled(self, factor: float) -> SimulatedEngine:
        return SimulatedEngine(self.draw, self.factor * factor)

    def measure(self, call: Call, *, watch_cpu: bool = True) -> Samples:
        raise AssertionError("a comparison is measured interleaved")

    def interleave(
        self, calls: Sequence[Call], *, should_stop: StopRule | None = None, watch_cpu: bool = True
    ) -> list[Samples]:
        logs = self.draw(round(ROUNDS * self.factor))
        reference = [1e-3] * logs.size
        candidate = list(1e-3 * np.exp(logs))
        rounds = logs.size
        for r in range(1, logs.size + 1):
            if (
                should_stop is not None
                and asks_stop_rule(r, GATED_MIN_BLOCKS)
                and should_stop([reference[:r], candidate[:r]])
            ):
                rounds = r
                break
        return [Samples(tuple(reference[:rounds]), 1), Samples(tuple(candidate[:rounds]), 1)]


def _arm(name: str, samples: Samples) -> LatencyResult:
    return LatencyResult("t.py::t", name, "iobinding", samples.values, 1, True)


def measure(engine: Any, stop: StopRule | None) -> Comparison:
    ref, cand = engine.interleave([], should_stop=stop)
    return comparison(_arm("n:reference", ref), _arm("n:candidate", cand), "n", 0.95)


def baseline_entry(rng: np.random.Generator, scenario: Scenario) -> dict[str, Any]:
    """A compare entry taken as ``--ortperf-update`` takes it: several runs, own offsets."""
    parts = [
        scenario.blocks(rng, BASELINE_ROUNDS, rng.normal(0.0, scenario.between))
        for _ in range(BASELINE_RUNS)
    ]
    ratios = np.exp(np.concatenate(parts))
    return {
        "kind": "compare",
        "test": "t",
        "name": "n",
        "api": "iobinding",
        "ratio": float(np.median(ratios)),
        "block_ratios": [float(r) for r in ratios],
        "runs": [BASELINE_ROUNDS] * BASELINE_RUNS,
        "op_histograms": {},
    }


def simulate(
    scenario: Scenario,
    baselines: int,
    checks: int,
    *,
    seed: int,
    threshold: float = 0.0,
    alpha: float = 0.01,
) -> list[Counter[Outcome]]:
    """Outcomes of the ratio verdict, per baseline, of ``checks`` checks each."""
    rng = np.random.default_rng(seed)
    gate = Gate(GateSettings(threshold=threshold, alpha=alpha), None, dict)  # type: ignore[arg-type]
    tallies = []
    for _ in range(baselines):
        entry = baseline_entry(rng, scenario)
        tally: Counter[Outcome] = Counter()
        for _ in range(checks):
            offset = math.log1p(scenario.change) + rng.normal(0.0, scenario.between)
            engine = SimulatedEngine(lambda n, o=offset: scenario.blocks(rng, n, o))
            decision = gate.decide(measure, engine, entry)
            (ratio,) = [v for v in decision.verdicts if v.metric == "ratio"]
            tally[ratio.outcome] += 1
        tallies.append(tally)
    return tallies


def test_iid_blocks_no_change_false_alarms_within_alpha() -> None:
    tallies = simulate(Scenario(), baselines=40, checks=50, seed=1)
    total = sum(tallies, Counter())
    n = sum(total.values())
    # 2000 checks: the Monte Carlo error of a 1% rate is +-0.6% (99%).
    assert at_most(total[Outcome.REGRESSED], n, 0.01), total


def test_dependent_blocks_at_most_twice_alpha_rest_unstable() -> None:
    tallies = simulate(Scenario(rho=0.5), baselines=40, checks=50, seed=2)
    total = sum(tallies, Counter())
    n = sum(total.values())
    assert at_most(total[Outcome.REGRESSED], n, 0.02), total
    assert total[Outcome.UNSTABLE] > total[Outcome.REGRESSED], (
        total
    )  # the dependence is named, not hidden


def test_between_run_spread_and_baseline_error_bounded_per_baseline() -> None:
    # A 2% spread between runs (twice the blocks' own noise), baselines with their own
    # error: at most 1% of checks fail, and no baseline makes more than 5% of its fail.
    tallies = simulate(Scenario(between=0.02), baselines=50, checks=40, seed=3)
    total = sum(tallies, Counter())
    n = sum(total.values())
    assert at_most(total[Outcome.REGRESSED], n, 0.01), total
    worst = max(t[Outcome.REGRESSED] / sum(t.values()) for t in tallies)
    assert worst <= 0.05, [t[Outcome.REGRESSED] for t in tallies]


@pytest.mark.parametrize(("change", "least"), [(0.06, 0.90), (0.10, 0.99)])
def test_detection_at_one_point_two_and_two_times_the_threshold(
    change: float, least: float
) -> None:
    tallies = simulate(Scenario(change=change), baselines=20, checks=20, seed=4, threshold=0.05)
    total = sum(tallies, Counter())
    assert total[Outcome.REGRESSED] / sum(total.values()) >= least, total
