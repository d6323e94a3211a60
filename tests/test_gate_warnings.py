"""Warnings a timing verdict carries about its own measurement (pure, injected records)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_ortperf.gating.baseline import judge_entry, measurement_warnings
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
    assert measurement_warnings(latency_record(), {"effective_cpus": 2}, 0.5) == ([], True, False)


def test_preempted_blocks_and_load_are_named() -> None:
    record = latency_record(preempted=20)
    notes, trusted, busy = measurement_warnings(record, {"effective_cpus": 2}, 3.7)
    assert trusted and busy
    assert notes[0].startswith("40% of blocks were preempted and left out")
    assert notes[1].startswith("load average 3.7 on 2 CPUs")


def test_a_measurement_of_only_preempted_blocks_cannot_fail() -> None:
    record = latency_record(preempted=30, kept=True, scale=1.3)
    (verdict,) = judge_entry(ENTRY, record, {}, threshold=0.05, alpha=0.01)
    assert verdict.outcome is Outcome.UNSTABLE and not verdict.failed()
    assert "every block was preempted (30)" in verdict.message
    # The same figure from clean blocks fails.
    (clean,) = judge_entry(ENTRY, latency_record(scale=1.3), {}, threshold=0.05, alpha=0.01)
    assert clean.outcome is Outcome.REGRESSED


def test_a_normalized_regression_on_a_busy_machine_is_unstable() -> None:
    # Contention can hit the model harder than the control: on a loaded machine a
    # normalized latency reports, it does not fail.
    record = latency_record(scale=1.3)
    (busy,) = judge_entry(ENTRY, record, {"effective_cpus": 2}, load_average=3.5)
    assert busy.outcome is Outcome.UNSTABLE and "load average 3.5 on 2 CPUs" in busy.message
    (quiet,) = judge_entry(ENTRY, record, {"effective_cpus": 2}, load_average=0.8)
    assert quiet.outcome is Outcome.REGRESSED
