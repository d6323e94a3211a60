"""The decision rules of pytest_ortperf.gating.rules, with injected samples (no timing)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from pytest_ortperf.gating.rules import (
    BETWEEN_PROCESS_FLOOR,
    BETWEEN_RUN_FLOOR,
    BETWEEN_RUN_UNKNOWN,
    RatioBaseline,
    decide_early,
    detectable_change,
    judge_ratio,
    new,
    not_comparable,
    ratio_baseline,
    ratio_test,
)
from pytest_ortperf.gating.structure import judge_structure
from pytest_ortperf.results import Outcome, Verdict


def noisy(rng: np.random.Generator, center: float, n: int, cv: float) -> list[float]:
    return list(center * np.exp(rng.normal(0.0, cv, n)))


def measured(
    rng: np.random.Generator, center: float = 1.0, runs: int = 10, n: int = 15, cv: float = 0.01
) -> RatioBaseline:
    """A baseline as --ortperf-update takes it: ``runs`` runs of ``n`` blocks each."""
    blocks = [x for _ in range(runs) for x in noisy(rng, center, n, cv)]
    return ratio_baseline(blocks, [n] * runs)


# --------------------------------------------------------------------------- the baseline


def test_baseline_of_one_run_assumes_the_unknown_between_run_spread() -> None:
    rng = np.random.default_rng(20)
    base = ratio_baseline(noisy(rng, 0.9, 30, 0.01))
    assert base.runs == 1 and base.n == 30 and not base.measured_between
    assert base.between == pytest.approx(BETWEEN_RUN_UNKNOWN**2)
    assert base.ratio == pytest.approx(0.9, rel=0.01)
    assert 0 < base.variance < (0.01 / math.sqrt(30) * 2) ** 2


def test_baseline_of_several_runs_measures_their_spread() -> None:
    rng = np.random.default_rng(21)
    quiet = measured(rng)
    assert quiet.runs == 10 and quiet.n == 150 and quiet.measured_between
    # Runs that agree within their noise: the floor, far below the one-run assumption.
    assert quiet.between < (3 * BETWEEN_RUN_FLOOR) ** 2 < BETWEEN_RUN_UNKNOWN**2
    # Runs 3% apart from each other: the spread is measured, at its upper bound.
    offsets = rng.normal(0.0, 0.03, 10)
    blocks = [x for o in offsets for x in noisy(rng, math.exp(o), 15, 0.01)]
    spread = ratio_baseline(blocks, [15] * 10)
    assert spread.between > float(np.var(offsets, ddof=1))
    assert spread.ratio == pytest.approx(math.exp(offsets.mean()), rel=0.01)
    low, high = spread.interval(0.95)
    assert low < spread.ratio < high


@pytest.mark.parametrize("sizes", [[10, 9], [5, 0, 15], [21]])
def test_baseline_run_sizes_must_split_the_blocks(sizes: list[int]) -> None:
    with pytest.raises(ValueError, match="run sizes"):
        ratio_baseline([1.0] * 20, sizes)


# --------------------------------------------------------------------------- ratio outcomes


def test_ratio_regressed_message_and_fields() -> None:
    rng = np.random.default_rng(0)
    base = measured(rng, 1.002)
    v = judge_ratio(noisy(rng, 1.108, 25, 0.0065), base)
    assert v.outcome is Outcome.REGRESSED
    assert v.metric == "ratio"
    assert v.change == pytest.approx(v.current / v.baseline - 1)
    assert v.low < v.change < v.high
    assert v.low > 0.08 and v.high < 0.13
    assert v.p_value is not None and v.p_value < 1e-6
    assert v.n == 25
    assert v.message.startswith("ratio 1.10")
    assert "vs baseline 1.00" in v.message and "(10 runs, 150 blocks): +10." in v.message
    assert "98% CI, threshold 5%" in v.message and v.message.endswith("-> regressed")
    assert v.failed(strict=False) and v.failed(strict=True)


def test_the_verdict_reads_from_its_interval() -> None:
    rng = np.random.default_rng(30)
    base = measured(rng)
    for center in (0.97, 1.0, 1.03, 1.07, 1.2):
        for cv in (0.005, 0.05, 0.2):
            v = judge_ratio(noisy(rng, center, 25, cv), base)
            if v.outcome is Outcome.REGRESSED:
                assert v.change > 0.05 and v.low > 0
            if v.outcome is Outcome.OK:
                assert -0.05 <= v.change <= 0.05 and v.high <= 0.10


def test_ratio_ok_within_noise() -> None:
    rng = np.random.default_rng(1)
    v = judge_ratio(noisy(rng, 0.95, 25, 0.01), measured(rng, 0.95))
    assert v.outcome is Outcome.OK
    assert abs(v.change) < 0.01
    assert v.low < 0 < v.high
    assert not v.failed(strict=True)


def test_ratio_small_significant_change_is_ok() -> None:
    rng = np.random.default_rng(2)
    v = judge_ratio(noisy(rng, 1.03, 40, 0.005), measured(rng), threshold=0.05)
    assert v.outcome is Outcome.OK  # significant, but below the effect-size threshold
    assert v.low > 0


def test_ratio_improved() -> None:
    rng = np.random.default_rng(3)
    v = judge_ratio(noisy(rng, 0.80, 25, 0.01), measured(rng))
    assert v.outcome is Outcome.IMPROVED
    assert v.change == pytest.approx(-0.2, abs=0.01)
    assert v.p_value is not None and v.p_value < 0.01
    assert not v.failed(strict=True)


def test_a_one_run_baseline_needs_more_than_its_blocks_say() -> None:
    # +2% over a baseline of one run: its blocks alone would call that significant, but
    # one run says nothing of the spread between runs (1% assumed): not regressed.
    rng = np.random.default_rng(4)
    one_run = ratio_baseline(noisy(rng, 1.0, 30, 0.005))
    v = judge_ratio(noisy(rng, 1.02, 30, 0.005), one_run, threshold=0.0)
    assert v.outcome is not Outcome.REGRESSED and v.low < 0
    assert "(30 blocks)" in v.message
    # The same change against a baseline of several agreeing runs is a regression.
    assert judge_ratio(noisy(rng, 1.02, 30, 0.005), measured(rng, 1.0, cv=0.005),
                       threshold=0.0).outcome is Outcome.REGRESSED  # fmt: skip


def test_ratio_slower_but_not_significant() -> None:
    rng = np.random.default_rng(11)
    v = judge_ratio(noisy(rng, 1.08, 12, 0.3), measured(rng))
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "slower but not significant" in v.message
    assert not v.failed(strict=False) and v.failed(strict=True)


def test_min_blocks_for_alpha() -> None:
    from pytest_ortperf.gating.rules import min_blocks_for
    from pytest_ortperf.stats import min_attainable_p

    n = min_blocks_for(0.01)
    assert min_attainable_p(n - 2) < 0.01 <= min_attainable_p(n - 3)
    assert n == 9
    # With that many blocks, a clear regression is significant.
    rng = np.random.default_rng(5)
    assert judge_ratio(noisy(rng, 1.3, n, 0.01), measured(rng)).outcome is Outcome.REGRESSED


def test_ratio_inconclusive_too_wide() -> None:
    rng = np.random.default_rng(4)
    v = judge_ratio(noisy(rng, 1.0, 25, 0.25), measured(rng))
    assert abs(v.change) <= 0.05
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "interval reaches past twice the threshold" in v.message


def test_ratio_robust_to_outlier_blocks() -> None:
    rng = np.random.default_rng(5)
    ratios = noisy(rng, 1.0, 30, 0.01)
    ratios[3] = 3.0  # a block hit by a noisy neighbour
    ratios[17] = 2.5
    assert judge_ratio(ratios, measured(rng)).outcome is Outcome.OK


def test_dependent_blocks_widen_the_interval_or_are_unstable() -> None:
    rng = np.random.default_rng(6)
    base = measured(rng)
    drift = list(np.exp(np.linspace(0.02, 0.10, 40) + rng.normal(0, 0.002, 40)))
    test = ratio_test(drift, base)
    assert test.run.dependent and test.widened and test.run.rho > 0.5
    assert test.se > ratio_test(drift, base, widen=False).se
    v = judge_ratio(drift, base)
    assert v.outcome is Outcome.UNSTABLE
    assert "lag-1 autocorrelation" in v.message and "quieter runner" in v.message
    assert "first and second half read +4" in v.message
    assert not v.failed(strict=False) and v.failed(strict=True)
    # Dependent blocks whose verdict is ok say so: the interval was widened.
    wobble = list(np.exp(np.repeat(rng.normal(0, 0.003, 10), 4)))
    ok = judge_ratio(wobble, base)
    assert ok.outcome is Outcome.OK and "interval widened" in ok.message


def _pairs(rng: np.random.Generator, offsets: list[float]) -> tuple[list[float], list[int]]:
    """Blocks of session pairs at ``offsets`` (log), dependent within each pair."""
    blocks = [x for o in offsets for x in np.exp(o + np.repeat(rng.normal(0, 0.004, 10), 4))]
    return blocks, [40] * len(offsets)


def test_halves_of_several_pairs_that_differ_by_chance_do_not_mute_a_regression() -> None:
    """A +6% slowdown over 14 pairs whose first half of pairs read +7.0% and the second
    +4.9%, the pairs 1.5% apart: the halves disagree no more than the pairs do, and the
    pairs' spread is in the interval already. Seen for real beside two noisy neighbours."""
    rng = np.random.default_rng(61)
    base = measured(rng)
    offsets = [0.060 + 0.015 * z for z in (1.8, -0.6, 1.4, -0.2, 1.6, -0.4, 0.6)]
    offsets += [0.060 + 0.015 * z for z in (-2.0, 0.4, -1.6, -0.2, -1.8, 0.2, -0.6)]
    blocks, runs = _pairs(rng, offsets)
    test = ratio_test(blocks, base, runs=runs)
    assert test.run.dependent and test.pairs == 14
    v = judge_ratio(blocks, base, runs=runs)
    assert v.outcome is Outcome.REGRESSED, v.message
    assert "first and second half" not in v.message


