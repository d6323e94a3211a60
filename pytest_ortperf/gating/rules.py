"""Pure decision rules: is a measurement regressed against its stored baseline?

Three metrics, strongest first (DESIGN.md section 3):

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
from dataclasses import dataclass
from enum import Enum
from functools import cache
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_ortperf.reports.terminal import format_seconds

FloatArray = npt.NDArray[np.float64]

EXACT_MAX_N = 100
"""Largest sample size for which the signed-rank test uses its exact null distribution."""

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

_NORMAL = NormalDist()


class Outcome(str, Enum):
    """What a verdict says about one metric."""

    OK = "ok"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    INCONCLUSIVE = "inconclusive"
    NEW = "new"
    NOT_COMPARABLE = "not_comparable"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Verdict:
    """The judgement of one metric against its baseline.

    ``change`` is ``current / baseline - 1`` (``current`` is the baseline scaled by the
    estimated change, so the identity is exact); ``low``/``high`` bound the change at
    confidence ``1 - 2 * alpha``. ``p_value`` is the one-sided p-value in the direction of the
    estimate (None for structure and for verdicts without a test).
    """

    metric: str
    outcome: Outcome
    baseline: float
    current: float
    change: float
    low: float
    high: float
    threshold: float
    alpha: float
    p_value: float | None
    n: int
    message: str

    def failed(self, strict: bool = False) -> bool:
        """Regressed always fails; inconclusive and new fail only under ``strict``."""
        if self.outcome is Outcome.REGRESSED:
            return True
        if self.outcome in (Outcome.INCONCLUSIVE, Outcome.NEW):
            return strict
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "outcome": self.outcome.value,
            "baseline": self.baseline,
            "current": self.current,
            "change": self.change,
            "low": self.low,
            "high": self.high,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "p_value": self.p_value,
            "n": self.n,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        p = data.get("p_value")
        return cls(
            metric=str(data["metric"]),
            outcome=Outcome(data["outcome"]),
            baseline=float(data["baseline"]),
            current=float(data["current"]),
            change=float(data["change"]),
            low=float(data["low"]),
            high=float(data["high"]),
            threshold=float(data["threshold"]),
            alpha=float(data["alpha"]),
            p_value=None if p is None else float(p),
            n=int(data["n"]),
            message=str(data["message"]),
        )


# --------------------------------------------------------------------------- rank statistics


@dataclass(frozen=True)
class Shift:
    """A location shift on log scale: estimate, interval at ``1 - 2 * alpha`` and one-sided
    p-values for "greater than 0" and "less than 0". Infinite bounds: too few values."""

    estimate: float
    low: float
    high: float
    p_greater: float
    p_less: float
    n: int


def _upper_tail(z: float) -> float:
    """P(Z >= z) for a standard normal, accurate far in the tail."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _midranks(values: FloatArray) -> tuple[FloatArray, float]:
    """1-based ranks with ties averaged, and the tie term ``sum(t**3 - t)``."""
    n = values.size
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    cuts = np.flatnonzero(np.diff(ordered) != 0) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [n]))
    counts = ends - starts
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, counts)
    tie_term = float(np.sum(counts.astype(np.float64) ** 3 - counts))
    return ranks, tie_term


@cache
def _signed_rank_cdf(n: int) -> FloatArray:
    """Exact null CDF of the Wilcoxon signed-rank statistic T+ for n values (no ties)."""
    pmf = np.ones(1, dtype=np.float64)
    for i in range(1, n + 1):
        nxt = np.zeros(pmf.size + i, dtype=np.float64)
        nxt[: pmf.size] += pmf
        nxt[i:] += pmf
        pmf = nxt / 2.0
    cdf = np.cumsum(pmf)
    cdf.flags.writeable = False
    return cdf


def _bounds(ordered: FloatArray, c: int) -> tuple[float, float]:
    """``[x_(c), x_(M+1-c)]`` (1-based order statistics), infinite when ``c < 1``."""
    if c < 1:
        return -math.inf, math.inf
    return float(ordered[c - 1]), float(ordered[ordered.size - c])


