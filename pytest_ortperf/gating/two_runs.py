"""Run B's stored measurement judged against run A's alone: what ``ortperf compare`` falls
back to where the history up to run A cannot be read
(:func:`~pytest_ortperf.gating.history_baseline.judge_runs`: runs outside any branch, older
rows, a latency on another machine class or with other settings). Pure: stored rows in,
a verdict or the reason there is none out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_ortperf.gating.rules import judge_ratio, ratio_baseline
from pytest_ortperf.results import Verdict
from pytest_ortperf.stats import ratio_of_blocks

NOT_GATED = "not gated"
"""The reason a latency of one run each has no verdict (the unit of replication is the
run: ``ortperf history`` shows the runs); prefixed to every other reason."""


def stored_block_ratios(side: Mapping[str, Any]) -> list[float]:
    """The candidate/reference block ratios of a stored comparison: from ``extra``, else
    recomputed from its samples."""
    extra = side.get("extra")
    if isinstance(extra, dict) and extra.get("block_ratios"):
        return [float(x) for x in extra["block_ratios"]]
    return ratio_of_blocks(side.get("ref_samples") or (), side.get("samples") or ())


def judge_two_runs(
    a: Mapping[str, Any], b: Mapping[str, Any], *, threshold: float, alpha: float
) -> Verdict | str:
    """The verdict of run B's measurement ``b`` against run A's ``a`` (stored rows) alone,
    or why there is none.

    Comparisons: B's block ratios against A's (one run: the gate's assumed between-run
    spread); latencies: one earlier run leaves B's median reported, :data:`NOT_GATED`;
    memory: reported, never judged (its kind is the reason)."""
    try:
        if b["kind"] == "compare":
            baseline_ratios = stored_block_ratios(a)
            if not baseline_ratios:
                return f"no samples in run {a['run_id']}"
            ratios = stored_block_ratios(b)
            if not ratios:
                return f"no samples in run {b['run_id']}"
            baseline = ratio_baseline(baseline_ratios)
            return judge_ratio(ratios, baseline, threshold=threshold, alpha=alpha)
        if b["kind"] == "latency":
            if a.get("fingerprint") != b.get("fingerprint"):
                return "other machine"
            if a.get("ort_version") != b.get("ort_version"):
                return "ort_version differs"
            return NOT_GATED
    except ValueError as exc:  # samples that are not positive numbers
        return f"unusable samples ({exc})"
    return str(b["kind"])
