"""The upgrade gate across processes: B/A from several worker-process pairs (issue 22,
item 6). Seeded samples and simulations through the real verdict
(:func:`pytest_ortperf.gating.ab.judge_ab_pairs`); the real workers are measured in
``tests/test_upgrade_gate.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_ortperf.gating.ab import (
    judge_ab,
    judge_ab_pairs,
    pair_runs,
    pairs_test,
)
from pytest_ortperf.measuring.engine import EngineConfig, Samples
from pytest_ortperf.remote.interleave import interleave
from pytest_ortperf.results import Outcome
from pytest_ortperf.stats import wilson_interval
from pytest_ortperf.values import MAX_PROCESSES


def _pair(offset: float, noise: float, rng: np.random.Generator, n: int = 40) -> list[float]:
    """Block ratios B/A of one process pair: its process offset (log) and block noise."""
    return list(np.exp(rng.normal(offset, noise, n)))


def _pairs(offsets: list[float], noise: float, seed: int, n: int = 40) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [_pair(o, noise, rng, n) for o in offsets]


def test_between_pair_spread_widens_the_interval() -> None:
    """Same blocks' noise, same mean: pairs that disagree (process offsets of +-3%) give a
    wider interval than pairs that agree, and the spread is named in the message."""
    agree = judge_ab_pairs(_pairs([0.0, 0.0, 0.0, 0.0], 0.01, seed=1))
    disagree = judge_ab_pairs(_pairs([0.03, -0.03, 0.02, -0.02], 0.01, seed=1))
    assert disagree.high - disagree.low > 3 * (agree.high - agree.low)
    assert agree.outcome is Outcome.OK
    assert "4 process pairs (spread between them" in disagree.message
    assert disagree.message.startswith("B / A = ")


def test_one_pair_reading_a_process_offset_is_no_regression() -> None:
    """The issue's reproducer: one A/A pair read +11% [+8.2%, +13.9%] -> regressed, its
    interval holding the blocks' noise only. Among pairs that read otherwise, the same
    pair no longer decides: the spread between them widens the interval."""
    first = _pairs([0.105], 0.02, seed=2)[0]
    assert judge_ab(first).outcome is Outcome.REGRESSED  # one pair: fooled
    others = _pairs([-0.05, 0.01, -0.02], 0.02, seed=3)
    verdict = judge_ab_pairs([first, *others])
    assert verdict.outcome is not Outcome.REGRESSED
    assert verdict.low < 0 < verdict.high


def test_real_regression_across_agreeing_pairs_is_caught() -> None:
    verdict = judge_ab_pairs(_pairs([0.10, 0.11, 0.095, 0.105], 0.02, seed=4))
    assert verdict.outcome is Outcome.REGRESSED
    assert 0.08 < verdict.change < 0.13


def test_interval_is_never_narrower_than_the_blocks_error() -> None:
    """Pairs that agree exactly (each shifted to read 1.000) though their blocks are noisy:
    the blocks' own error is the floor, so lucky agreement cannot make a narrow interval."""
    rng = np.random.default_rng(5)
    noisy = [np.log(_pair(0.0, 0.05, rng, 10)) for _ in range(3)]
    centred = [list(np.exp(x - r.estimate)) for x, r in zip(noisy, pair_runs(
        [list(np.exp(x)) for x in noisy]), strict=True)]  # fmt: skip
    test = pairs_test(centred)
    within = np.mean([(r.se * r.inflation) ** 2 for r in pair_runs(centred)])
    assert abs(test.difference) < 1e-12
    assert test.se == pytest.approx(math.sqrt(within / 3)) and test.se > 0.005
    assert test.df == 2


def test_single_pair_is_judged_as_before() -> None:
    pair = _pairs([0.0], 0.01, seed=6)
    assert judge_ab_pairs(pair) == judge_ab(pair[0])


def test_bad_input_names_the_pair() -> None:
    with pytest.raises(ValueError, match="process pair 2"):
        judge_ab_pairs([[1.0, 1.01], [1.0, -1.0]])
    with pytest.raises(ValueError, match="alpha"):
        judge_ab_pairs([[1.0, 1.01], [1.0, 1.02]], alpha=0.7)
    assert MAX_PROCESSES >= 4


SCENARIOS = [0.0, 0.0025, 0.01, 0.03]
"""SD (log) of a process pair's offset B/A: none, a quarter percent, 1%, 3%."""


