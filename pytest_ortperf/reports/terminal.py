"""The terminal summary of a run, and the one-line form of each ``user_properties`` entry
(what ``--junitxml`` shows). Pure formatting: no I/O."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from pytest_ortperf.gating.settings import HISTORY_TAG
from pytest_ortperf.gating.suite import Family, judged_verdicts, suite_rate
from pytest_ortperf.reports.rows import (
    SummaryRow,
    format_rate,
    summary_rows,
    threading_note,
)
from pytest_ortperf.results import (
    USER_PROPERTY,
    VERDICTS_PROPERTY,
    ColdStartResult,
    Comparison,
    Judgement,
    LatencyResult,
    MemoryResult,
    Outcome,
    PerCallResult,
    Record,
    ThroughputResult,
)
from pytest_ortperf.text import escape_control
from pytest_ortperf.units import (
    format_bytes,
    format_confidence,
    format_ratio,
    format_ratio_bounds,
    format_ratio_interval,
    format_seconds,
)

WIDTH = 100
"""The width of a table when no terminal says otherwise (``ortperf`` CLI output, tests)."""

MIN_ID = 20
"""A shortened id keeps at least this many characters; below, rows are stacked instead."""

INDENT = 4
"""The indent of a stacked row's other cells, under its id."""

ELLIPSIS = "..."


def shorten_left(text: str, width: int) -> str:
    """``text`` cut from the left to ``width``, an ellipsis first: a test id keeps its
    distinguishing end (``...test_resnet[cpu]::latency``)."""
    if len(text) <= width:
        return text
    if width <= len(ELLIPSIS):
        return text[len(text) - width :]
    return ELLIPSIS + text[len(text) - width + len(ELLIPSIS) :]


def _cut(line: str, width: int) -> str:
    """A line cut on the right to ``width`` (the last resort of a too narrow terminal)."""
    if len(line) <= width:
        return line
    return line[: max(0, width - len(ELLIPSIS))] + ELLIPSIS[:width]


def _numeric(cell: str) -> bool:
    return cell[:1].isdigit() or (cell[:1] in "+-" and cell[1:2].isdigit())


def _text_column(rows: Sequence[Sequence[str]], i: int) -> bool:
    """Whether column ``i`` holds text (not only numbers; empty cells and ``-`` count as
    neither)."""
    cells = [r[i] for r in rows if r[i] not in ("", "-")]
    return not cells or not all(_numeric(c) for c in cells)


def _render(
    header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int]
) -> list[str]:
    # Headers are left-aligned ("95% CI" over intervals) and cut on the right when their
    # column is narrower; cells are cut from the left (an id keeps its end).
    lines = ["  ".join(_cut(h, size).ljust(size) for h, size in zip(header, widths, strict=True))]
    lines[0] = lines[0].rstrip()
    for row in rows:
        cells = []
        for cell, size in zip(row, widths, strict=True):
            cell = shorten_left(cell, size)
            cells.append(cell.rjust(size) if _numeric(cell) else cell.ljust(size))
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * size for size in widths))
    return lines


def _fit(
    header: Sequence[str], rows: Sequence[Sequence[str]], width: int, *, stack: bool
) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    if excess <= 0:
        return _render(header, rows, widths)
    if _text_column(rows, 0):  # only the id is shortened: other cells stay whole
        cut = min(excess, widths[0] - min(widths[0], MIN_ID))
        widths[0] -= cut
        excess -= cut
    if excess <= 0:
        return _render(header, rows, widths)
    if stack and len(header) > 1:
        return _stacked(header, rows, width)
    return [_cut(line, width) for line in _render(header, rows, widths)]


def _column_groups(widths: Sequence[int], room: int) -> list[list[int]]:
    """Consecutive columns grouped so that each group fits ``room`` (a column wider than
    ``room`` alone in its group)."""
    groups: list[list[int]] = [[]]
    used = 0
    for i, size in enumerate(widths):
        if groups[-1] and used + 2 + size > room:
            groups.append([])
        used = size if not groups[-1] else used + 2 + size
        groups[-1].append(i)
    return groups