def test_pairs_further_apart_than_the_baseline_s_widen_their_own_interval() -> None:
    """Three pairs reading -0.5%, -6.0% and +3.9% (a check beside busy neighbours, seen for
    real while the candidate was 6% slower) against a quiet 30-run baseline: their own
    spread, on its 2 degrees of freedom, is their interval's (Welch). Pooled with the
    baseline's 29 it read -2.0% [-4.8%, +0.9%] -> ok and stopped there; now it cannot pass
    yet. Three pairs that agree keep a narrow interval."""
    rng = np.random.default_rng(63)
    base = measured(rng, runs=30, cv=0.005)
    apart, runs = _pairs(rng, [math.log1p(c) for c in (-0.005, -0.060, 0.039)])
    wide = ratio_test(apart, base, runs=runs)
    low, high = wide.bounds(0.01)
    assert wide.df < 3 and high > 0.0575 and low < -0.0575, (wide, low, high)
    assert judge_ratio(apart, base, runs=runs).outcome is not Outcome.OK
    agree, runs = _pairs(rng, [math.log1p(c) for c in (-0.005, -0.002, 0.001)])
    low, high = ratio_test(agree, base, runs=runs).bounds(0.01)
    assert high - low < 0.02, (low, high)
    assert judge_ratio(agree, base, runs=runs).outcome is Outcome.OK