@pytest.mark.parametrize("process_sd", SCENARIOS)
def test_aa_with_process_offsets_stays_within_alpha(process_sd: float) -> None:
    """A/A simulated: every pair reads its own process offset plus block noise (2%, some
    blocks heavy-tailed). Judged at threshold 0 (a pure one-sided test of "B is slower"),
    the false alarms stay within alpha; at the default 5% threshold there are none."""
    alpha, n = 0.01, 300
    rng = np.random.default_rng(11)
    at_zero = at_default = 0
    for _ in range(n):
        pairs = []
        for _ in range(4):
            noise = rng.normal(0.0, 0.02, 40)
            noise[rng.random(40) < 0.05] *= 5  # a few preempted-looking blocks
            pairs.append(list(np.exp(rng.normal(0.0, process_sd) + noise)))
        at_zero += judge_ab_pairs(pairs, threshold=0.0, alpha=alpha).outcome is Outcome.REGRESSED
        at_default += judge_ab_pairs(pairs, alpha=alpha).outcome is Outcome.REGRESSED
    low, _ = wilson_interval(at_zero, n)
    assert low <= alpha, f"{at_zero} of {n} A/A checks regressed at threshold 0"
    assert at_zero <= 3 * alpha * n
    assert at_default == 0


class _Scripted:
    """A stand-in for a remote session (``warm_up``, ``block``): fixed block times, and
    a thread CPU time that marks the blocks listed in ``preempted`` (by call index)."""

    def __init__(self, seconds: float, preempted: set[int], k: int = 1) -> None:
        self.k = k
        self.seconds = seconds
        self.preempted = preempted
        self.calls = 0
        self.settings = None
        self.pid = 0

    def warm_up(self, config: EngineConfig) -> tuple[int, bool]:
        return self.k, True

    def block(self, k: int) -> tuple[float, int, int]:
        self.calls += 1
        ns = round(self.seconds * 1e9)
        return ns * 1e-9 / k, ns, (0 if self.calls in self.preempted else ns)


def test_a_preempted_block_leaves_out_its_own_pair_only() -> None:
    sessions = [
        _Scripted(1e-3, set()), _Scripted(1e-3, {3}),  # pair 1: its 3rd round preempted
        _Scripted(2e-3, set()), _Scripted(2e-3, set()),
    ]  # fmt: skip
    ticks = iter(range(0, 10**12, 10**6))  # a clock: 1 ms per read
    config = EngineConfig(budget_s=0.02, warmup_s=0.0, min_blocks=5)
    samples = interleave(
        sessions,
        config,
        pin=False,
        clock=lambda: next(ticks),
        group=2,  # type: ignore[arg-type]
    )
    assert [s.preempted for s in samples] == [1, 1, 0, 0]
    assert len(samples[0].values) == len(samples[1].values) == len(samples[2].values) - 1
    assert all(isinstance(s, Samples) for s in samples)
    with pytest.raises(ValueError, match="not a divisor"):
        interleave(sessions, config, pin=False, group=3)  # type: ignore[arg-type]


def test_a_pair_preempted_every_round_keeps_its_blocks_at_the_cap() -> None:
    # Samples' rule (fewer than two clean rounds before the hard cap: every block kept and
    # marked), for the pair that was preempted only.
    sessions = [
        _Scripted(1e-3, set(range(1, 10**6))), _Scripted(1e-3, set()),
        _Scripted(2e-3, set()), _Scripted(2e-3, set()),
    ]  # fmt: skip
    ticks = iter(range(0, 10**12, 10**6))  # a clock: 1 ms per read
    config = EngineConfig(budget_s=0.02, warmup_s=0.0, min_blocks=5)
    samples = interleave(
        sessions,
        config,
        pin=False,
        clock=lambda: next(ticks),
        group=2,  # type: ignore[arg-type]
    )
    assert [s.preempted_kept for s in samples] == [True, True, False, False]
    assert samples[0].preempted == len(samples[0].values) == len(samples[2].values) >= 2
    assert samples[2].preempted == 0


def test_the_workers_of_a_pair_time_the_same_calls_per_block() -> None:
    """A worker whose calibration a neighbour disturbed takes a smaller k, and each block
    pays a fixed cost after the worker wakes: under two neighbours, pairs with k 39 against
    170 read B/A 0.83. The two workers of a pair time the larger k, pairs keep their own."""
    sessions = [_Scripted(1e-3, set(), k) for k in (39, 170, 80, 60)]
    ticks = iter(range(0, 10**12, 10**6))
    config = EngineConfig(budget_s=0.01, warmup_s=0.0, min_blocks=3)
    samples = interleave(
        sessions,
        config,
        pin=False,
        clock=lambda: next(ticks),
        group=2,
        same_k=True,  # type: ignore[arg-type]
    )
    assert [s.calls_per_block for s in samples] == [170, 170, 80, 80]
    ticks = iter(range(0, 10**12, 10**6))
    apart = interleave(sessions, config, pin=False, clock=lambda: next(ticks))  # type: ignore[arg-type]
    assert [s.calls_per_block for s in apart] == [39, 170, 80, 60]
