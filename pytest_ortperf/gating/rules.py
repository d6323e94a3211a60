"""Pure decision rules: is a measurement regressed against its stored baseline?

Three metrics, strongest first (README, "Gating"):

- ``structure``: op-type histograms of the ORT-optimized graphs, compared exactly.
- ``ratio``: paired block ratios candidate/reference of one interleaved run against the
  baseline's ratio. Log-ratios ``d_i = log r_i - log baseline``; Hodges-Lehmann estimate,
  one-sided Wilcoxon signed-rank test and its distribution-free interval.
- ``latency``: two independent samples of seconds per call (current vs baseline) on log scale;
  Hodges-Lehmann shift, one-sided Mann-Whitney test and its distribution-free interval. Only
  meaningful on a matching machine (see :func:`fingerprint_matches`).

The rule, for an effect-size ``threshold`` (relative, 0.05 = 5%) and a one-sided ``alpha``:
regressed when the estimated change exceeds the threshold and "slower" is significant;
improved symmetrically; inconclusive when the estimate is beyond the threshold but not
significant, or the interval contains 0 and reaches past twice the threshold (too noisy to
tell); ok otherwise. Intervals are two-sided at confidence ``1 - 2 * alpha`` (each bound a
one-sided ``1 - alpha`` bound), so "lower bound > 0" matches "p < alpha".

Everything here is pure: no I/O, no clock, no onnxruntime, no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.stats import (
    FloatArray,
    Shift,
    min_attainable_p,
    rank_sum_shift,
    signed_rank_shift,
)
from pytest_ortperf.units import (
    format_change,
    format_metric,
    format_ratio,
    format_seconds,
)

MIN_EARLY_ROUNDS = 8
"""Fewest rounds :func:`decide_early` ever stops at."""

FUSED_OPS = frozenset(
    {
        "Attention",
        "BiasAdd",
        "BiasDropout",
        "BiasGelu",
        "BiasSoftmax",
        "BiasSplitGelu",
        "DecoderMaskedMultiHeadAttention",
        "DynamicQuantizeMatMul",
        "EmbedLayerNormalization",
        "FastGelu",
        "FusedConv",
        "FusedGemm",
        "FusedMatMul",
        "Gelu",
        "GemmFastGelu",
        "GroupNorm",
        "GroupQueryAttention",
        "LayerNormalization",
        "MatMulIntegerToFloat",
        "MatMulNBits",
        "MultiHeadAttention",
        "NhwcConv",
        "PackedAttention",
        "QAttention",
        "QuickGelu",
        "RotaryEmbedding",
        "SimplifiedLayerNormalization",
        "SkipGroupNorm",
        "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "SparseAttention",
    }
)
"""ORT contrib ops produced by graph fusions (besides any ``Fused*`` / ``QLinear*`` op)."""

FINGERPRINT_KEYS = (
    "cpu_model",
    "logical_cores",
    "ort_version",
    "providers",
    "threads",
    "spinning",
    "optimization",
)
"""Keys that must agree for absolute latencies to be comparable."""

# --------------------------------------------------------------------------- decision rule


def min_blocks_for(alpha: float) -> int:
    """Blocks (pairs) needed before the rank tests can reach significance ``alpha`` at all,
    with a margin of two: below it a regression could never fail the gate."""
    n = 1
    while min_attainable_p(n) >= alpha:
        n += 1
    return n + 2


def _check_settings(threshold: float, alpha: float) -> None:
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be a non-negative fraction, got {threshold}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")


def _classify(shift: Shift, threshold: float, alpha: float) -> tuple[Outcome, str]:
    """The outcome of a shift and, for inconclusive ones, why."""
    limit = math.log1p(threshold)
    wide = math.log1p(2 * threshold)
    if shift.estimate > limit:
        if shift.p_greater < alpha:
            return Outcome.REGRESSED, ""
        if min_attainable_p(shift.n) >= alpha:
            return Outcome.INCONCLUSIVE, "too few blocks to be significant: raise the budget"
        return Outcome.INCONCLUSIVE, "slower but not significant"
    if shift.estimate < -limit:
        if shift.p_less < alpha:
            return Outcome.IMPROVED, ""
        return Outcome.INCONCLUSIVE, "faster but not significant"
    if shift.low <= 0 <= shift.high and (shift.high > wide or shift.low < -wide):
        return Outcome.INCONCLUSIVE, "interval too wide to tell"
    return Outcome.OK, ""


def _verdict(
    metric: str,
    shift: Shift,
    baseline: float,
    threshold: float,
    alpha: float,
    fmt: Any,
    unit_word: str,
) -> Verdict:
    outcome, why = _classify(shift, threshold, alpha)
    change = math.expm1(shift.estimate)
    low, high = math.expm1(shift.low), math.expm1(shift.high)
    current = baseline * (1.0 + change)
    p = shift.p_greater if shift.estimate >= 0 else shift.p_less
    interval = (
        f"[{format_change(low)}, {format_change(high)}]"
        if math.isfinite(shift.low) and math.isfinite(shift.high)
        else "(too few blocks for an interval)"
    )
    message = (
        f"{metric} {fmt(current)} vs baseline {fmt(baseline)}: {format_change(change)} "
        f"{interval}, threshold {threshold * 100:g}%, p={p:.2g}, "
        f"{shift.n} {unit_word} -> {outcome.value}" + (f" ({why})" if why else "")
    )
    return Verdict(
        metric=metric,
        outcome=outcome,
        baseline=baseline,
        current=current,
        change=change,
        low=low,
        high=high,
        threshold=threshold,
        alpha=alpha,
        p_value=p,
        n=shift.n,
        message=message,
    )


def _positive(values: Sequence[float], what: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what}: need a non-empty sequence of numbers")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{what}: values must be finite and positive")
    return arr


def _log_ratios(block_ratios: Sequence[float], baseline_ratio: float) -> FloatArray:
    r = _positive(block_ratios, "block ratios")
    if not (math.isfinite(baseline_ratio) and baseline_ratio > 0):
        raise ValueError(f"baseline ratio must be finite and positive, got {baseline_ratio}")
    return np.asarray(np.log(r) - math.log(baseline_ratio), dtype=np.float64)


def judge_ratio(
    block_ratios: Sequence[float],
    baseline_ratio: float,
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
) -> Verdict:
    """Judge paired block ratios candidate/reference against the baseline's ratio.

    The baseline ratio is taken as a fixed number. ``current`` in the verdict is the
    Hodges-Lehmann ratio estimate (close to, not always equal to, the median of the blocks).
    """
    _check_settings(threshold, alpha)
    shift = signed_rank_shift(_log_ratios(block_ratios, baseline_ratio), alpha)
    return _verdict("ratio", shift, float(baseline_ratio), threshold, alpha, format_ratio, "blocks")


def judge_latency(
    samples: Sequence[float],
    baseline_samples: Sequence[float],
    *,
    threshold: float,
    alpha: float,
) -> Verdict:
    """Judge current latency samples (seconds per call) against the baseline's samples.

    ``baseline`` in the verdict is the median of the baseline samples and ``current`` that
    median scaled by the Hodges-Lehmann shift of the log-times. The test assumes both runs'
    samples are independent draws; run-to-run drift is not modelled, so use a threshold
    above the machine's run-to-run noise and only where :func:`fingerprint_matches`.
    """
    _check_settings(threshold, alpha)
    x = np.log(_positive(samples, "latency samples"))
    y = np.log(_positive(baseline_samples, "baseline latency samples"))
    shift = rank_sum_shift(x, y, alpha)
    baseline = float(np.median(np.exp(y)))
    return _verdict("latency", shift, baseline, threshold, alpha, format_seconds, "blocks")


def decide_early(
    block_ratios: Sequence[float],
    baseline_ratio: float,
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    min_rounds: int = MIN_EARLY_ROUNDS,
) -> bool:
    """True when measuring more rounds cannot reasonably change the verdict.

    That is, with at least ``min_rounds`` ratios, the interval of the change (confidence
    ``1 - 2 * alpha``) lies entirely above the threshold (clearly regressed), entirely inside
    ``(-threshold, +threshold)`` (clearly ok) or entirely below ``-threshold`` (clearly
    improved).
    """
    _check_settings(threshold, alpha)
    if len(block_ratios) < max(min_rounds, 2):
        return False
    shift = signed_rank_shift(_log_ratios(block_ratios, baseline_ratio), alpha)
    limit = math.log1p(threshold)
    return shift.low > limit or shift.high < -limit or (-limit < shift.low and shift.high < limit)


# --------------------------------------------------------------------------- structure


def is_fused_op(op_type: str) -> bool:
    """Whether ``op_type`` is one ORT graph fusions produce."""
    return op_type.startswith(("Fused", "QLinear")) or op_type in FUSED_OPS


def judge_structure(
    baseline: Mapping[str, Mapping[str, int]], current: Mapping[str, Mapping[str, int]]
) -> Verdict:
    """Compare op-type histograms per role (``reference``, ``candidate``) exactly.

    Any difference is a regression (``candidate lost fusion: FusedMatMul 1 -> 0, ...``;
    "lost fusion" when a fused op's count went down, else "structure changed"). A role with
    an empty histogram on either side is skipped; with no baseline histograms at all the
    outcome is ``new``, with no current ones ``not_comparable``. ``baseline``/``current``
    are total node counts of the roles compared, ``n`` the number of op types that moved.
    """
    roles = sorted(set(baseline) | set(current))
    parts: list[str] = []
    skipped: list[str] = []
    compared: list[str] = []
    total_b = total_c = moved = 0
    for role in roles:
        b = baseline.get(role) or {}
        c = current.get(role) or {}
        if not b or not c:
            skipped.append(role)
            continue
        compared.append(role)
        total_b += sum(int(v) for v in b.values())
        total_c += sum(int(v) for v in c.values())
        changes = [
            (op, int(b.get(op, 0)), int(c.get(op, 0)))
            for op in sorted(set(b) | set(c))
            if int(b.get(op, 0)) != int(c.get(op, 0))
        ]
        if changes:
            moved += len(changes)
            lost = any(new < old and is_fused_op(op) for op, old, new in changes)
            what = "lost fusion" if lost else "structure changed"
            parts.append(f"{role} {what}: " + ", ".join(f"{op} {o} -> {n}" for op, o, n in changes))
    if not compared:
        any_current = any(current.get(r) for r in roles)
        any_baseline = any(baseline.get(r) for r in roles)
        if any_current and not any_baseline:
            outcome, message = Outcome.NEW, "structure: no op histograms in the baseline"
        else:
            outcome, message = Outcome.NOT_COMPARABLE, "structure: no op histograms recorded"
        return Verdict("structure", outcome, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None, 0, message)
    if parts:
        outcome, message = Outcome.REGRESSED, "; ".join(parts)
    else:
        sizes = ", ".join(f"{r} {sum(int(v) for v in current[r].values())} nodes" for r in compared)
        outcome, message = Outcome.OK, f"structure unchanged: {sizes}"
    if skipped:
        message += f" (no histogram for {', '.join(skipped)})"
    change = total_c / total_b - 1.0 if total_b else 0.0
    return Verdict(
        metric="structure",
        outcome=outcome,
        baseline=float(total_b),
        current=float(total_c),
        change=change,
        low=change,
        high=change,
        threshold=0.0,
        alpha=0.0,
        p_value=None,
        n=moved,
        message=message,
    )


# --------------------------------------------------------------------------- environment


def fingerprint_of(environment: Mapping[str, Any], session: Mapping[str, Any]) -> dict[str, Any]:
    """The flat mapping :func:`fingerprint_matches` compares: machine and ORT version from
    ``environment`` (``env.collect_environment()``), providers and thread/optimization
    settings from ``session`` (``SessionInfo.to_dict()``)."""
    return {
        "cpu_model": environment.get("cpu_model"),
        "logical_cores": environment.get("logical_cores"),
        "ort_version": environment.get("ort_version"),
        "providers": session.get("providers"),
        "threads": session.get("threads"),
        "spinning": session.get("spinning"),
        "optimization": session.get("optimization"),
    }


def _norm(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    return value


def fingerprint_matches(
    baseline_env: Mapping[str, Any], current_env: Mapping[str, Any]
) -> tuple[bool, list[str]]:
    """Whether absolute latencies are comparable, and the keys of :data:`FINGERPRINT_KEYS`
    that differ. A key unknown (missing or None) on either side counts as differing."""
    bad = []
    for key in FINGERPRINT_KEYS:
        b, c = baseline_env.get(key), current_env.get(key)
        if b is None or c is None or _norm(b) != _norm(c):
            bad.append(key)
    return not bad, bad


def not_comparable(
    metric: str, current: float, baseline: float, keys: Sequence[str], n: int = 0
) -> Verdict:
    """A verdict for a figure measured on another machine or settings: reported only."""
    change = current / baseline - 1.0 if baseline > 0 else 0.0
    message = (
        f"{metric} {format_metric(metric, current)} vs baseline {format_metric(metric, baseline)} "
        f"({format_change(change)}): not comparable here ({', '.join(keys)} differ), not gated"
    )
    return Verdict(
        metric, Outcome.NOT_COMPARABLE, baseline, current, change, change, change, 0.0, 0.0, None,
        n, message,
    )  # fmt: skip


def new(metric: str, current: float, n: int = 0) -> Verdict:
    """A verdict for a measurement without baseline entry."""
    message = (
        f"{metric} {format_metric(metric, current)}: no baseline "
        "(run with --ortperf-update to store it)"
    )
    return Verdict(
        metric, Outcome.NEW, math.nan, current, math.nan, math.nan, math.nan, 0.0, 0.0, None, n,
        message,
    )  # fmt: skip
