"""Pure formatting of results for the terminal."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .results import Comparison, LatencyResult, MemoryRecord, Record

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


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned first two columns, right-aligned numbers; the first column is cut from
    the left (keeping the test name's end) so a line fits in ``WIDTH`` characters."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    widths[0] = min(widths[0], WIDTH - sum(widths[1:]) - 2 * (len(widths) - 1))
    lines = []
    for row in [header, *rows]:
        cells = [_shorten(row[0], widths[0]).ljust(widths[0])]
        for i, (cell, width) in enumerate(zip(row[1:], widths[1:], strict=True), start=1):
            cells.append(cell.ljust(width) if i == 1 else cell.rjust(width))
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "-" * max(len(line) for line in lines))
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
        lines += _table(("measurement", "api", "median", "IQR", "n"), rows)
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
        lines += _table(
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
        lines += _table(("memory", "api", "peak RSS", "method"), memory_rows)
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
        lines += _table(("gated metric", "metric", "outcome"), gate_rows)
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
