"""The decision rules of pytest_ortperf.gating.rules, with injected samples (no timing)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from pytest_ortperf.gating.rules import (
    decide_early,
    fingerprint_matches,
    fingerprint_of,
    judge_latency,
    judge_ratio,
    judge_structure,
    new,
    not_comparable,
)
from pytest_ortperf.results import Outcome, Verdict


def noisy(rng: np.random.Generator, center: float, n: int, cv: float) -> list[float]:
    return list(center * np.exp(rng.normal(0.0, cv, n)))


# --------------------------------------------------------------------------- ratio outcomes


def test_ratio_regressed_message_and_fields() -> None:
    rng = np.random.default_rng(0)
    v = judge_ratio(noisy(rng, 1.108, 25, 0.0065), 1.002)
    assert v.outcome is Outcome.REGRESSED
    assert v.metric == "ratio"
    assert v.change == pytest.approx(v.current / v.baseline - 1)
    assert v.low < v.change < v.high
    assert v.low > 0.09 and v.high < 0.12
    assert v.p_value is not None and v.p_value < 1e-6
    assert v.n == 25
    assert v.message.startswith("ratio 1.10")
    assert "vs baseline 1.002: +10." in v.message
    assert "threshold 5%" in v.message and v.message.endswith("-> regressed")
    assert v.failed(strict=False) and v.failed(strict=True)


def test_ratio_ok_within_noise() -> None:
    rng = np.random.default_rng(1)
    v = judge_ratio(noisy(rng, 0.95, 25, 0.01), 0.95)
    assert v.outcome is Outcome.OK
    assert abs(v.change) < 0.01
    assert v.low < 0 < v.high
    assert not v.failed(strict=True)


def test_ratio_small_significant_change_is_ok() -> None:
    rng = np.random.default_rng(2)
    v = judge_ratio(noisy(rng, 1.03, 40, 0.005), 1.0, threshold=0.05)
    assert v.outcome is Outcome.OK  # significant, but below the effect-size threshold
    assert v.low > 0


def test_ratio_improved() -> None:
    rng = np.random.default_rng(3)
    v = judge_ratio(noisy(rng, 0.80, 25, 0.01), 1.0)
    assert v.outcome is Outcome.IMPROVED
    assert v.change == pytest.approx(-0.2, abs=0.01)
    assert v.p_value is not None and v.p_value < 0.01
    assert not v.failed(strict=True)


def test_ratio_inconclusive_not_significant() -> None:
    # Too few blocks for significance at alpha=0.01, although the estimate is +10%.
    v = judge_ratio([1.12, 1.08, 1.11, 1.09], 1.0)
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "too few blocks to be significant: raise the budget" in v.message
    assert "(too few blocks for an interval)" in v.message
    assert math.isinf(v.high) and v.low == -1.0  # interval unbounded with 4 values
    assert not v.failed(strict=False)
    assert v.failed(strict=True)


def test_ratio_slower_but_not_significant_with_enough_blocks() -> None:
    rng = np.random.default_rng(11)
    v = judge_ratio(noisy(rng, 1.08, 12, 0.3), 1.0)
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "slower but not significant" in v.message


def test_min_blocks_for_alpha() -> None:
    from pytest_ortperf.gating.rules import min_blocks_for
    from pytest_ortperf.stats import min_attainable_p

    n = min_blocks_for(0.01)
    assert min_attainable_p(n - 2) < 0.01 <= min_attainable_p(n - 3)
    assert n == 9
    # With that many blocks, a clear regression is significant.
    assert judge_ratio([1.3] * n, 1.0).outcome is Outcome.REGRESSED


def test_ratio_inconclusive_too_wide() -> None:
    rng = np.random.default_rng(4)
    v = judge_ratio(noisy(rng, 1.0, 25, 0.25), 1.0)
    assert abs(v.change) <= 0.05
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "too wide" in v.message


def test_ratio_robust_to_outlier_blocks() -> None:
    rng = np.random.default_rng(5)
    ratios = noisy(rng, 1.0, 30, 0.01)
    ratios[3] = 3.0  # a block hit by a noisy neighbour
    ratios[17] = 2.5
    assert judge_ratio(ratios, 1.0).outcome is Outcome.OK


def test_ratio_identical_values_and_zeros() -> None:
    v = judge_ratio([1.0] * 20, 1.0)
    assert v.outcome is Outcome.OK
    assert v.change == 0 and v.p_value == 1.0
    # ties: all equal and above the baseline -> normal approximation with tie correction
    v = judge_ratio([1.2] * 20, 1.0)
    assert v.outcome is Outcome.REGRESSED


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


# --------------------------------------------------------------------------- latency


def test_latency_outcomes() -> None:
    rng = np.random.default_rng(6)
    base = noisy(rng, 1e-3, 40, 0.02)
    slow = judge_latency(noisy(rng, 1.1e-3, 40, 0.02), base, threshold=0.05, alpha=0.01)
    assert slow.outcome is Outcome.REGRESSED
    assert slow.metric == "latency" and "ms vs baseline" in slow.message
    assert slow.baseline == pytest.approx(float(np.median(base)))
    same = judge_latency(noisy(rng, 1e-3, 40, 0.02), base, threshold=0.05, alpha=0.01)
    assert same.outcome is Outcome.OK
    fast = judge_latency(noisy(rng, 0.8e-3, 40, 0.02), base, threshold=0.05, alpha=0.01)
    assert fast.outcome is Outcome.IMPROVED
    few = judge_latency([1.1e-3, 1.2e-3], [1e-3, 1.01e-3], threshold=0.05, alpha=0.01)
    assert few.outcome is Outcome.INCONCLUSIVE


# --------------------------------------------------------------------------- simulation


def simulate(
    rng: np.random.Generator,
    true_ratio: float,
    trials: int = 1000,
    n: int = 25,
    cv: float = 0.01,
    outliers: float = 0.0,
    threshold: float = 0.05,
) -> Counter[Outcome]:
    out: Counter[Outcome] = Counter()
    for _ in range(trials):
        noise = rng.normal(0.0, cv, n)
        if outliers:
            hit = rng.random(n) < outliers
            noise[hit] += rng.normal(0.0, 0.1, int(hit.sum()))
        out[judge_ratio(list(true_ratio * np.exp(noise)), 1.0, threshold=threshold).outcome] += 1
    return out


def test_simulation_a_a_false_alarms() -> None:
    rng = np.random.default_rng(2024)
    counts = simulate(rng, 1.0)
    assert counts[Outcome.REGRESSED] <= 10  # <= 1% of 1000
    assert counts[Outcome.OK] >= 990
    # heavy tails: 5% CV plus 10% of blocks hit by a +-10% disturbance
    heavy = simulate(rng, 1.0, cv=0.05, outliers=0.1)
    assert heavy[Outcome.REGRESSED] <= 10


def test_simulation_a_b_detection() -> None:
    rng = np.random.default_rng(2025)
    counts = simulate(rng, 1.10)
    assert counts[Outcome.REGRESSED] >= 950
    heavy = simulate(rng, 1.10, cv=0.05, outliers=0.1)
    assert heavy[Outcome.REGRESSED] >= 950


def test_simulation_test_alone_is_calibrated() -> None:
    # threshold 0: only the test decides, so false alarms should be about alpha (1%)
    rng = np.random.default_rng(2026)
    counts = simulate(rng, 1.0, trials=2000, threshold=0.0)
    assert counts[Outcome.REGRESSED] <= 2000 * 0.015


# --------------------------------------------------------------------------- early stop


def test_decide_early() -> None:
    rng = np.random.default_rng(10)
    clear_ok = noisy(rng, 1.0, 8, 0.005)
    assert decide_early(clear_ok, 1.0)
    assert not decide_early(clear_ok[:7], 1.0)  # under the minimum of rounds
    assert decide_early(noisy(rng, 1.2, 8, 0.005), 1.0)  # clearly regressed
    assert decide_early(noisy(rng, 0.8, 8, 0.005), 1.0)  # clearly improved
    assert not decide_early(noisy(rng, 1.05, 12, 0.01), 1.0)  # straddles the threshold
    assert not decide_early(noisy(rng, 1.0, 12, 0.2), 1.0)  # too noisy yet
    assert not decide_early(noisy(rng, 1.0, 20, 0.005), 1.0, min_rounds=30)


def test_early_stop_keeps_the_verdict() -> None:
    rng = np.random.default_rng(11)
    for true, expected in ((1.0, Outcome.OK), (1.1, Outcome.REGRESSED)):
        for _ in range(100):
            ratios: list[float] = []
            while len(ratios) < 50:
                ratios.extend(noisy(rng, true, 4, 0.01))
                if decide_early(ratios, 1.0):
                    break
            assert judge_ratio(ratios, 1.0).outcome is expected


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
SESSION = {"providers": ["CPUExecutionProvider"], "threads": 1, "spinning": False,
           "optimization": "all"}  # fmt: skip


def test_fingerprint_matches() -> None:
    here = fingerprint_of(ENV, SESSION)
    same = fingerprint_of(dict(ENV), {**SESSION, "providers": ("CPUExecutionProvider",)})
    assert fingerprint_matches(here, same) == (True, [])
    other = fingerprint_of({**ENV, "ort_version": "1.31.0", "cpu_model": "EPYC"}, SESSION)
    assert fingerprint_matches(here, other) == (False, ["cpu_model", "ort_version"])
    assert fingerprint_matches(here, fingerprint_of(ENV, {**SESSION, "threads": 4})) == (
        False,
        ["threads"],
    )
    unknown = fingerprint_of({**ENV, "cpu_model": None}, SESSION)
    assert fingerprint_matches(unknown, unknown) == (False, ["cpu_model"])


# --------------------------------------------------------------------------- verdicts


def test_verdict_failed_semantics() -> None:
    def verdict(outcome: Outcome) -> Verdict:
        return Verdict("ratio", outcome, 1.0, 1.0, 0.0, 0.0, 0.0, 0.05, 0.01, 0.5, 10, "")

    table = {
        Outcome.OK: (False, False),
        Outcome.REGRESSED: (True, True),
        Outcome.IMPROVED: (False, False),
        Outcome.INCONCLUSIVE: (False, True),
        Outcome.NEW: (False, True),
        Outcome.NOT_COMPARABLE: (False, False),
    }
    for outcome, (plain, strict) in table.items():
        assert verdict(outcome).failed(strict=False) is plain
        assert verdict(outcome).failed(strict=True) is strict
    assert str(Outcome.NOT_COMPARABLE) == "not_comparable"


def test_verdict_round_trip_and_helpers() -> None:
    rng = np.random.default_rng(12)
    v = judge_ratio(noisy(rng, 1.1, 25, 0.01), 1.0)
    data = v.to_dict()
    assert data["outcome"] == "regressed"
    assert Verdict.from_dict(data) == v
    n = new("ratio", 0.91, 25)
    assert n.outcome is Outcome.NEW and "no baseline" in n.message and n.failed(strict=True)
    nc = not_comparable("latency", 1.1e-3, 1e-3, ["cpu_model"], 20)
    assert nc.outcome is Outcome.NOT_COMPARABLE and not nc.failed(strict=True)
    assert "cpu_model differ" in nc.message and nc.change == pytest.approx(0.1)