def test_halves_of_several_pairs_that_step_apart_are_unstable() -> None:
    """The same pairs, but the machine changed halfway: the first seven read +2%, the last
    seven +10%, each within 0.3% of its half. That is a drift, not a spread."""
    rng = np.random.default_rng(62)
    base = measured(rng)
    offsets = [0.02 + 0.003 * z for z in rng.normal(0, 1, 7)]
    offsets += [0.10 + 0.003 * z for z in rng.normal(0, 1, 7)]
    blocks, runs = _pairs(rng, offsets)
    v = judge_ratio(blocks, base, runs=runs)
    assert v.outcome is Outcome.UNSTABLE, v.message
    assert "first and second half read +1.9% and +10.2%" in v.message


def test_float_baseline_is_one_run_of_unknown_spread() -> None:
    v = judge_ratio([1.0] * 20, 1.0)
    assert v.outcome is Outcome.OK
    assert v.change == 0 and "a single figure" in v.message
    assert judge_ratio([1.2] * 20, 1.0).outcome is Outcome.REGRESSED


@pytest.mark.parametrize(
    ("ratios", "baseline", "error"),
    [([], 1.0, "non-empty"), ([1.0, -1.0], 1.0, "positive"), ([1.0], 0.0, "baseline")],
)
def test_ratio_rejects_bad_input(ratios: list[float], baseline: float, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        judge_ratio(ratios, baseline)


def test_settings_validated() -> None:
    with pytest.raises(ValueError, match="threshold"):
        judge_ratio([1.0] * 10, 1.0, threshold=-0.1)
    with pytest.raises(ValueError, match="alpha"):
        judge_ratio([1.0] * 10, 1.0, alpha=0.7)


def test_normalized_latency_shows_seconds() -> None:
    rng = np.random.default_rng(7)
    v = judge_ratio(
        noisy(rng, 2.2, 25, 0.005), measured(rng, 2.0), metric="latency", shown_baseline=1e-3
    )
    assert v.outcome is Outcome.REGRESSED and v.metric == "latency"
    assert v.baseline == 1e-3 and v.current == pytest.approx(1.1e-3, rel=0.01)
    assert "latency 1.1" in v.message and "ms vs baseline 1.0" in v.message
    assert "normalized by its control" in v.message


# --------------------------------------------------------------------------- simulation


def simulate(
    rng: np.random.Generator,
    true_ratio: float,
    trials: int = 500,
    n: int = 25,
    cv: float = 0.01,
    outliers: float = 0.0,
    threshold: float = 0.05,
) -> Counter[Outcome]:
    """One fixed-size measurement against a fresh baseline of ten runs of 40 blocks per
    trial (the whole sequential procedure is simulated in test_gate_simulation.py)."""
    out: Counter[Outcome] = Counter()

    def blocks(center: float, size: int) -> list[float]:
        noise = rng.normal(0.0, cv, size)
        if outliers:
            hit = rng.random(size) < outliers
            noise[hit] += rng.normal(0.0, 0.1, int(hit.sum()))
        return list(center * np.exp(noise))

    for _ in range(trials):
        base = ratio_baseline([x for _ in range(10) for x in blocks(1.0, 40)], [40] * 10)
        out[judge_ratio(blocks(true_ratio, n), base, threshold=threshold).outcome] += 1
    return out


def test_simulation_a_a_false_alarms() -> None:
    rng = np.random.default_rng(2024)
    counts = simulate(rng, 1.0)
    assert counts[Outcome.REGRESSED] <= 5  # <= 1% of 500
    assert counts[Outcome.OK] >= 490
    # heavy tails: 5% CV plus 10% of blocks hit by a +-10% disturbance
    heavy = simulate(rng, 1.0, cv=0.05, outliers=0.1)
    assert heavy[Outcome.REGRESSED] <= 5


def test_simulation_a_b_detection() -> None:
    rng = np.random.default_rng(2025)
    counts = simulate(rng, 1.10)
    assert counts[Outcome.REGRESSED] >= 475
    heavy = simulate(rng, 1.10, cv=0.05, outliers=0.1)
    assert heavy[Outcome.REGRESSED] >= 450


# --------------------------------------------------------------------------- early stop


def test_decide_early() -> None:
    rng = np.random.default_rng(10)
    base = measured(rng, cv=0.005)
    clear_ok = noisy(rng, 1.0, 8, 0.005)
    assert decide_early(clear_ok, base)
    assert not decide_early(clear_ok[:7], base)  # under the minimum of rounds
    regressed = noisy(rng, 1.2, 8, 0.005)
    assert decide_early(regressed, base)  # clearly regressed, a confirmation decides
    assert not decide_early(regressed, base, may_reject=False)  # no confirmation: go on
    assert decide_early(noisy(rng, 0.8, 8, 0.005), base)  # clearly improved
    assert not decide_early(noisy(rng, 1.05, 12, 0.01), base)  # straddles the threshold
    assert not decide_early(noisy(rng, 1.0, 12, 0.2), base)  # too noisy yet
    assert not decide_early(noisy(rng, 1.0, 20, 0.005), base, min_rounds=30)


def test_early_stop_keeps_the_verdict() -> None:
    rng = np.random.default_rng(11)
    base = measured(rng)
    for true, expected in ((1.0, Outcome.OK), (1.1, Outcome.REGRESSED)):
        for _ in range(50):
            ratios: list[float] = []
            while len(ratios) < 50:
                ratios.extend(noisy(rng, true, 4, 0.01))
                if decide_early(ratios, base):
                    break
            assert judge_ratio(ratios, base).outcome is expected


# --------------------------------------------------------------------------- structure


def test_structure_lost_fusion() -> None:
    base = {
        "reference": {"MatMul": 2, "Transpose": 1},
        "candidate": {"FusedMatMul": 1, "MatMul": 1},
    }
    cur = {
        "reference": {"MatMul": 2, "Transpose": 1},
        "candidate": {"MatMul": 2, "Transpose": 1},
    }
    v = judge_structure(base, cur)
    assert v.outcome is Outcome.REGRESSED
    assert v.message == "candidate lost fusion: FusedMatMul 1 -> 0, MatMul 1 -> 2, Transpose 0 -> 1"
    assert v.n == 3 and v.p_value is None
    assert v.failed(strict=False)


def test_structure_changed_without_fusion_and_both_roles() -> None:
    base = {"reference": {"Add": 1, "MatMul": 1}, "candidate": {"Gemm": 1, "Relu": 1}}
    cur = {"reference": {"Add": 2, "MatMul": 1}, "candidate": {"Gemm": 1, "Relu": 2}}
    v = judge_structure(base, cur)
    assert v.message == (
        "candidate structure changed: Relu 1 -> 2; reference structure changed: Add 1 -> 2"
    )
    assert v.outcome is Outcome.REGRESSED


def test_structure_contrib_fusions_and_ok() -> None:
    base = {"candidate": {"SkipLayerNormalization": 1, "Add": 0}}
    cur = {"candidate": {"LayerNormalization": 1, "Add": 1}}
    assert judge_structure(base, cur).message.startswith("candidate lost fusion:")
    same = judge_structure({"candidate": {"Relu": 2}}, {"candidate": {"Relu": 2}})
    assert same.outcome is Outcome.OK
    assert same.message == "structure unchanged: candidate 2 nodes"


def test_structure_missing_histograms() -> None:
    cur = {"reference": {"Relu": 1}, "candidate": {"Relu": 1}}
    assert judge_structure({}, cur).outcome is Outcome.NEW
    assert judge_structure(cur, {"reference": {}, "candidate": {}}).outcome is (
        Outcome.NOT_COMPARABLE
    )
    partial = judge_structure({"candidate": {"Relu": 1}, "reference": {}}, cur)
    assert partial.outcome is Outcome.OK and "no histogram for reference" in partial.message


# --------------------------------------------------------------------------- environment


ENV = {"cpu_model": "Xeon", "logical_cores": 2, "ort_version": "1.32.0", "fingerprint": "abc"}
# --------------------------------------------------------------------------- verdicts


def test_verdict_failed_semantics() -> None:
    def verdict(outcome: Outcome) -> Verdict:
        return Verdict("ratio", outcome, 1.0, 1.0, 0.0, 0.0, 0.0, 0.05, 0.01, 0.5, 10, "")

    table = {
        Outcome.OK: (False, False),
        Outcome.REGRESSED: (True, True),
        Outcome.IMPROVED: (False, False),
        Outcome.INCONCLUSIVE: (False, True),
        Outcome.UNSTABLE: (False, True),
        Outcome.NEW: (False, True),
        Outcome.NOT_COMPARABLE: (False, False),
    }
    for outcome, (plain, strict) in table.items():
        assert verdict(outcome).failed(strict=False) is plain
        assert verdict(outcome).failed(strict=True) is strict
    assert str(Outcome.NOT_COMPARABLE) == "not_comparable"


def test_verdict_round_trip_and_helpers() -> None:
    rng = np.random.default_rng(12)
    v = judge_ratio(noisy(rng, 1.1, 25, 0.01), measured(rng))
    data = v.to_dict()
    assert data["outcome"] == "regressed"
    assert Verdict.from_dict(data) == v
    n = new("ratio", 0.91, 25)
    assert n.outcome is Outcome.NEW and "no baseline" in n.message and n.failed(strict=True)
    nc = not_comparable("latency", 1.1e-3, 1e-3, ["cpu_model: 'A' -> 'B'"], 20)
    assert nc.outcome is Outcome.NOT_COMPARABLE and not nc.failed(strict=True)
    assert (
        "not comparable here (cpu_model: 'A' -> 'B'), not gated" in nc.message
        and nc.change == pytest.approx(0.1)
    )


def test_an_outlier_run_of_the_baseline_is_set_aside_and_named() -> None:
    rng = np.random.default_rng(22)
    runs = [noisy(rng, 0.98, 70, 0.01) for _ in range(9)] + [noisy(rng, 1.05, 70, 0.01)]
    blocks = [x for run in runs for x in run]
    base = ratio_baseline(blocks, [70] * 10)
    assert base.set_aside == 1 and base.runs == 9
    assert base.between == pytest.approx(BETWEEN_RUN_FLOOR**2)  # nine runs that agree
    assert base.ratio == pytest.approx(0.98, rel=0.003)
    v = judge_ratio(noisy(rng, 1.09, 70, 0.01), base)
    assert v.outcome is Outcome.REGRESSED
    assert "(9 runs, 1 set aside as outliers, 700 blocks)" in v.message
    # Two runs that disagree with each other are no outliers: their spread is kept.
    split = [noisy(rng, c, 70, 0.01) for c in [0.98] * 5 + [1.02] * 5]
    wide = ratio_baseline([x for run in split for x in run], [70] * 10)
    assert wide.set_aside == 0 and wide.between > 0.02**2 / 4


def test_a_process_apart_from_the_others_is_averaged_an_odd_run_in_it_set_aside() -> None:
    # Three processes of ten runs (--ortperf-update-processes=3); the third reads 4% apart,
    # and one run of the first reads 7% off the others of its process.
    rng = np.random.default_rng(23)
    centres = [0.97] * 9 + [1.04] + [0.97] * 10 + [1.01] * 10
    runs = [noisy(rng, c, 70, 0.005) for c in centres]
    blocks = [x for run in runs for x in run]
    pooled = ratio_baseline(blocks, [70] * 30)
    assert pooled.set_aside > 1  # across processes the third's runs looked like outliers
    base = ratio_baseline(blocks, [70] * 30, [10, 10, 10])
    assert base.set_aside == 1 and base.runs == 29
    assert base.ratio == pytest.approx(math.exp((19 * math.log(0.97) + 10 * math.log(1.01)) / 29),
                                       rel=0.002)  # fmt: skip


def _in_processes(rng: np.random.Generator, centres: list[float], runs: int = 10) -> list[float]:
    """Blocks of ``runs`` session pairs in each process, each pair 0.3% apart, the
    process's pairs around its centre."""
    return [
        x
        for centre in centres
        for _ in range(runs)
        for x in noisy(rng, centre * math.exp(rng.normal(0.0, 0.003)), 70, 0.005)
    ]


def test_a_baseline_in_several_processes_measures_their_spread_apart_from_the_pairs() -> None:
    rng = np.random.default_rng(24)
    agree = ratio_baseline(_in_processes(rng, [0.97] * 3), [70] * 30, [10, 10, 10])
    apart = ratio_baseline(_in_processes(rng, [0.95, 0.97, 0.99]), [70] * 30, [10, 10, 10])
    for base in (agree, apart):
        assert base.processes == 3 and base.runs == 30 and base.between_df == 27
        assert base.process_share == pytest.approx(1 / 3)
        # The pairs' spread is the one within each process: 0.3% whether they agree or not.
        assert 0.002**2 < base.between < 0.0045**2
    # Processes 2% apart: measured, a check's process and theirs far past the allowance.
    assert 0.012**2 < apart.process < 0.035**2 and apart.measured_process
    assert apart.process_variance == pytest.approx(apart.process * (1 + 1 / 3))
    assert apart.process_variance > 10 * BETWEEN_PROCESS_FLOOR**2
    assert agree.process < 0.002**2 and not agree.measured_process
    assert agree.process_variance == BETWEEN_PROCESS_FLOOR**2
    # The estimate's own error holds the processes' offsets, a third of their variance each.
    assert apart.variance > apart.process / 3 > 20 * agree.variance
    # One process, or runs that cannot be told from their process: no process term.
    single = ratio_baseline(_in_processes(rng, [0.97]), [70] * 10)
    assert single.processes == 1 and single.process == 0.0
    one_each = ratio_baseline(_in_processes(rng, [0.95, 0.97, 0.99], 1), [70] * 3, [1, 1, 1])
    assert one_each.processes == 1 and one_each.process == 0.0


def test_a_check_reads_what_processes_apart_make_uncertain() -> None:
    # A check whose own process reads 5.5% above the baseline's mean: past the threshold.
    # Against processes that agree it is a regression; against processes 2% apart a check
    # process offset that large is what they show can happen: not a significant slowdown.
    rng = np.random.default_rng(25)
    check = [x for _ in range(3) for x in noisy(rng, 0.97 * 1.055, 70, 0.005)]
    agree = ratio_baseline(_in_processes(rng, [0.97] * 3), [70] * 30, [10, 10, 10])
    apart = ratio_baseline(_in_processes(rng, [0.95, 0.97, 0.99]), [70] * 30, [10, 10, 10])
    assert judge_ratio(check, agree, runs=[70] * 3).outcome is Outcome.REGRESSED
    verdict = judge_ratio(check, apart, runs=[70] * 3)
    assert verdict.outcome is Outcome.INCONCLUSIVE, verdict.message
    assert "(30 runs in 3 processes, 2100 blocks)" in verdict.message
    # A gross slowdown is past whatever the processes leave uncertain.
    gross = [x for _ in range(3) for x in noisy(rng, 0.97 * 2.0, 70, 0.005)]
    assert judge_ratio(gross, apart, runs=[70] * 3).outcome is Outcome.REGRESSED
    # And what the baseline can detect says so at the update.
    assert detectable_change(apart) > 0.05 > detectable_change(agree)