def signed_rank_shift(d: Sequence[float] | FloatArray, alpha: float) -> Shift:
    """Hodges-Lehmann estimate, interval and one-sided Wilcoxon p-values for paired values.

    Zeros are dropped from the test (Wilcoxon's method) but kept in the estimate. The exact
    null distribution is used without ties or zeros up to :data:`EXACT_MAX_N` values, else
    the normal approximation with tie correction and continuity correction.
    """
    x = np.asarray(d, dtype=np.float64)
    n_all = x.size
    if n_all == 0:
        raise ValueError("no values to test")
    i, j = np.triu_indices(n_all)
    walsh = np.sort((x[i] + x[j]) / 2.0)
    estimate = float(np.median(walsh))

    nonzero = x[x != 0]
    n = nonzero.size
    z = _NORMAL.inv_cdf(1.0 - alpha)
    if n == 0:
        p_greater = p_less = 1.0
    else:
        ranks, tie_term = _midranks(np.abs(nonzero))
        t_plus = float(ranks[nonzero > 0].sum())
        if tie_term == 0 and n == n_all and n <= EXACT_MAX_N:
            cdf = _signed_rank_cdf(n)
            t = round(t_plus)
            top = cdf.size - 1  # n(n+1)/2; T+ is symmetric about top / 2
            p_greater = float(cdf[top - t])
            p_less = float(cdf[t])
        else:
            mean = n * (n + 1) / 4.0
            var = n * (n + 1) * (2 * n + 1) / 24.0 - tie_term / 48.0
            sd = math.sqrt(max(var, 0.0))
            if sd == 0:
                p_greater = p_less = 1.0
            else:
                p_greater = _upper_tail((t_plus - mean - 0.5) / sd)
                p_less = _upper_tail((mean - t_plus - 0.5) / sd)

    # Interval from the null distribution of all n_all values (ties ignored, as usual).
    if n_all <= EXACT_MAX_N:
        cdf = _signed_rank_cdf(n_all)
        c = int(np.searchsorted(cdf, alpha * (1 + 1e-9), side="right"))
    else:
        mean = n_all * (n_all + 1) / 4.0
        sd = math.sqrt(n_all * (n_all + 1) * (2 * n_all + 1) / 24.0)
        c = math.floor(mean - 0.5 - z * sd) + 1
    low, high = _bounds(walsh, c)
    return Shift(estimate, low, high, min(p_greater, 1.0), min(p_less, 1.0), n_all)


def rank_sum_shift(
    x: Sequence[float] | FloatArray, y: Sequence[float] | FloatArray, alpha: float
) -> Shift:
    """Hodges-Lehmann shift of ``x`` over ``y``, its interval and one-sided Mann-Whitney
    p-values (normal approximation, tie and continuity corrected)."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    n, m = a.size, b.size
    if n == 0 or m == 0:
        raise ValueError("both samples need at least one value")
    diffs = np.sort((a[:, None] - b[None, :]).ravel())
    estimate = float(np.median(diffs))
    total = n * m
    u = float(np.count_nonzero(diffs > 0)) + 0.5 * float(np.count_nonzero(diffs == 0))
    big_n = n + m
    _, tie_term = _midranks(np.concatenate((a, b)))
    var = total / 12.0 * ((big_n + 1) - tie_term / (big_n * (big_n - 1)))
    sd = math.sqrt(max(var, 0.0))
    if sd == 0:
        p_greater = p_less = 1.0
    else:
        p_greater = _upper_tail((u - total / 2.0 - 0.5) / sd)
        p_less = _upper_tail((total / 2.0 - u - 0.5) / sd)
    z = _NORMAL.inv_cdf(1.0 - alpha)
    sd0 = math.sqrt(total * (big_n + 1) / 12.0)
    c = math.floor(total / 2.0 - 0.5 - z * sd0) + 1
    low, high = _bounds(diffs, c)
    return Shift(estimate, low, high, min(p_greater, 1.0), min(p_less, 1.0), n)


# --------------------------------------------------------------------------- decision rule


def min_attainable_p(n: int) -> float:
    """The smallest one-sided p-value the signed-rank test can give with ``n`` pairs."""
    return 0.5**n if n > 0 else 1.0


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


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


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
        f"[{_pct(low)}, {_pct(high)}]"
        if math.isfinite(shift.low) and math.isfinite(shift.high)
        else "(too few blocks for an interval)"
    )
    message = (
        f"{metric} {fmt(current)} vs baseline {fmt(baseline)}: {_pct(change)} "
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
    return _verdict("ratio", shift, float(baseline_ratio), threshold, alpha, _fmt_ratio, "blocks")


def _fmt_ratio(x: float) -> str:
    return f"{x:.3f}" if 0.01 <= abs(x) < 1000 else f"{x:.4g}"


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
    fmt = format_seconds if metric == "latency" else _fmt_ratio
    message = (
        f"{metric} {fmt(current)} vs baseline {fmt(baseline)} "
        f"({_pct(change)}): not comparable here ({', '.join(keys)} differ), not gated"
    )
    return Verdict(
        metric, Outcome.NOT_COMPARABLE, baseline, current, change, change, change, 0.0, 0.0, None,
        n, message,
    )  # fmt: skip


def new(metric: str, current: float, n: int = 0) -> Verdict:
    """A verdict for a measurement without baseline entry."""
    shown = format_seconds(current) if metric == "latency" else _fmt_ratio(current)
    message = f"{metric} {shown}: no baseline (run with --ortperf-update to store it)"
    return Verdict(
        metric, Outcome.NEW, math.nan, current, math.nan, math.nan, math.nan, 0.0, 0.0, None, n,
        message,
    )  # fmt: skip
