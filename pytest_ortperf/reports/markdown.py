"""A Markdown summary of one run, for CI pages (``$GITHUB_STEP_SUMMARY``).

Outcome counts, then the regressed and inconclusive metrics with the gate's message, then
every measurement.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_ortperf.reports.rows import SummaryRow, outcome_counts, summary_rows
from pytest_ortperf.results import Judgement, Outcome, Record

ICONS = {
    Outcome.REGRESSED: "❌",
    Outcome.INCONCLUSIVE: "⚠️",
    Outcome.NEW: "🆕",
    Outcome.IMPROVED: "🚀",
    Outcome.NOT_COMPARABLE: "⚪",
    Outcome.OK: "✅",
    Outcome.RECORDED: "📏",
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
    judgements: Sequence[Judgement] = (),
    *,
    title: str = "pytest-ortperf",
    notes: Sequence[str] = (),
    report_path: str | None = None,
) -> str:
    """The summary's Markdown text (ends with a blank line, so appended summaries stay
    apart)."""
    rows = summary_rows(records, judgements)
    counts = outcome_counts(rows)
    lines = [f"## {title}", ""]
    lines.append(
        ", ".join(f"{ICONS.get(o, '')} {n} {o}" for o, n in counts.items()) or "nothing measured"
    )
    lines.append("")
    attention = [r for r in rows if r.needs_attention]
    if attention:
        lines += ["### Regressed or inconclusive", ""]
        for row in attention:
            lines.append(f"- **{row.outcome}** `{row.test}::{row.name}` {row.metric}:")
            lines.append(f"  `{_cell(row.message)}`")
        lines.append("")
    if rows:
        lines += [
            "| outcome | test | measurement | metric | value | change [CI] |",
            "|---|---|---|---|---|---|",
        ]
        shown = rows[:MAX_ROWS]  # already in outcome order
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
