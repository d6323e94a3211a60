"""Latency budgets (gating.slo): parsing, machine classes, the binomial bound, and seeded
simulations of the kept-going measurement with injected call times."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_ortperf.gating import slo
from pytest_ortperf.gating.slo import Budget, SloError, calls_needed, judge, parse_slo
from pytest_ortperf.measuring.percall import PerCallSamples
from pytest_ortperf.results import PerCallResult
from pytest_ortperf.units import parse_rate, parse_seconds

SIGMA = 0.5
TRUE_P99 = math.exp(SIGMA * 2.3263478740408408)  # lognormal(0, 0.5): its exact p99
SIMULATIONS = 200


# ------------------------------------------------------------------ units and parsing


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20 ms", 0.02), ("2s", 2.0), ("500 us", 5e-4), ("1 µs", 1e-6), (0.5, 0.5), ("3", 3.0)],
)
def test_parse_seconds(text: object, seconds: float) -> None:
    assert parse_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "rate"), [("1500/s", 1500.0), ("1.5k/s", 1500.0), (7, 7.0)])
def test_parse_rate(text: object, rate: float) -> None:
    assert parse_rate(text) == pytest.approx(rate)


@pytest.mark.parametrize(
    ("text", "why"),
    [("20 mss", "units: s, ms"), ("-1 ms", "negative"), ("inf", "finite"), (True, "such as")],
)
def test_parse_seconds_rejects(text: object, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_seconds(text)


def test_parse_each_kind() -> None:
    (latency,) = parse_slo("latency", "5 ms", "t")
    assert latency.budgets == (Budget("median", 0.5, 0.005),)
    (per_call,) = parse_slo("per_call", {"p99": "20 ms", "p50": "4 ms"}, "t")
    assert [(b.figure, b.q, b.limit) for b in per_call.budgets] == [
        ("p99", 0.99, 0.02),
        ("p50", 0.5, 0.004),
    ]
    (throughput,) = parse_slo("throughput", {4: "1500/s"}, "t")
    assert throughput.budgets == (Budget("4 threads", 0.5, 1500.0, floor=True),)
    (cold,) = parse_slo("cold_start", {"create": "2 s", "first_run": "50 ms"}, "t")
    assert [b.label for b in cold.budgets] == ["create median", "first_run median"]


@pytest.mark.parametrize(
    ("kind", "spec", "named"),
    [
        ("per_call", {"p99": "20 parsecs"}, "['p99']: the budget must be a quantity"),
        ("per_call", {"p99": "-2 ms"}, "['p99']: the budget must not be negative"),
        ("per_call", {"p99": 0}, "['p99']: the budget must be positive"),
        ("per_call", {"q99": "2 ms"}, "['q99']: a per-call budget is keyed by a quantile"),
        ("per_call", {"p99.99": "2 ms"}, "p1 to p99.9"),
        ("throughput", {"4": "1500/s"}, "['4']: a throughput budget is keyed by a thread"),
        ("throughput", {4: "1500 ms"}, "[4]: the budget must be a quantity such as 1500/s"),
        ("cold_start", {"creat": "2 s"}, "did you mean 'create'"),
        ("latency", {"Xeon": "fast"}, "['Xeon']: the budget must be"),
    ],
)
def test_bad_budgets_name_test_and_key(kind: str, spec: object, named: str) -> None:
    with pytest.raises(SloError) as info:
        parse_slo(kind, spec, "tests/x.py::t")
    assert str(info.value).startswith(f"tests/x.py::t: ortperf.{kind}(slo=...)")
    assert named in str(info.value)


# ------------------------------------------------------------------ machine classes


def test_machine_classes_most_specific_wins() -> None:
    classes = parse_slo(
        "latency",
        {"any": "9 ms", "Xeon 8375C": "6 ms", "xeon 8375c, 2 CPUs": "5 ms"},
        "t",
    )
    model = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
    chosen = slo.select(classes, model, 2)
    assert chosen is not None and chosen.budgets[0].limit == 0.005
    chosen = slo.select(classes, model, 4)
    assert chosen is not None and chosen.budgets[0].limit == 0.006
    chosen = slo.select(classes, "AMD EPYC 7763", 2)
    assert chosen is not None and chosen.machine == "any"


def test_no_budget_for_this_class_is_reported_not_gated() -> None:
    classes = parse_slo("per_call", {"EPYC 7763, 4 CPUs": {"p99": "2 ms"}}, "t")
    (verdict,) = slo.judge_all(classes, {"p99": [1.0] * 1000}, 0.01, cpu_model="Xeon 8375C", cpus=2)
    assert verdict.outcome == "not_gated"
    assert "no budget for this machine class (Xeon 8375C, 2 CPUs)" in verdict.message
    assert slo.failure_message("x", (verdict,)) is None


def test_equally_specific_classes_are_an_error() -> None:
    classes = parse_slo("latency", {"Xeon": "5 ms", "8375C": "6 ms"}, "t")
    with pytest.raises(SloError, match="all match this machine"):
        slo.select(classes, "Xeon 8375C", 2)


# ------------------------------------------------------------------ the binomial criterion


@pytest.mark.parametrize(("q", "loadgen"), [(0.9, 64), (0.99, 662)])
def test_calls_needed_is_loadgens_minimum(q: float, loadgen: int) -> None:
    assert calls_needed(q, 0.99) == loadgen
    # derived, not looked up: the binomial tail at the minimum and one call before it
    assert slo.binom_cdf(1, loadgen, 1 - q) < 0.01 <= slo.binom_cdf(1, loadgen - 1, 1 - q)


@pytest.mark.parametrize("over", [0, 1, 5, 20])
def test_calls_needed_grows_with_calls_over_budget(over: int) -> None:
    n = calls_needed(0.99, 0.99, over)
    assert slo.binom_cdf(over + 1, n, 0.01) < 0.01 <= slo.binom_cdf(over + 1, n - 1, 0.01)


def test_decision_at_exactly_the_calls_needed() -> None:
    budget = Budget("p99", 0.99, 1.0)
    assert judge([0.5] * 661, budget, 0.01).outcome == "inconclusive"
    verdict = judge([0.5] * 662, budget, 0.01)
    assert verdict.outcome == "met"
    assert verdict.high == 0.5  # the largest call bounds p99 from above
    inconclusive = judge([0.5] * 600, budget, 0.01)
    assert inconclusive.more == 62
    assert "62 more calls, all within the budget, would meet it" in inconclusive.message


def test_violated_message_names_percentile_estimate_bound_budget_calls() -> None:
    calls = [0.001 + i * 1e-6 for i in range(1000)]
    verdict = judge(calls, Budget("p99", 0.99, 5e-5), 0.01, preempted=[0.002] * 10)
    assert verdict.outcome == "violated"
    assert verdict.n == 1010 and verdict.over == 1010 and verdict.over_preempted == 10
    assert verdict.message.startswith(
        "p99 of 1010 calls: 2.00 ms (1.99 ms to 2.00 ms at 99% confidence); "
        "budget 50.0 us: violated"
    )
    assert "1010 calls over the budget (10 of them preempted)" in verdict.message
    assert "violated its latency budget" in str(slo.failure_message("n", (verdict,)))


def test_rates_are_floors() -> None:
    budget = Budget("4 threads", 0.5, 1500.0, floor=True)
    assert judge([2000.0] * 11, budget, 0.01, unit="windows").outcome == "met"
    assert judge([1000.0] * 11, budget, 0.01, unit="windows").outcome == "violated"
    few = judge([2000.0] * 5, budget, 0.01, unit="windows")
    assert few.outcome == "inconclusive" and few.more == 6
    assert "4 threads median of 5 windows: 2000/s" in few.message
    assert few.headroom == pytest.approx(2000 / 1500 - 1)


# ------------------------------------------------------------------ seeded simulations


def _simulate(budget_over_p99: float, seed: int) -> tuple[str, int]:
    """One measurement kept going against a p99 budget at ``budget_over_p99`` times the
    true p99: its outcome and its calls."""
    rng = np.random.default_rng(seed)

    def draw(m: int) -> list[float]:
        return list(rng.lognormal(0.0, SIGMA, m).tolist())

    budget = Budget("p99", 0.99, budget_over_p99 * TRUE_P99)
    values, (verdict,) = slo.keep_measuring(draw(1000), draw, [budget], 0.01)
    assert verdict.n == len(values)
    return verdict.outcome, len(values)


@pytest.mark.parametrize(("distance", "expected"), [(1.2, "met"), (0.8, "violated")])
def test_budget_20_percent_off_is_decided_in_99_percent(distance: float, expected: str) -> None:
    outcomes = [_simulate(distance, seed)[0] for seed in range(SIMULATIONS)]
    assert outcomes.count(expected) >= 0.99 * SIMULATIONS
    wrong = "met" if expected == "violated" else "violated"
    assert wrong not in outcomes


def test_budget_at_the_true_p99_is_violated_at_most_alpha() -> None:
    outcomes = [_simulate(1.0, 10_000 + seed)[0] for seed in range(SIMULATIONS)]
    assert outcomes.count("violated") <= 0.01 * SIMULATIONS
    assert outcomes.count("met") <= 0.01 * SIMULATIONS


def test_keep_measuring_stops_at_the_cap_with_calls_needed() -> None:
    budget = Budget("p99", 0.99, 1.0)
    cap = slo.cap_calls(0.99, 0.01)
    asked: list[int] = []

    def more(m: int) -> list[float]:  # 1% of the calls over a p99 budget: undecidable
        asked.append(m)
        return [2.0 if i % 100 == 0 else 0.5 for i in range(m)]

    values, (verdict,) = slo.keep_measuring(more(1000), more, [budget], 0.01)
    assert len(values) == cap == sum(asked)
    assert verdict.outcome == "inconclusive" and verdict.more > 0
    assert len(asked) < slo.LOOKS  # the first measurement, then up to 4 more looks
    assert f"{verdict.more} more calls, all within the budget, would meet it" in verdict.message


def test_keep_measuring_stops_when_decided() -> None:
    budget = Budget("p99", 0.99, 1.0)
    values, (verdict,) = slo.keep_measuring([0.5] * 1000, lambda m: [0.5] * m, [budget], 0.01)
    assert verdict.outcome == "met" and len(values) == 1000


# ------------------------------------------------------------------ per-call glue


def _samples(
    calls_ns: list[int], k: int, timer_ns: float, preempted_ns: tuple[int, ...] = ()
) -> PerCallSamples:
    return PerCallSamples(
        calls_ns=tuple(calls_ns), calls_per_round=k, blocks=(1e-3,) * (len(calls_ns) // k),
        calls_per_block=k, timer_ns=timer_ns, preempted=1 if preempted_ns else 0,
        watched=True, preempted_ns=preempted_ns,
    )  # fmt: skip


def _result(samples: PerCallSamples) -> PerCallResult:
    return PerCallResult(
        test="t", name="n", api="run", calls=tuple(x * 1e-9 for x in samples.calls_ns),
        timer_cost=samples.timer_ns * 1e-9, calls_per_round=samples.calls_per_round,
        blocks=samples.blocks, calls_per_block=samples.calls_per_block, measured=True,
    )  # fmt: skip


def test_preempted_calls_are_judged_and_counted_apart() -> None:
    first = _samples([1_000_100] * 1000, 100, 100.0, preempted_ns=(30_000_100,) * 100)
    classes = parse_slo("per_call", {"p99": "20 ms"}, "t")
    result, (verdict,) = slo.judge_per_call(
        _result(first), first, classes, 0.01, lambda m: None, cpu_model="x", cpus=2
    )
    assert verdict.outcome == "violated"  # 100 of 1100 calls at 30 ms: a busy machine
    assert verdict.n == 1100 and verdict.over == 100 and verdict.over_preempted == 100
    assert "100 calls over the budget (100 of them preempted)" in verdict.message
    assert result.n == 1000  # the record keeps the clean calls only, as before


def test_measuring_on_appends_calls_with_their_own_timer_cost() -> None:
    first = _samples([2_000_000] * 600, 100, 100.0)
    asked: list[int] = []

    def more(m: int) -> PerCallSamples:
        asked.append(m)
        return _samples([2_000_050] * m, 60 if m % 60 == 0 else 1, 150.0)

    classes = parse_slo("per_call", {"p99": "20 ms"}, "t")
    result, (verdict,) = slo.judge_per_call(
        _result(first), first, classes, 0.01, more, cpu_model="x", cpus=2
    )
    assert verdict.outcome == "met" and asked and verdict.n == result.n == 600 + sum(asked)
    assert result.corrected == pytest.approx([2_000_000 * 1e-9 - 100e-9] * result.n)
    assert 600 % result.calls_per_round == 0


def test_no_budget_for_this_class_measures_nothing_more() -> None:
    first = _samples([2_000_000] * 100, 100, 100.0)
    classes = parse_slo("per_call", {"EPYC, 64 CPUs": {"p99": "20 ms"}}, "t")

    def more(m: int) -> None:
        raise AssertionError("measured more with no budget for this machine")

    result, (verdict,) = slo.judge_per_call(
        _result(first), first, classes, 0.01, more, cpu_model="Xeon", cpus=2
    )
    assert verdict.outcome == "not_gated" and result.n == 100


def test_pr_comment_lists_violated_budgets_within_its_room() -> None:
    import dataclasses

    from pytest_ortperf.reports.pr_comment import budget_comment

    first = _samples([1_000_100] * 1000, 100, 100.0)
    verdicts = (
        judge([1e-3] * 1000, Budget("p99", 0.99, 5e-5), 0.01),
        judge([1e-3] * 1000, Budget("p50", 0.5, 0.05), 0.01),
    )
    record = dataclasses.replace(_result(first), slo=verdicts)
    text = budget_comment([record], 10_000)
    assert "Latency budgets: **1 violated, 1 met**" in text
    assert "| ❌ **violated** | `t` | n | p99 | 1.00 ms |" in text
    assert budget_comment([record], 60) == "\nLatency budgets: **1 violated, 1 met**\n"
    assert budget_comment([_result(first)], 10_000) == ""


def test_inconclusive_fails_only_when_strict() -> None:
    undecided = judge([0.5] * 600, Budget("p99", 0.99, 1.0), 0.01)
    assert slo.failure_message("n", (undecided,)) is None
    text = str(slo.failure_message("n", (undecided,), strict=True))
    assert text.startswith("ortperf: 'n' could not decide latency budget\n  INCONCLUSIVE p99")