def _stacked(header: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """Each row's id on a line of its own (shortened only beyond ``width``), its other
    cells on the next line, indented, and wrapped onto further lines (whole columns) where
    they do not fit: for terminals too narrow for an id beside them."""
    pad = " " * INDENT
    room = max(width - INDENT, 1)
    head, cells = header[1:], [r[1:] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    parts = [
        _fit([head[i] for i in group], [[c[i] for i in group] for c in cells], room, stack=False)
        for group in _column_groups(widths, room)
    ]
    ids = [shorten_left(cell, width) for cell in (header[0], *(r[0] for r in rows))]
    widest = max(len(part[1]) for part in parts)
    rule = "-" * min(width, max(*(len(i) for i in ids), INDENT + widest))
    lines = [ids[0], *((pad + part[0]).rstrip() for part in parts), rule]
    for k, cell in enumerate(ids[1:]):
        lines += [cell, *((pad + part[2 + k]).rstrip() for part in parts)]
    return lines


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = WIDTH
) -> list[str]:
    """Rows aligned under their header, numbers right-aligned, no line wider than ``width``
    (the terminal's, or :data:`WIDTH`).

    When a line would be wider, the first column (a test id) is cut from the left, only as
    much as needed and to no fewer than :data:`MIN_ID` characters, so that an id keeps its
    distinguishing end (``...::test_resnet[cpu]::latency``); other cells (values, changes,
    intervals) are never shortened. When that is not enough, each row is stacked: the id
    on a line of its own, its other cells indented below, wrapped by whole columns onto
    further lines where they do not fit. Only a single cell wider than the terminal is
    cut on the right.
    Control characters in cells show as escapes (:func:`~pytest_ortperf.units.escape_control`):
    a test id or name cannot send terminal escape sequences or split a row."""
    header = [escape_control(h) for h in header]
    rows = [[escape_control(c) for c in r] for r in rows]
    return _fit(header, rows, max(width, 1), stack=True)


def add_table(lines: list[str], table: Sequence[str]) -> None:
    """``table`` appended to ``lines``, a blank line between them where both hold any."""
    if lines and table:
        lines.append("")
    lines.extend(table)


def _interval_column(rows: Sequence[SummaryRow]) -> tuple[str, list[str]]:
    """The header and cells of the gated metrics' interval column: ``98% CI`` when every
    interval has the same confidence, else ``CI`` with each cell's confidence after it."""
    levels = {r.confidence for r in rows if r.confidence is not None and r.interval}
    if len(levels) <= 1:
        label = format_confidence(levels.pop()) if levels else "CI"
        return label, [r.interval for r in rows]
    return "CI", [
        f"{r.interval} {format_confidence(r.confidence).removesuffix(' CI')}"
        if r.interval and r.confidence is not None
        else r.interval
        for r in rows
    ]


def summary_lines(
    records: Sequence[Record],
    judgements: Sequence[Judgement] = (),
    *,
    width: int = WIDTH,
    family: Family | None = None,
) -> list[str]:
    """Tables of measurements (test, name, api, median, IQR, n), of comparisons (ratio,
    CI) and of gated metrics (metric, outcome, value as current vs baseline, change and
    its interval), failures first; each table fit to ``width`` (:func:`format_table`);
    then the suite-level line (``family``: ``--ortperf-family-alpha``)."""
    latencies = [r for r in records if isinstance(r, LatencyResult)]
    comparisons = [r for r in records if isinstance(r, Comparison)]
    lines: list[str] = []
    header: tuple[str, ...]
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
        lines += format_table(("measurement", "api", "median", "IQR", "n"), rows, width=width)
    if comparisons:
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
        header = ("comparison (candidate/reference)", "ratio", "95% CI", "ref", "cand")
        add_table(lines, format_table(header, rows, width=width))
    memories = [r for r in records if isinstance(r, MemoryResult)]
    if memories:
        memory_rows = [
            (
                f"{m.test}::{m.name}",
                m.api,
                format_bytes(m.max_peak_bytes),
                format_bytes(m.max_growth_bytes),
                "n/a" if m.arena_peak_bytes is None else format_bytes(m.arena_peak_bytes),
                m.method,
            )
            for m in memories
        ]
        header = ("memory", "api", "peak RSS", "growth", "ORT in use", "method")
        add_table(lines, format_table(header, memory_rows, width=width))
    colds = [r for r in records if isinstance(r, ColdStartResult)]
    if colds:
        header = ("cold start (fresh processes)", "create", "first run", "new shape", "n")
        add_table(lines, format_table(header, [cold_start_row(c) for c in colds], width=width))
    add_table(lines, tails_throughput_lines(records, width))
    add_table(lines, budget_lines(records, width))
    gated = [
        row for row in summary_rows(records, judgements) if row.outcome is not Outcome.RECORDED
    ]
    if gated:
        label, intervals = _interval_column(gated)
        header = ("gated metric", "metric", "outcome", "value", "change", label)
        gated_rows = [
            (
                f"{row.test}::{row.name}",
                row.metric,
                str(row.outcome),
                row.value,
                row.point_change,
                interval,
            )
            for row, interval in zip(gated, intervals, strict=True)
        ]
        add_table(lines, format_table(header, gated_rows, width=width))
        # A tail verdict (per_call against a reference of the same run) has no baseline
        # that an update would record: it counts in neither figure of the hint.
        improved = sum(
            row.outcome is Outcome.IMPROVED and row.kind != PerCallResult.kind for row in gated
        )
        new = [row for row in gated if row.outcome is Outcome.NEW]
        if improved or new:
            if any(HISTORY_TAG in row.message for row in new):
                fix = "the runs stored on the history's branch and machine class build it"
                lines.append(f"{improved} improved, {len(new)} without enough history: {fix}")
            else:
                lines.append(
                    f"{improved} improved, {len(new)} without baseline: "
                    "pytest --ortperf --ortperf-update records them"
                )
        lines += suite_rate_lines(judgements, width, family)
        # An unstable verdict passes, but the machine needs attention: say why and what to do.
        for row in gated:
            if row.outcome is Outcome.UNSTABLE:
                line = f"unstable {row.test}::{row.name} {row.metric}: {row.message}"
                lines.append(escape_control(line))
    return lines


def suite_rate_lines(
    judgements: Sequence[Judgement], width: int = WIDTH, family: Family | None = None
) -> list[str]:
    """How many timing verdicts this run gated and the chance of a false alarm anywhere
    among them (:class:`~pytest_ortperf.gating.suite.SuiteRate`), wrapped to ``width``."""
    rate = suite_rate(judged_verdicts(judgements), family)
    if rate is None:
        return []
    return textwrap.wrap(rate.text(), max(width, 40), break_on_hyphens=False)


def cold_start_row(record: ColdStartResult) -> tuple[str, str, str, str, str]:
    """Medians of a cold start's figures (``n/a`` where not applicable)."""

    def cell(figure: str) -> str:
        return format_seconds(record.median(figure)) if figure in record.summaries else "n/a"

    return (
        f"{record.test}::{record.name}",
        cell("create"),
        cell("first_run"),
        cell("new_shape"),
        str(record.launches),
    )


def tails_throughput_lines(records: Sequence[Record], width: int) -> list[str]:
    """Tables of single-call quantiles (timer cost subtracted, beside the block median)
    and of calls per second by concurrency."""
    lines: list[str] = []
    tails = [r for r in records if isinstance(r, PerCallResult)]
    if tails:
        rows = [
            (
                f"{r.test}::{r.name}",
                *(format_seconds(v) for v in r.quantiles.values()),
                format_seconds(r.block_median),
                str(r.n),
            )
            for r in tails
        ]
        lines += format_table(
            ("single calls", "p50", "p90", "p99", "p99.9", "block median", "n"), rows, width=width
        )
    throughputs = [r for r in records if isinstance(r, ThroughputResult)]
    if throughputs:
        levels = sorted({x.concurrency for r in throughputs for x in r.levels})
        rates_rows: list[tuple[str, ...]] = []
        for r in throughputs:
            rates = {x.concurrency: format_rate(x.calls_per_s) for x in r.levels}
            rates_rows.append(
                (
                    f"{r.test}::{r.name}",
                    *(rates.get(n, "-") for n in levels),
                    threading_note(r),
                )
            )
        header = ("throughput (calls/s)", *(f"{n} thr" for n in levels), "threading")
        add_table(lines, format_table(header, rates_rows, width=width))
    return lines


def budget_lines(records: Sequence[Record], width: int) -> list[str]:
    """The latency budgets' verdicts (``slo=``), one row each, violated first."""
    from pytest_ortperf.gating.slo import TABLE_HEADER, table_row
    from pytest_ortperf.results import SLO_OUTCOMES

    rows = [
        (SLO_OUTCOMES.index(v.outcome), table_row(f"{r.test}::{r.name}", v))
        for r in records
        for v in getattr(r, "slo", ())
    ]
    if not rows:
        return []
    rows.sort(key=lambda row: row[0])
    return format_table(TABLE_HEADER, [row for _, row in rows], width=width)


def compact_property(key: str, value: object) -> object:
    """One readable line for an ``ortperf`` / ``ortperf-verdicts`` user property (other
    properties unchanged): what ``--junitxml`` shows."""
    if not isinstance(value, Mapping):
        return value
    if key == USER_PROPERTY and value.get("slo"):
        from pytest_ortperf.gating.slo import summary_text

        line = compact_property(key, {k: v for k, v in value.items() if k != "slo"})
        return f"{line}; {summary_text(value['slo'])}"
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
    if key == USER_PROPERTY and value.get("kind") == "cold_start":
        medians = ", ".join(
            f"{figure} {format_seconds(summary['median'])}"
            for figure, summary in value["summaries"].items()
        )
        return f"{value['name']}: cold start {medians} over {len(value['create'])} launches"
    if key == USER_PROPERTY and value.get("kind") == "per_call":
        shown = ", ".join(f"{label} {format_seconds(v)}" for label, v in value["quantiles"].items())
        return f"{value['name']}: single calls {shown}, n={value['n']} via {value['api']}"
    if key == USER_PROPERTY and value.get("kind") == "throughput":
        rates = ", ".join(
            f"{x['concurrency']} thr {format_rate(x['calls_per_s'])}" for x in value["levels"]
        )
        return f"{value['name']}: {rates} ({value['sessions']}) via {value['api']}"
    if key == USER_PROPERTY and value.get("kind") == "memory":
        peak = max(value["peak_bytes"], default=value["baseline_bytes"])
        return f"{value['name']}: peak {format_bytes(peak)} ({value['method']}) via {value['api']}"
    return value
