"""Pure formatting of results for the terminal."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_ortperf.results import Comparison, LatencyResult, MemoryRecord, Record

WIDTH = 100


def format_seconds(seconds: float | None) -> str:
    """A duration with a unit and 3 significant digits: ``812 ns``, ``45.3 us``,
    ``1.00 ms``; ``-`` for None or NaN."""
    if seconds is None or math.isnan(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:#.3g}".rstrip(".") + f" {unit}"
    raise AssertionError("unreachable")


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def _numeric(cell: str) -> bool:
    return cell[:1].isdigit() or (cell[:1] in "+-" and cell[1:2].isdigit())


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = WIDTH
) -> list[str]:
    """Rows aligned under their header, numbers right-aligned. When a line would exceed
    ``width``, the widest text column is cut from the left (a test id keeps its end)."""
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


def summary_lines(
    records: Sequence[Record], verdicts: Sequence[Mapping[str, Any]] = ()
) -> list[str]:
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
                f"{c.ratio:.3f}",
                f"[{c.low:.3f}, {c.high:.3f}]",
                format_seconds(c.reference.median),
                format_seconds(c.candidate.median),
            )
            for c in comparisons
        ]
        lines += format_table(
            ("comparison (candidate/reference)", "ratio", "95% CI", "ref", "cand"),
            rows,
        )
    memories = [r for r in records if isinstance(r, MemoryRecord)]
    if memories:
        if lines:
            lines.append("")
        memory_rows = [
            (f"{m.test}::{m.name}", m.api, f"{m.peak / 2**20:.1f} MiB", m.method) for m in memories
        ]
        lines += format_table(("memory", "api", "peak RSS", "method"), memory_rows)
    gate_rows = []
    for payload in verdicts:
        for verdict in payload["verdicts"]:
            gate_rows.append(
                (
                    f"{payload['test']}::{payload['name']}",
                    str(verdict["metric"]),
                    str(verdict["outcome"]),
                )
            )
    if gate_rows:
        order = {"regressed": 0, "inconclusive": 1, "new": 2, "improved": 3}
        gate_rows.sort(key=lambda row: order.get(row[2], 4))
        if lines:
            lines.append("")
        lines += format_table(("gated metric", "metric", "outcome"), gate_rows)
        improved = sum(row[2] == "improved" for row in gate_rows)
        new = sum(row[2] == "new" for row in gate_rows)
        if improved or new:
            lines.append(
                f"{improved} improved, {new} without baseline: "
                "pytest --ortperf --ortperf-update records them"
            )
    return lines


def compact_property(key: str, value: object) -> object:
    """One readable line for an ``ortperf`` / ``ortperf-verdicts`` user property (other
    properties unchanged): what ``--junitxml`` shows."""
    if not isinstance(value, Mapping):
        return value
    if key == "ortperf-verdicts":
        outcomes = ", ".join(f"{v['metric']}={v['outcome']}" for v in value["verdicts"])
        return f"{value['name']}: {outcomes}"
    if key == "ortperf" and value.get("kind") == "compare":
        return (
            f"{value['name']}: ratio {value['ratio']:.4g} "
            f"[{value['low']:.4g}, {value['high']:.4g}] via {value['api']}"
        )
    if key == "ortperf" and value.get("kind") == "latency":
        summary = value["summary"]
        return (
            f"{value['name']}: median {format_seconds(summary['median'])}, "
            f"IQR {format_seconds(summary['iqr'])}, n={summary['n']} via {value['api']}"
        )
    return value
