"""Judging a latency beside the baseline's model (:mod:`pytest_ortperf.gating.beside`) on
injected records: the A/A entry, the ratio verdict, its words, ``unchanged`` and fallbacks,
and the baseline entry's new fields (schema and rounding)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pytest_ortperf.gating.baseline_entries import entry_from_record
from pytest_ortperf.gating.baseline_schema import entry_problem
from pytest_ortperf.gating.beside import (
    KEEP_ARTIFACTS,
    as_compare_entry,
    beside_fields,
    beside_verdict,
    fallback_verdicts,
    judge_beside,
    unchanged_verdict,
)
from pytest_ortperf.results import Outcome, Verdict

SHA = "1a2b3c4d" + "0" * 56


def aa_record(seed: int = 0, runs: int = 10, per_run: int = 9) -> dict[str, Any]:
    """An A/A comparison: two sessions of one model, ratios around 1 (2% noise, a little
    between runs)."""
    rng = np.random.default_rng(seed)
    ratios = [
        float(x)
        for r in range(runs)
        for x in np.exp(rng.normal(0, 0.01) + rng.normal(0, 0.02, per_run))
    ]
    return {
        "kind": "compare", "ratio": float(np.median(ratios)), "low": 0.99, "high": 1.01,
        "confidence": 0.95, "block_ratios": ratios, "runs": [per_run] * runs,
    }  # fmt: skip


def check_record(change: float, seed: int = 1, pairs: int = 3, per_pair: int = 9) -> dict:
    """Today's arm against the baseline's model now: ratios around ``1 + change``."""
    rng = np.random.default_rng(seed)
    ratios = [
        float(x) * (1 + change)
        for _ in range(pairs)
        for x in np.exp(rng.normal(0, 0.01) + rng.normal(0, 0.02, per_pair))
    ]
    reference = {"samples": [2e-5] * len(ratios), "preempted": 0}
    candidate = {"samples": [2e-5 * (1 + change)] * len(ratios), "preempted": 0}
    return {"kind": "compare", "block_ratios": ratios, "runs": [per_pair] * pairs,
            "reference": reference, "candidate": candidate}  # fmt: skip


def entry() -> dict[str, Any]:
    return {"kind": "latency", "api": "run", **beside_fields(aa_record())}


def test_the_aa_entry_keeps_a_compare_entrys_ratio_fields():
    kept = beside_fields(aa_record())
    assert set(kept["beside"]) == {"ratio", "low", "high", "confidence", "n", "runs"}
    assert kept["beside"]["n"] == len(kept["beside_ratios"]) == sum(kept["beside"]["runs"]) == 90
    # Run sizes that do not add up to the ratios are left out (one run).
    assert "runs" not in beside_fields({**aa_record(), "runs": [3]})["beside"]
    shaped = as_compare_entry(entry())
    assert shaped is not None and shaped["kind"] == "compare" and shaped["api"] == "run"
    assert as_compare_entry({"kind": "latency"}) is None


@pytest.mark.parametrize(
    ("change", "outcome"), [(0.0, Outcome.OK), (0.30, Outcome.REGRESSED), (-0.30, Outcome.IMPROVED)]
)
def test_judged_by_the_ratio_rule_against_the_aa_baseline(change, outcome):
    (verdict,) = judge_beside(
        check_record(change), as_compare_entry(entry()), threshold=0.05, alpha=0.01
    )
    assert verdict.metric == "latency" and verdict.outcome is outcome
    assert verdict.baseline == pytest.approx(2e-5)  # seconds: the baseline's model now
    assert "its model run beside," in verdict.message
    assert "normalized" not in verdict.message


def test_a_busy_machine_is_said_and_cannot_fail_a_small_change():
    record = check_record(0.08)
    record["candidate"] = {**record["candidate"], "preempted": 27, "preempted_kept": True}
    (verdict,) = judge_beside(record, as_compare_entry(entry()), threshold=0.05, alpha=0.01)
    assert "every block was preempted" in verdict.message
    assert verdict.outcome is not Outcome.REGRESSED


def test_judging_needs_the_aa_baseline():
    with pytest.raises(ValueError, match="as_compare_entry"):
        judge_beside(check_record(0.0), None, threshold=0.05, alpha=0.01)


def verdict(outcome: Outcome = Outcome.REGRESSED, metric: str = "latency") -> Verdict:
    return Verdict(
        metric, outcome, 2e-5, 2.162e-5, 0.081, 0.069, 0.093, 0.05, 0.01, 1e-9, 27,
        "latency 21.6 us vs baseline 20.0 us (10 runs, 90 blocks): ... -> regressed",
    )  # fmt: skip


def test_the_beside_verdict_in_words():
    said = beside_verdict(verdict(), SHA, ["session.threads: 1 -> 4"])
    assert said.message.startswith(
        "latency +8.1% [+6.9%, +9.3%] against the baseline's model (sha 1a2b3c4d), run "
        "beside it now -> regressed; changed: session.threads: 1 -> 4 (latency 21.6 us"
    )
    assert said.outcome is Outcome.REGRESSED and said.change == 0.081


def test_unchanged_never_fails_and_says_its_figure():
    said = unchanged_verdict([verdict()], n=27)
    assert said.outcome is Outcome.OK and not said.failed(strict=True)
    assert said.message == (
        "unchanged: model, settings and onnxruntime identical to the baseline (latency 21.6 us "
        "vs baseline 20.0 us (10 runs, 90 blocks): ...); not gated on machine drift"
    )


def test_unchanged_and_not_measured():
    said = unchanged_verdict([], threshold=0.05, alpha=0.01)
    assert said.outcome is Outcome.OK and math.isnan(said.current) and said.n == 0
    assert said.message.endswith("(not measured: --ortperf-skip-unchanged)")


def test_a_fallback_names_its_reason_on_timing_verdicts_only():
    structure = verdict(Outcome.OK, metric="structure")
    got = fallback_verdicts([structure, verdict()], f"the model is missing; {KEEP_ARTIFACTS}")
    assert got[0] == structure
    assert got[1].outcome is Outcome.REGRESSED
    assert got[1].message.endswith(
        "; not judged beside the baseline's model: the model is missing; keep the artifact "
        "store between runs (.ortperf/artifacts in the CI cache, or $ORTPERF_ARTIFACTS, or "
        "ini ortperf_artifacts = store) and take the baseline again with --ortperf-update"
    )


def latency_record(**extra: Any) -> dict[str, Any]:
    return {
        "kind": "latency", "measured": True, "test": "t", "name": "n", "api": "run",
        "samples": [1e-5, 1.1e-5, 1.2e-5], "calls_per_block": 10, **extra,
    }  # fmt: skip


def test_the_entry_keeps_the_recipe_as_made_and_the_aa_baseline_rounded():
    recipe = {"format": 1, "feeds": {"low": 0.123456789}, "digest": "d" * 64}
    aa = beside_fields(aa_record())
    made = entry_from_record(latency_record(recipe=recipe, **aa), {})
    assert made["recipe"] == recipe  # its digest covers its floats: never rounded
    assert made["beside_ratios"] == [float(f"{x:.6g}") for x in aa["beside_ratios"]]
    assert made["beside"]["runs"] == aa["beside"]["runs"]
    assert entry_problem(made) is None
    assert "recipe" not in entry_from_record(latency_record(), {})


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("beside", {"ratio": -1, "low": 1, "high": 1},
         "field 'beside' must be {ratio, low, high, n, runs} of an A/A ratio baseline"),
        ("beside", {"ratio": 1, "low": 1, "high": 1},
         "field 'beside' must come with 'beside_ratios', its runs adding up to them"),
        ("beside_ratios", [1.0, -2.0], "field 'beside_ratios' must be a non-empty list of"),
        ("recipe", "sha", "field 'recipe' must be an object"),
    ],
)  # fmt: skip
def test_the_schema_names_a_bad_new_field(field, value, problem):
    made = entry_from_record(latency_record(), {})
    made[field] = value
    assert (entry_problem(made) or "").startswith(problem)


def test_a_compares_candidate_in_words():
    said = beside_verdict(verdict(), SHA, [], whose="candidate")
    assert said.message.startswith(
        "candidate latency +8.1% [+6.9%, +9.3%] against the baseline's candidate (sha "
        "1a2b3c4d), run beside it now -> regressed (latency 21.6 us"
    )
    (noted,) = fallback_verdicts([verdict()], "gone", whose="candidate")
    assert noted.message.endswith("; candidate not judged beside the baseline's candidate: gone")


def test_a_compare_entry_keeps_the_candidates_recipe():
    record = {
        "kind": "compare", "measured": True, "test": "t", "name": "n", "api": "run",
        "ratio": 1.0, "low": 0.9, "high": 1.1, "confidence": 0.95, "block_ratios": [1.0, 1.01],
        "reference": {"samples": [1e-5, 1e-5]}, "candidate": {"samples": [1e-5, 1e-5]},
        "recipe": {"format": 1}, **beside_fields(aa_record()),
    }  # fmt: skip
    made = entry_from_record(record, {})
    assert made["recipe"] == {"format": 1} and made["beside"]["n"] == 90
    assert entry_problem(made) is None
