"""A Markdown summary of one run, for CI pages (``$GITHUB_STEP_SUMMARY``).

Outcome counts, then the regressed and inconclusive metrics with the gate's message, then
every measurement.

Test ids, names and messages are untrusted text: :func:`md_text` and :func:`md_code` make
them render as written, on one line, with no Markdown or HTML of their own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pytest_ortperf.gating.suite import Family, judged_verdicts, suite_rate
from pytest_ortperf.reports.rows import (
    SummaryRow,
    format_rate,
    outcome_counts,
    summary_rows,
    threading_note,
)
from pytest_ortperf.results import Judgement, Outcome, PerCallResult, Record, ThroughputResult
from pytest_ortperf.text import escape_control
from pytest_ortperf.units import format_seconds

ICONS = {
    Outcome.REGRESSED: "❌",
    Outcome.INCONCLUSIVE: "⚠️",
    Outcome.UNSTABLE: "🌀",
    Outcome.NEW: "🆕",
    Outcome.IMPROVED: "🚀",
    Outcome.NOT_COMPARABLE: "⚪",
    Outcome.OK: "✅",
    Outcome.RECORDED: "📏",
}
MAX_ROWS = 200
SPECIAL = frozenset("\\`*_[]<>&|~$#@!:")
"""ASCII punctuation that can start inline Markdown (CommonMark, GitHub's extensions) or
HTML: escapes, code, emphasis, links and images, autolinks (``<...>`` and bare
``scheme://``) and tags, entities, table pipes, strikethrough, math, references, mentions
and emoji codes. Any ASCII punctuation may be backslash-escaped, which makes it a literal
character."""
WWW = re.compile(r"(?i)(www)\.")
"""The start of a bare ``www.`` link (GitHub's autolinks), whose dot is escaped."""
BLOCK_START = re.compile(r"^(\d*)([-+=.)])")
"""What else starts a block at the start of a line: a list item, a setext underline."""


def md_text(text: str) -> str:
    """``text`` as Markdown text that renders exactly as written, on one line: control
    characters (``\\r``, ``\\n``, ``\\x1b``...) as visible escapes
    (:func:`~pytest_ortperf.units.escape_control`), :data:`SPECIAL` characters
    backslash-escaped, no bare link. Safe in a table cell and in a paragraph or list
    item."""
    text = "".join("\\" + c if c in SPECIAL else c for c in escape_control(text))
    return WWW.sub(r"\1\\.", text)


def md_line(text: str) -> str:
    """:func:`md_text` for the start of a line (a quoted note): no leading blanks, and a
    leading list marker or underline escaped, so the text stays a paragraph."""
    return BLOCK_START.sub(r"\1\\\2", md_text(text).lstrip())


def md_code(text: str, *, table: bool = False) -> str:
    """``text`` as a code span, on one line: fenced by more backticks than its longest run
    of backticks, padded with a space where it starts or ends with one (CommonMark).
    ``table``: a span inside a table cell, its pipes escaped; text with a backslash before
    a pipe (which GitHub's table parser would split at) is :func:`md_text` instead."""
    text = escape_control(text)
    if not text.strip(" ") or (table and "\\|" in text):
        return md_text(text)
    fence = "`" * (1 + max(map(len, re.findall("`+", text)), default=0))
    if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " "):
        text = f" {text} "
    span = f"{fence}{text}{fence}"
    return span.replace("|", "\\|") if table else span


def _row(row: SummaryRow) -> str:
    icon = ICONS.get(row.outcome, "")
    cells = [
        f"{icon} {md_text(row.outcome)}",
        md_code(row.test, table=True),
        md_text(row.name),
        md_text(row.metric),
        md_text(row.value),
        md_text(row.change),
    ]
    return "| " + " | ".join(cells) + " |"


def tails_throughput_tables(records: Sequence[Record]) -> list[str]:
    """Tables of single-call quantiles and of throughput by concurrency (none: [])."""
    lines: list[str] = []
    tails = [r for r in records if isinstance(r, PerCallResult)][:MAX_ROWS]
    if tails:
        lines += [
            "### Single calls (timer cost subtracted)",
            "",
            "| test | measurement | p50 | p90 | p99 | p99.9 | block median | calls |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in tails:
            figures = [md_text(format_seconds(v)) for v in r.quantiles.values()]
            cells = [md_code(r.test, table=True), md_text(r.name), *figures,
                     md_text(format_seconds(r.block_median)), str(r.n)]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    throughputs = [r for r in records if isinstance(r, ThroughputResult)][:MAX_ROWS]
    if throughputs:
        lines += [
            "### Throughput under concurrency",
            "",
            "| test | measurement | threads | calls/s | vs fewest | p50 of a call | p99 of a call "
            "| threading |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for t in throughputs:
            scaling = t.scaling
            for level in t.levels:
                n = level.concurrency
                cells = [md_code(t.test, table=True), md_text(t.name), str(n),
                         md_text(format_rate(level.calls_per_s)), f"{scaling[n]:.2f}x",
                         md_text(format_seconds(level.p50)), md_text(format_seconds(level.p99)),
                         md_text(threading_note(t))]  # fmt: skip
                lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def budget_table(records: Sequence[Record]) -> list[str]:
    """A table of the latency budgets' verdicts (``slo=``), violated first (none: [])."""
    from pytest_ortperf.gating.slo import TABLE_HEADER, table_row
    from pytest_ortperf.results import SLO_OUTCOMES

    judged = [(r, v) for r in records for v in getattr(r, "slo", ())]
    if not judged:
        return []
    judged.sort(key=lambda item: SLO_OUTCOMES.index(item[1].outcome))
    lines = ["### Latency budgets", "", "| test | measurement | " + " | ".join(TABLE_HEADER[1:])
             + " |", "|---" * (len(TABLE_HEADER) + 1) + "|"]  # fmt: skip
    for r, v in judged[:MAX_ROWS]:
        cells = [md_code(r.test, table=True), md_text(r.name)]
        cells += [md_text(c) for c in table_row("", v)[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def markdown_summary(
    records: Sequence[Record],
    judgements: Sequence[Judgement] = (),
    *,
    title: str = "pytest-ortperf",
    notes: Sequence[str] = (),
    report_path: str | None = None,
    family: Family | None = None,
) -> str:
    """The summary's Markdown text (ends with a blank line, so appended summaries stay
    apart); under the counts, the suite-level false-alarm line (``family``:
    ``--ortperf-family-alpha``)."""
    rows = summary_rows(records, judgements)
    counts = outcome_counts(rows)
    lines = [f"## {md_text(title)}", ""]
    lines.append(
        ", ".join(f"{ICONS.get(o, '')} {n} {md_text(o)}" for o, n in counts.items())
        or "nothing measured"
    )
    lines.append("")
    suite = suite_rate(judged_verdicts(judgements), family)
    if suite is not None:
        lines += [md_line(suite.text()), ""]
    attention = [r for r in rows if r.needs_attention]
    if attention:
        lines += ["### Regressed or inconclusive", ""]
        for row in attention:
            what = md_code(f"{row.test}::{row.name}")
            lines.append(f"- **{md_text(row.outcome)}** {what} {md_text(row.metric)}:")
            lines.append(f"  {md_code(row.message)}")
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
    lines += tails_throughput_tables(records)
    lines += budget_table(records)
    for note in notes:
        lines.append(f"> {md_line(note)}")
    if report_path:
        lines.append(f"Full report: {md_code(report_path)}")
    lines.append("")
    return "\n".join(lines) + "\n"
