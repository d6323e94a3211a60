"""The terminal summary of a run, and the one-line form of each ``user_properties`` entry
(what ``--junitxml`` shows). Pure formatting: no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_ortperf.reports.rows import summary_rows
from pytest_ortperf.results import (
    USER_PROPERTY,
    VERDICTS_PROPERTY,
    Comparison,
    Judgement,
    LatencyResult,
    MemoryResult,
    Outcome,
    Record,
)
from pytest_ortperf.units import (
    escape_control,
    format_bytes,
    format_ratio,
    format_ratio_bounds,
    format_ratio_interval,
    format_seconds,
)

WIDTH = 100


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def _numeric(cell: str) -> bool:
    return cell[:1].isdigit() or (cell[:1] in "+-" and cell[1:2].isdigit())


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = WIDTH
) -> list[str]:
    """Rows aligned under their header, numbers right-aligned. When a line would exceed
    ``width``, the widest text column is cut from the left (a test id keeps its end).
    Control characters in cells show as escapes (:func:`~pytest_ortperf.units.escape_control`):
    a test id or name cannot send terminal escape sequences or split a row."""
    header = [escape_control(h) for h in header]
    rows = [[escape_control(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    text_columns = [i for i in range(len(header)) if not all(_numeric(r[i]) for r in rows)]
    if excess > 0 and text_columns:
        widest = max(text_columns, key=lambda i: widths[i])
        widths[widest] = max(12, widths[widest] - excess)
    lines = []
    for row in [header, *rows]:
        cells = []
        for cell, size in zip(row, widths, strict=True):
            cell = _shorten(cell, size)
            cells.append(cell.rjust(size) if _numeric(cell) else cell.ljust(size))
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * size for size in widths))
    return lines


def summary_lines(records: Sequence[Record], judgements: Sequence[Judgement] = ()) -> list[str]:
    """Tables of measurements (test, name, api, median, IQR, n), of comparisons (ratio,
    CI) and of gated metrics (outcome, message), failures first."""
    latencies = [r for r in records if isinstance(r, LatencyResult)]
    comparisons = [r for r in records if isinstance(r, Comparison)]
    lines: list[str] = []
    if latencies:
        rows = [
            (
                f"{r.test}::{r.name}",
                r.api,
                format_seconds(r.median),
                format_seconds(r.iqr),
                str(r.n),
            )
            for r in latencies
        ]
        lines += format_table(("measurement", "api", "median", "IQR", "n"), rows)
    if comparisons:
        if lines:
            lines.append("")
        rows = [
            (
                f"{c.test}::{c.name}",
                format_ratio(c.ratio),
                format_ratio_bounds(c.low, c.high),
                format_seconds(c.reference.median),
                format_seconds(c.candidate.median),
            )
            for c in comparisons
        ]
        lines += format_table(
            ("comparison (candidate/reference)", "ratio", "95% CI", "ref", "cand"),
            rows,
        )
    memories = [r for r in records if isinstance(r, MemoryResult)]
    if memories:
        if lines:
            lines.append("")
        memory_rows = [
            (f"{m.test}::{m.name}", m.api, format_bytes(m.max_peak_bytes), m.method)
            for m in memories
        ]
        lines += format_table(("memory", "api", "peak RSS", "method"), memory_rows)
    gated = [
        row for row in summary_rows(records, judgements) if row.outcome is not Outcome.RECORDED
    ]
    if gated:
        if lines:
            lines.append("")
        lines += format_table(
            ("gated metric", "metric", "outcome"),
            [(f"{row.test}::{row.name}", row.metric, str(row.outcome)) for row in gated],
        )
        improved = sum(row.outcome is Outcome.IMPROVED for row in gated)
        new = sum(row.outcome is Outcome.NEW for row in gated)
        if improved or new:
            lines.append(
                f"{improved} improved, {new} without baseline: "
                "pytest --ortperf --ortperf-update records them"
            )
        # An unstable verdict passes, but the machine needs attention: say why and what to do.
        for row in gated:
            if row.outcome is Outcome.UNSTABLE:
                line = f"unstable {row.test}::{row.name} {row.metric}: {row.message}"
                lines.append(escape_control(line))
    return lines


def compact_property(key: str, value: object) -> object:
    """One readable line for an ``ortperf`` / ``ortperf-verdicts`` user property (other
    properties unchanged): what ``--junitxml`` shows."""
    if not isinstance(value, Mapping):
        return value
    if key == VERDICTS_PROPERTY:
        outcomes = ", ".join(f"{v['metric']}={v['outcome']}" for v in value["verdicts"])
        return f"{value['name']}: {outcomes}"
    if key == USER_PROPERTY and value.get("kind") == "compare":
        interval = format_ratio_interval(value["ratio"], value["low"], value["high"])
        return f"{value['name']}: ratio {interval} via {value['api']}"
    if key == USER_PROPERTY and value.get("kind") == "latency":
        summary = value["summary"]
        return (
            f"{value['name']}: median {format_seconds(summary['median'])}, "
            f"IQR {format_seconds(summary['iqr'])}, n={summary['n']} via {value['api']}"
        )
    if key == USER_PROPERTY and value.get("kind") == "memory":
        peak = max(value["peak_bytes"], default=value["baseline_bytes"])
        return f"{value['name']}: peak {format_bytes(peak)} ({value['method']}) via {value['api']}"
    return value
