"""A Markdown summary of one run, for CI pages (``$GITHUB_STEP_SUMMARY``).

Outcome counts, then failing metrics with the gate's message, then every measurement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_ortperf.reports.html import OUTCOME_ORDER, SummaryRow, outcome_counts, summary_rows
from pytest_ortperf.results import Record

ICONS = {
    "regressed": "❌",
    "inconclusive": "⚠️",
    "new": "🆕",
    "improved": "🚀",
    "not_comparable": "⚪",
    "ok": "✅",
    "recorded": "📏",
}
MAX_ROWS = 200


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _row(row: SummaryRow) -> str:
    icon = ICONS.get(row.outcome, "")
    cells = [
        f"{icon} {row.outcome}",
        f"`{row.test}`",
        row.name,
        row.metric,
        row.value,
        row.change,
    ]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def markdown_summary(
    records: Sequence[Record],
    verdicts: Sequence[Mapping[str, Any]] = (),
    *,
    title: str = "pytest-ortperf",
    notes: Sequence[str] = (),
    report_path: str | None = None,
) -> str:
    """The summary's Markdown text (ends with a blank line, so appended summaries stay
    apart)."""
    rows = summary_rows(records, verdicts)
    counts = outcome_counts(rows)
    lines = [f"## {title}", ""]
    lines.append(
        ", ".join(f"{ICONS.get(o, '')} {n} {o}" for o, n in counts.items()) or "nothing measured"
    )
    lines.append("")
    failing = [r for r in rows if r.failing]
    if failing:
        lines += ["### Failing metrics", ""]
        for row in failing:
            lines.append(f"- **{row.outcome}** `{row.test}::{row.name}` {row.metric}:")
            lines.append(f"  `{_cell(row.message)}`")
        lines.append("")
    if rows:
        lines += [
            "| outcome | test | measurement | metric | value | change [CI] |",
            "|---|---|---|---|---|---|",
        ]
        shown = sorted(rows, key=lambda r: OUTCOME_ORDER.get(r.outcome, 5))[:MAX_ROWS]
        lines += [_row(row) for row in shown]
        if len(rows) > MAX_ROWS:
            lines.append(f"\n{len(rows) - MAX_ROWS} more rows left out")
        lines.append("")
    for note in notes:
        lines.append(f"> {_cell(note)}")
    if report_path:
        lines.append(f"Full report: `{report_path}`")
    lines.append("")
    return "\n".join(lines) + "\n"
