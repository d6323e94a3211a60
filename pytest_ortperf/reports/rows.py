"""The one row model every report shares: a gated metric, or a measurement nobody gated.

Terminal, HTML and Markdown reports all list :func:`summary_rows`, in the order of the
:class:`~pytest_ortperf.results.Outcome` enum (most urgent first), with the values
formatted by :mod:`pytest_ortperf.units`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from pytest_ortperf.results import (
    ColdStartResult,
    Comparison,
    Judgement,
    LatencyResult,
    Outcome,
    PerCallResult,
    Record,
    ThroughputResult,
    Verdict,
)
from pytest_ortperf.units import (
    format_bytes,
    format_change,
    format_interval,
    format_metric,
    format_ratio_interval,
    format_seconds,
)

Key = tuple[str, str]
"""(test, name) of a measurement."""


@dataclass(frozen=True)
class SummaryRow:
    """One line of the outcomes table: a gated metric, or a measurement nobody gated
    (outcome ``recorded``).

    ``change`` is the change with its interval (``+5.0% [+4.1%, +5.9%]``); ``point_change``
    and ``interval`` are its two parts, and ``confidence`` the interval's confidence
    (``1 - 2 * alpha`` of the verdict; None without an interval), for reports that show
    them in columns of their own."""

    outcome: Outcome
    test: str
    name: str
    kind: str
    metric: str
    value: str
    change: str
    message: str
    point_change: str = ""
    interval: str = ""
    confidence: float | None = None

    @property
    def needs_attention(self) -> bool:
        """Regressed or inconclusive (see :attr:`Outcome.needs_attention`)."""
        return self.outcome.needs_attention


def verdict_value(verdict: Verdict) -> str:
    """``current vs baseline`` of a verdict (only current when there is no baseline; node
    counts for structure, whose message says what changed)."""
    metric, current, baseline = verdict.metric, verdict.current, verdict.baseline
    if metric == "structure":
        if not (current or baseline):
            return "-"
        return f"{current:g} vs {baseline:g} nodes"
    if not math.isfinite(baseline):
        return format_metric(metric, current)
    return f"{format_metric(metric, current)} vs {format_metric(metric, baseline)}"


def _has_change(verdict: Verdict) -> bool:
    return verdict.metric != "structure" and math.isfinite(verdict.change)


def verdict_point_change(verdict: Verdict) -> str:
    """``+5.0%``; empty for structure and for verdicts without a change."""
    return format_change(verdict.change) if _has_change(verdict) else ""


def verdict_interval(verdict: Verdict) -> str:
    """``[+4.1%, +5.9%]``, the ``1 - 2 * alpha`` interval of the change; empty for
    structure and for verdicts without a change."""
    return format_interval(verdict.low, verdict.high) if _has_change(verdict) else ""


def verdict_confidence(verdict: Verdict) -> float | None:
    """The confidence of :func:`verdict_interval` (``1 - 2 * alpha``), None without one."""
    return 1.0 - 2.0 * verdict.alpha if _has_change(verdict) else None


def verdict_change(verdict: Verdict) -> str:
    """``+5.0% [+4.1%, +5.9%]``; empty for structure and for verdicts without a change."""
    if not _has_change(verdict):
        return ""
    return f"{verdict_point_change(verdict)} {verdict_interval(verdict)}"


def record_value(record: Record) -> str:
    """The headline figure of a record: ratio and interval, median and IQR, or peak."""
    if isinstance(record, Comparison):
        return format_ratio_interval(record.ratio, record.low, record.high)
    if isinstance(record, LatencyResult):
        return f"{format_seconds(record.median)} (IQR {format_seconds(record.iqr)})"
    if isinstance(record, ColdStartResult):
        figures = ", ".join(f"{f} {format_seconds(record.median(f))}" for f in record.figures)
        return f"cold start {figures} (median of {record.launches})"
    if isinstance(record, PerCallResult):
        return f"single calls {tail_figures(record)} (n={record.n})"
    if isinstance(record, ThroughputResult):
        return throughput_figures(record)
    return f"{format_bytes(record.max_peak_bytes)} peak"


def tail_figures(record: PerCallResult) -> str:
    """``p50 1.41 us, p90 1.52 us, p99 2.03 us, p99.9 -`` (timer cost subtracted; ``-``
    where too few calls lie beyond the quantile)."""
    return ", ".join(f"{label} {format_seconds(v)}" for label, v in record.quantiles.items())


def format_rate(calls_per_s: float) -> str:
    """Calls per second with 3 significant digits: ``1.23k/s``."""
    if not math.isfinite(calls_per_s):
        return "-"
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if calls_per_s >= scale:
            return f"{calls_per_s / scale:#.3g}".rstrip(".") + f"{unit}/s"
    return f"{calls_per_s:#.3g}".rstrip(".") + "/s"


def throughput_figures(record: ThroughputResult) -> str:
    """``1 thread 9.10k/s, 2 threads 17.2k/s (1.89x), ...`` and the threading settings."""
    scaling = record.scaling
    parts = []
    for level in record.levels:
        n = level.concurrency
        factor = "" if scaling.get(n, 1.0) == 1.0 else f" ({scaling[n]:.2f}x)"
        parts.append(f"{n} thread{'s' if n > 1 else ''} {format_rate(level.calls_per_s)}{factor}")
    return f"{', '.join(parts)}; {threading_note(record)}"


def threading_note(record: ThroughputResult) -> str:
    """``shared session, intra-op 1, no spinning, 2 cores``."""
    intra = record.intra_op_threads or f"default ({record.cores})"
    spin = "spinning" if record.spinning else "no spinning"
    sessions = record.sessions.replace("_", "-")
    return f"{sessions} session, intra-op {intra}, {spin}, {record.cores} cores"


def verdicts_by_key(judgements: Sequence[Judgement]) -> dict[Key, tuple[Verdict, ...]]:
    """Verdicts by (test, name); a later judgement of the same key replaces an earlier."""
    return {(j.test, j.name): j.verdicts for j in judgements}


def summary_rows(records: Sequence[Record], judgements: Sequence[Judgement]) -> list[SummaryRow]:
    """One row per gated metric and per ungated measurement, in outcome order (then in the
    order measured)."""
    judged = verdicts_by_key(judgements)
    rows: list[SummaryRow] = []
    seen: set[Key] = set()
    for record in records:
        key = (record.test, record.name)
        if key in seen:
            continue
        if key in judged:
            seen.add(key)
        row = partial(SummaryRow, test=record.test, name=record.name, kind=record.kind)
        rows.extend(
            row(v.outcome, metric=v.metric, value=verdict_value(v), change=verdict_change(v),
                message=v.message, point_change=verdict_point_change(v),
                interval=verdict_interval(v), confidence=verdict_confidence(v))
            for v in judged.get(key, ())
        )  # fmt: skip
        if key not in judged:
            rows.append(
                row(Outcome.RECORDED, metric="-", value=record_value(record), change="",
                    message=f"via {record.api}")
            )  # fmt: skip
    return sorted(rows, key=lambda r: r.outcome.rank)  # stable: measured order within


def outcome_counts(rows: Sequence[SummaryRow]) -> Mapping[Outcome, int]:
    """How many rows have each outcome, in outcome order (outcomes with none left out)."""
    counts = {outcome: 0 for outcome in Outcome}
    for row in rows:
        counts[row.outcome] += 1
    return {outcome: n for outcome, n in counts.items() if n}
