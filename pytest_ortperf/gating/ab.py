"""Pure rules of an A/B without baseline: is B slower than A, and which fusions changed?

An upgrade gate judges one interleaved measurement of A (say onnxruntime 1.31.1) and B
(1.32.0) on its own: "B may not be slower than A by more than the threshold". The rule is
:func:`~pytest_ortperf.gating.rules.judge_ratio` against a ratio of exactly 1 known without
error, so the interval carries the run's own sampling error (widened for dependent blocks)
and one between-run deviation of :data:`~pytest_ortperf.gating.rules.BETWEEN_RUN_UNKNOWN`
(1%): the spread of an A/B from one pair of processes to the next, which one run cannot
see. Everything here is pure: no I/O, no clock, no onnxruntime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_ortperf.gating.rules import is_fused_op, judge_ratio
from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.units import format_change, format_confidence, format_interval, format_ratio

AB_METRIC = "ratio"
"""The metric an A/B verdict is reported under (reports show it as a ratio)."""


def judge_ab(
    block_ratios: Sequence[float],
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    a: str = "A",
    b: str = "B",
) -> Verdict:
    """The verdict on paired block ratios B/A: ``regressed`` when B is slower than A by
    more than ``threshold`` with significance ``alpha`` (one-sided), ``improved``
    symmetrically, ``inconclusive`` or ``unstable`` as :func:`judge_ratio` says, else
    ``ok``. ``a`` and ``b`` name the arms in the message."""
    verdict = judge_ratio(block_ratios, 1.0, threshold=threshold, alpha=alpha, metric=AB_METRIC)
    why = ""
    if verdict.outcome in (Outcome.INCONCLUSIVE, Outcome.UNSTABLE) and "(" in verdict.message:
        why = " (" + verdict.message.split(f"-> {verdict.outcome.value} (", 1)[-1]
        why = why if why.endswith(")") else ""
    p = "" if verdict.p_value is None else f", p={verdict.p_value:.2g}"
    message = (
        f"{b} / {a} = {format_ratio(verdict.current)}: {format_change(verdict.change)} "
        f"{format_interval(verdict.low, verdict.high)} {format_confidence(1 - 2 * alpha)}, "
        f"threshold {threshold * 100:g}% (no baseline: judged on the A/B itself){p}, "
        f"{verdict.n} blocks -> {verdict.outcome.value}{why}"
    )
    return replace(verdict, message=message)


def histogram_changes(
    a: Mapping[str, int], b: Mapping[str, int], *, a_name: str = "A", b_name: str = "B"
) -> list[str]:
    """What differs between two op-type histograms of optimized graphs, one line per op
    type: ``FusedMatMul 1 -> 0 (a fusion A applies and B does not)``; empty when equal."""
    lines = []
    for op in sorted(set(a) | set(b)):
        old, new = int(a.get(op, 0)), int(b.get(op, 0))
        if old == new:
            continue
        line = f"{op} {old} -> {new}"
        if is_fused_op(op):
            lost = new < old
            line += (
                f" (a fusion {a_name} applies and {b_name} does not)"
                if lost
                else f" (a fusion {b_name} applies and {a_name} does not)"
            )
        lines.append(line)
    return lines
