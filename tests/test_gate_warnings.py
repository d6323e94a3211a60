"""Warnings a timing verdict carries about its own measurement (pure, injected records)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_ortperf.gating.baseline_judge import judge_entry, measurement_warnings
from pytest_ortperf.results import Outcome


def latency_record(preempted: int = 0, kept: bool = False, scale: float = 1.0) -> dict[str, Any]:
    samples = list(1e-3 * scale * np.exp(np.random.default_rng(0).normal(0, 0.002, 30)))
    control = {"name": "ortperf-control", "samples": [1e-4] * 30}
    return {
        "kind": "latency", "test": "t.py::t", "name": "m", "api": "run", "measured": True,
        "samples": samples, "calls_per_block": 1, "preempted": preempted,
        "preempted_kept": kept, "control": control,
        "block_ratios": [s / 1e-4 for s in samples],
    }  # fmt: skip


ENTRY = {
    "kind": "latency", "test": "t", "name": "m", "api": "run", "mode": "normalized",
    "samples": [1e-3] * 30, "median": 1e-3, "block_ratios": [10.0] * 30,
    "control": {"model": "ortperf-control", "median": 1e-4},
}  # fmt: skip


def test_a_quiet_measurement_has_no_warnings() -> None:
    assert measurement_warnings(latency_record()) == ([], True, False)


def test_preempted_blocks_are_named_and_the_load_average_is_not_read() -> None:
    record = latency_record(preempted=20)
    notes, trusted, busy = measurement_warnings(record)
    assert trusted and busy
    assert notes == ["40% of blocks were preempted and left out: more busy processes than cores"]


def test_a_measurement_of_only_preempted_blocks_cannot_fail_near_the_threshold() -> None:
    record = latency_record(preempted=30, kept=True, scale=1.08)
    (verdict,) = judge_entry(ENTRY, record, {}, threshold=0.05, alpha=0.01)
    assert verdict.outcome is Outcome.UNSTABLE and not verdict.failed()
    assert "every block was preempted (30)" in verdict.message
    assert "downgraded from regressed because every block was preempted" in verdict.message
    # The same figure from clean blocks fails.
    (clean,) = judge_entry(ENTRY, latency_record(scale=1.08), {}, threshold=0.05, alpha=0.01)
    assert clean.outcome is Outcome.REGRESSED


def test_a_gross_regression_is_never_muted_by_a_busy_machine() -> None:
    # 2x slower: the interval's lower bound lies far past twice the threshold, so neither
    # preempted blocks nor a busy machine may turn it into a passing ``unstable``.
    for record in (latency_record(preempted=30, kept=True, scale=2.0),
                   latency_record(preempted=20, scale=2.0)):  # fmt: skip
        (verdict,) = judge_entry(ENTRY, record, {}, threshold=0.05, alpha=0.01)
        assert verdict.outcome is Outcome.REGRESSED and verdict.failed()
        assert "not downgraded although" in verdict.message
        assert "past 2x the threshold" in verdict.message


def test_a_normalized_regression_near_the_threshold_on_a_busy_machine_is_unstable() -> None:
    # Contention can hit the model harder than the control: with many preempted blocks a
    # normalized latency near its threshold reports, it does not fail, and says why.
    (busy,) = judge_entry(ENTRY, latency_record(preempted=20, scale=1.08), {})
    assert busy.outcome is Outcome.UNSTABLE
    assert "downgraded from regressed because 40% of blocks were preempted" in busy.message
    (quiet,) = judge_entry(ENTRY, latency_record(scale=1.08), {})
    assert quiet.outcome is Outcome.REGRESSED
