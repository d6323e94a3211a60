"""The HTML report: one self-contained file (inline CSS and JS, charts as base64 PNG).

:func:`build_html` turns a :class:`ReportInput` into the page's text; it does no I/O beyond
drawing charts in memory. Without matplotlib the page holds the tables and a line saying how
to get the charts. Sections: outcomes (failures first), comparisons against their baselines,
latency distributions, run-API sweeps, per-op profiles, history from the store, environment.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any

from pytest_ortperf.reports import charts
from pytest_ortperf.reports.rows import (
    SummaryRow,
    outcome_counts,
    summary_rows,
    verdict_change,
    verdicts_by_key,
)
from pytest_ortperf.results import (
    Comparison,
    Judgement,
    LatencyResult,
    Outcome,
    PerCallResult,
    Record,
    ThroughputResult,
)
from pytest_ortperf.units import (
    escape_control,
    format_bytes,
    format_change,
    format_ratio,
    format_ratio_bounds,
    format_seconds,
)

if TYPE_CHECKING:
    from pytest_ortperf.gating.history_changes import MeasurementChange
    from pytest_ortperf.store.db import HistoryKey, HistoryPoint

SWEEP_PREFIX = "api:"
"""Records named ``api:<api>`` come from ``ortperf.api_sweep``."""

MAX_BOXES = 30
MAX_RATIOS = 60
MAX_PANELS = 12
MAX_OPS = 15
COLLAPSE_ROWS = 16
"""Tables longer than this sit in an open ``<details>`` that a click collapses."""
PLOTS_HINT = "Charts need matplotlib: pip install pytest-ortperf[plots]"


@dataclass(frozen=True)
class ReportInput:
    """Everything a report shows. ``judgements`` are the gate's verdicts per measurement;
    ``profiles`` maps (test, name) to per-op
    summaries ({op_type, total_us, count, share}); ``history`` maps a measurement to its
    stored runs, oldest first."""

    records: Sequence[Record]
    judgements: Sequence[Judgement] = ()
    profiles: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)
    git: Mapping[str, Any] = field(default_factory=dict)
    started: float | None = None
    title: str = "pytest-ortperf report"
    run_id: int | None = None
    notes: Sequence[str] = ()
    history: Mapping[HistoryKey, Sequence[HistoryPoint]] = field(default_factory=dict)
    baseline_samples: Mapping[tuple[str, str], Sequence[float]] = field(default_factory=dict)
    """(test, name) of a latency -> the samples its baseline entry stores."""
    history_note: str | None = None
    verdicts_note: str | None = None
    threshold: float | None = None
    changes: Sequence[MeasurementChange] | None = None
    """Steps in the stored history of this run's measurements on its machine class
    (None: not looked for; ``changes_note`` may say why)."""
    changes_note: str | None = None


# ------------------------------------------------------------------------------ HTML pieces


def _e(value: object) -> str:
    # Control characters (NUL is an HTML parse error, ESC shows as garbage) as escapes.
    return html.escape(escape_control(str(value)), quote=True)


def _w(value: object) -> str:
    """Escaped text that may break after ``/``, ``::`` and ``_`` (long test ids)."""
    text = _e(value)
    for mark in ("/", "::", "_"):
        text = text.replace(mark, mark + "<wbr>")
    return text


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{_e(alt)}">'


Cell = str | tuple[str, object]
"""A cell's text, or (text, sort key) for a cell that sorts by a number."""


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Cell]], *, cls: str = "", collapse: bool = True
) -> str:
    """A sortable table (click a header); cells are escaped text. A long one can be
    collapsed (``collapse``), never cut to a fixed height: every row prints."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple):
                text, key = cell
                cells.append(f'<td data-sort="{_e(key)}">{_e(text)}</td>')
            else:
                cells.append(f"<td>{_w(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    classes = f"sortable {cls}".strip()
    html_table = (
        f'<table class="{classes}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
    return _collapsible(html_table, len(rows)) if collapse else html_table


def _collapsible(table_html: str, n_rows: int) -> str:
    """A long table in full, in an open ``<details>`` that a click collapses; the page is
    as long as its tables (no scroll box: a printout or a screenshot shows every row)."""
    if n_rows <= COLLAPSE_ROWS:
        return table_html
    return f'<details open class="rows"><summary>{n_rows} rows</summary>{table_html}</details>'


OUTCOME_LEGEND: Mapping[Outcome, str] = {
    Outcome.REGRESSED: "fails the gate: slower than the baseline beyond the threshold, "
    "significantly, confirmed by a second measurement",
    Outcome.INCONCLUSIVE: "passes (fails with --ortperf-strict), needs attention: beyond the "
    "threshold but not significant, or too noisy to tell",
    Outcome.UNSTABLE: "passes (fails with --ortperf-strict), needs attention: the measurement "
    "itself is doubtful (dependent or drifting blocks, preempted blocks)",
    Outcome.NEW: "passes (fails with --ortperf-strict): no baseline entry yet",
    Outcome.IMPROVED: "passes: faster than the baseline beyond the threshold "
    "(consider --ortperf-update)",
    Outcome.NOT_COMPARABLE: "passes, not gated: a fingerprint key or the run API differs from "
    "the baseline's, or too few earlier runs",
    Outcome.OK: "passes: within the threshold of the baseline",
    Outcome.RECORDED: "measured, not gated: no gate judged this measurement (shown for "
    "reference; it cannot fail)",
}
"""What each outcome means for the test, as the report's legend says it."""


def _badge(outcome: str) -> str:
    return f'<span class="badge {_e(outcome)}">{_e(outcome)}</span>'


def _legend(outcomes: Sequence[Outcome]) -> str:
    """The outcomes shown, each with what it means (``recorded``: measured, not gated)."""
    items = "".join(
        f"<dt>{_badge(o)}</dt><dd>{_e(OUTCOME_LEGEND.get(o, ''))}</dd>" for o in outcomes
    )
    return f'<dl class="legend">{items}</dl>' if items else ""


def headline(counts: Mapping[Outcome, int]) -> tuple[str, str]:
    """The status line and its class (``bad``, ``warn``, ``good``): failures (regressed)
    said apart from the metrics that need attention but pass (inconclusive, unstable)."""
    failed = counts.get(Outcome.REGRESSED, 0)
    doubtful = counts.get(Outcome.INCONCLUSIVE, 0) + counts.get(Outcome.UNSTABLE, 0)
    parts = []
    if failed:
        parts.append(f"{failed} metric(s) failed the gate (regressed)")
    if doubtful:
        parts.append(
            f"{doubtful} metric(s) need attention but passed (inconclusive/unstable; "
            "these fail only with --ortperf-strict)"
        )
    if not parts:
        return "no metric regressed, inconclusive or unstable", "good"
    return "; ".join(parts), "bad" if failed else "warn"


def _outcome_table(rows: Sequence[SummaryRow]) -> str:
    lines = []
    for row in rows:
        cls = ' class="fail"' if row.needs_attention else ""
        lines.append(
            f'<tr{cls}><td data-sort="{row.outcome.rank}">'
            f"{_badge(row.outcome)}</td><td>{_w(row.test)}</td><td>{_w(row.name)}</td>"
            f'<td class="nw">{_e(row.metric)}</td><td>{_e(row.value)}</td>'
            f"<td>{_e(row.change)}</td>"
            f'<td class="msg">{_e(row.message)}</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("outcome", "test", "measurement", "metric", "value", "change [CI]", "detail")
    )
    return _collapsible(
        f'<table class="sortable outcomes"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody></table>",
        len(lines),
    )


def _outcomes_body(rows: Sequence[SummaryRow]) -> str:
    legend = _legend(list(outcome_counts(rows)))
    return (legend and f"<details open><summary>legend</summary>{legend}</details>") + (
        _outcome_table(rows)
    )


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>'


Chart = Callable[[], bytes]


def _chart(draw: Chart, alt: str, enabled: bool) -> str:
    """A chart as an <img>, or nothing when charts are off; a failed chart is a note."""
    if not enabled:
        return ""
    try:
        return f"<figure>{_img(draw(), alt)}</figure>"
    except Exception as exc:  # a chart must never cost the report its tables
        return f'<p class="note">chart {_e(alt)} not drawn: {_e(type(exc).__name__)}: {_e(exc)}</p>'


def _is_sweep(record: Record) -> bool:
    return isinstance(record, LatencyResult) and record.name.startswith(SWEEP_PREFIX)


def _by_test(records: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for record in records:
        out.setdefault(record.test, []).append(record)
    return out


# ------------------------------------------------------------------------------ sections


def _header(data: ReportInput, rows: Sequence[SummaryRow]) -> str:
    when = (
        datetime.fromtimestamp(data.started, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        if data.started
        else "-"
    )
    commit = data.git.get("commit")
    commit_text = "-" if not commit else str(commit)[:10] + ("*" if data.git.get("dirty") else "")
    branch = data.git.get("branch")
    env = data.environment
    facts = [
        ("started", when),
        ("run", "-" if data.run_id is None else str(data.run_id)),
        ("commit", commit_text + (f" ({branch})" if branch else "")),
        ("onnxruntime", str(env.get("ort_version") or "-")),
        ("CPU", f"{env.get('cpu_model') or '-'}, {env.get('logical_cores') or '?'} logical cores"),
    ]
    memory = _number(env.get("memory_bytes"))
    if memory is not None:
        facts.append(("memory", format_bytes(memory)))
    counts = outcome_counts(rows)
    text, tone = headline(counts)
    status = f'<p class="status {tone}">{_e(text)}</p>'
    chips = " ".join(
        f'<span title="{_e(OUTCOME_LEGEND.get(o, ""))}">{_badge(o)}&nbsp;{n}</span>'
        for o, n in counts.items()
    )
    dl = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
    return f"<header><h1>{_e(data.title)}</h1><dl>{dl}</dl>{status}<p>{chips}</p></header>"


def _comparisons(data: ReportInput, draw: bool) -> str:
    comparisons = [r for r in data.records if isinstance(r, Comparison)]
    if not comparisons:
        return ""
    judged = verdicts_by_key(data.judgements)
    rows: list[list[Cell]] = []
    bars: list[charts.RatioBar] = []
    for c in comparisons:
        verdicts = {v.metric: v for v in judged.get((c.test, c.name), ())}
        ratio_v = verdicts.get("ratio")
        structure = verdicts.get("structure")
        baseline = None if ratio_v is None else ratio_v.baseline
        if baseline is not None and not math.isfinite(baseline):
            baseline = None  # a new measurement: no baseline yet
        change = "-" if ratio_v is None or baseline is None else verdict_change(ratio_v)
        rows.append(
            [
                f"{c.test}::{c.name}",
                (format_ratio(c.ratio), c.ratio),
                format_ratio_bounds(c.low, c.high),
                (format_seconds(c.reference.median), c.reference.median),
                (format_seconds(c.candidate.median), c.candidate.median),
                (format_ratio(baseline), baseline or 0.0),
                (change, 0.0 if baseline is None or ratio_v is None else ratio_v.change),
                "-" if ratio_v is None else str(ratio_v.outcome),
                "-" if structure is None else str(structure.outcome),
            ]
        )
        bars.append(
            charts.RatioBar(
                f"{c.test.rpartition('::')[2]}::{c.name}",
                c.ratio,
                c.low,
                c.high,
                baseline,
                failed=any(v.outcome.needs_attention for v in verdicts.values()),
            )
        )
    headers = [
        "comparison",
        "ratio",
        f"{comparisons[0].confidence:.0%} CI",
        "reference",
        "candidate",
        "baseline ratio",
        "change vs baseline [CI]",
        "ratio verdict",
        "structure",
    ]
    intro = (
        "<p>Ratio = candidate / reference time per call, measured interleaved (below 1 the "
        "candidate is faster). The change against the baseline and its interval come from "
        "the gate's verdict.</p>"
    )
    shown = bars[:MAX_RATIOS]
    more = (
        f'<p class="note">chart: first {MAX_RATIOS} of {len(bars)} comparisons</p>'
        if len(bars) > MAX_RATIOS
        else ""
    )
    chart = _chart(lambda: charts.ratio_plot(shown, threshold=data.threshold), "ratios", draw)
    return _section(
        "comparisons", "Comparisons", intro + table(headers, rows) + chart + (more if draw else "")
    )


def _boxes_of(
    records: Sequence[Record], baselines: Mapping[tuple[str, str], Sequence[float]]
) -> list[charts.Box]:
    boxes: list[charts.Box] = []
    for r in records:
        if isinstance(r, Comparison):
            boxes.append(charts.Box(f"{r.name} reference", r.reference.samples, 1))
            boxes.append(charts.Box(f"{r.name} candidate", r.candidate.samples, 2))
        elif isinstance(r, LatencyResult) and not _is_sweep(r):
            boxes.append(charts.Box(f"{r.name} ({r.api})", r.samples, 0))
            stored = baselines.get((r.test, r.name))
            if stored:
                boxes.append(charts.Box(f"{r.name} baseline", tuple(stored), charts.BASELINE_GROUP))
    return boxes


def _latency_rows(records: Sequence[Record]) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for r in records:
        arms: list[tuple[str, LatencyResult]] = []
        if isinstance(r, Comparison):
            arms = [(f"{r.name} reference", r.reference), (f"{r.name} candidate", r.candidate)]
        elif isinstance(r, LatencyResult) and not _is_sweep(r):
            arms = [(r.name, r)]
        for label, arm in arms:
            rows.append(
                [
                    label,
                    arm.api,
                    (format_seconds(arm.median), arm.median),
                    (format_seconds(arm.iqr), arm.iqr),
                    (format_seconds(arm.min), arm.min),
                    (format_seconds(arm.p90), arm.p90),
                    (format_seconds(arm.max), arm.max),
                    (str(arm.n), arm.n),
                    (str(arm.calls_per_block), arm.calls_per_block),
                ]
            )
    return rows


def _distributions(data: ReportInput, draw: bool) -> str:
    parts = []
    for test, records in _by_test(data.records).items():
        rows = _latency_rows(records)
        if not rows:
            continue
        boxes = _boxes_of(records, data.baseline_samples)
        shown = boxes[:MAX_BOXES]
        more = (
            f'<p class="note">chart: first {MAX_BOXES} of {len(boxes)} sample sets</p>'
            if draw and len(boxes) > MAX_BOXES
            else ""
        )
        chart = _chart(partial(charts.box_plot, shown), test, draw)
        headers = [
            "measurement",
            "api",
            "median",
            "IQR",
            "min",
            "p90",
            "max",
            "blocks",
            "calls/block",
        ]
        parts.append(
            f"<h3>{_e(test)}</h3>{chart}{more}<details open><summary>statistics</summary>"
            f"{table(headers, rows, collapse=False)}</details>"
        )
    if not parts:
        return ""
    intro = (
        "<p>Each sample is one block's time divided by its calls; boxes span the quartiles, "
        "whiskers 1.5 IQR.</p>"
    )
    return _section("distributions", "Latency distributions", intro + "".join(parts))


MAX_HISTOGRAMS = 20


def _per_call_row(label: str, r: PerCallResult) -> list[Cell]:
    cells: list[Cell] = [label]
    for value in r.quantiles.values():
        cells.append((format_seconds(value), -1.0 if value is None else value))
    return [
        *cells,
        (format_seconds(r.block_median), r.block_median),
        (format_change(r.agreement) or "-", r.agreement),
        (format_seconds(r.timer_cost), r.timer_cost),
        (str(r.n), r.n),
        (str(r.preempted), r.preempted),
    ]


def _per_call(data: ReportInput, draw: bool) -> str:
    """Single-call quantiles and log-scale histograms (``ortperf.per_call``)."""
    results = [r for r in data.records if isinstance(r, PerCallResult)]
    if not results:
        return ""
    parts = []
    drawn = 0
    for r in results:
        arms = [("reference", r.reference)] if r.reference is not None else []
        arms.append(("candidate" if arms else "target", r))
        rows = [_per_call_row(role, arm) for role, arm in arms if arm is not None]
        charts_html = ""
        for role, arm in arms:
            if arm is None or drawn >= MAX_HISTOGRAMS:
                continue
            drawn += 1
            marks = tuple((k, v) for k, v in arm.quantiles.items() if v is not None)
            budgets = tuple((f"{v.figure} budget", v.budget) for v in arm.slo if not v.floor)
            hist = charts.Histogram(
                f"{r.test}::{r.name} ({role})",
                arm.corrected,
                (*marks, ("block median", arm.block_median), *budgets),
            )
            charts_html += _chart(partial(charts.latency_histogram, hist), hist.label, draw)
        headers = ["arm", "p50", "p90", "p99", "p99.9", "block median", "p50 vs block",
                   "timer cost", "calls", "preempted rounds"]  # fmt: skip
        parts.append(
            f"<h3>{_e(r.test)} :: {_e(r.name)}</h3>{charts_html}"
            f"{table(headers, rows, collapse=False)}"
        )
    more = (
        f'<p class="note">histograms: first {MAX_HISTOGRAMS} arms</p>'
        if draw and drawn >= MAX_HISTOGRAMS
        else ""
    )
    intro = (
        "<p>Each call timed on its own, the timer's own cost (the median of empty timings) "
        "subtracted; rounds preempted by other processes left out. A quantile is shown "
        "(not <code>-</code>) when at least 10 calls lie beyond it. The block median is the "
        "engine's figure (the gate's), measured in the same rounds; a block averages its "
        "calls, so it sits a little above the single-call median when the calls are "
        "skewed. A tail comparison's verdict (metric <code>p99</code>) is in the outcomes.</p>"
    )
    return _section("per-call", "Single-call latency", intro + "".join(parts) + more)


def _budgets(data: ReportInput) -> str:
    """The latency budgets' verdicts (``slo=``), violated first."""
    from pytest_ortperf.gating.slo import TABLE_HEADER, table_row
    from pytest_ortperf.results import SLO_OUTCOMES

    judged = [(r, v) for r in data.records for v in getattr(r, "slo", ())]
    if not judged:
        return ""
    judged.sort(key=lambda item: SLO_OUTCOMES.index(item[1].outcome))
    rows = [
        [*table_row(f"{r.test}::{r.name}", v)[:6], (table_row("", v)[6], v.headroom), v.message]
        for r, v in judged
    ]
    intro = (
        "<p>Each budget is judged with a distribution-free binomial bound of its quantile "
        "(MLPerf LoadGen's criterion): <b>met</b> when the upper bound is within the budget, "
        "<b>violated</b> (the test fails) when the lower bound is past it, "
        "<b>inconclusive</b> otherwise, with the calls that would decide it. Headroom is the "
        "share of the budget left at the estimate. Calls of preempted rounds count. A machine "
        "with no budget for its class is <b>not gated</b>. The single-call histograms draw "
        "each budget as a line.</p>"
    )
    headers = [*TABLE_HEADER[:6], "headroom", "detail"]
    return _section("budgets", "Latency budgets", intro + table(headers, rows))


def _throughput(data: ReportInput, draw: bool) -> str:
    """Calls per second by concurrency (``ortperf.throughput``): table and curves."""
    from pytest_ortperf.reports.rows import format_rate, threading_note

    results = [r for r in data.records if isinstance(r, ThroughputResult)]
    if not results:
        return ""
    rows: list[list[Cell]] = []
    for r in results:
        scaling = r.scaling
        for level in r.levels:
            n = level.concurrency
            spread = (
                f"{format_rate(min(level.rates))} to {format_rate(max(level.rates))}"
                if level.rates
                else "-"
            )
            rows.append(
                [
                    f"{r.test}::{r.name}",
                    (str(n), n),
                    (format_rate(level.calls_per_s), level.calls_per_s),
                    (f"{scaling[n]:.2f}x", scaling[n]),
                    spread,
                    (format_seconds(level.p50), level.p50),
                    (format_seconds(level.p99), level.p99),
                    (str(r.busy_threads(n)), r.busy_threads(n)),
                    threading_note(r),
                ]
            )
    curves = [
        charts.Curve(
            f"{r.test.rpartition('::')[2]}::{r.name}",
            tuple(x.concurrency for x in r.levels),
            tuple(x.calls_per_s for x in r.levels),
            tuple(x.p99 for x in r.levels),
        )
        for r in results
    ]
    cores = results[0].cores
    chart = _chart(partial(charts.throughput_curves, curves, cores=cores), "throughput", draw)
    headers = ["measurement", "threads", "calls/s", "vs fewest", "rounds",
               "p50 of a call", "p99 of a call", "busy threads", "threading"]  # fmt: skip
    over = [
        r.name for r in results if any(r.busy_threads(x.concurrency) > r.cores for x in r.levels)
    ]
    note = (
        f'<p class="note">{len(over)} measurement(s) ask for more computing threads than the '
        f"{cores} cores: past that point calls per second can only stay flat or fall, and "
        "the figures measure the scheduler as much as the model.</p>"
        if over
        else ""
    )
    intro = (
        "<p>Python threads calling at once (onnxruntime's run releases the GIL); calls per "
        "second over each level's windows, and the time of one call as its caller saw it. "
        "Dotted lines: ideal scaling from the fewest threads (linear up to the cores, flat "
        "past them); grey line: the cores. "
        "Recorded, not gated.</p>"
    )
    return _section(
        "throughput", "Throughput under concurrency", intro + note + chart + table(headers, rows)
    )


def sweeps(records: Sequence[Record]) -> dict[str, list[LatencyResult]]:
    """The run-API sweep of each test: its ``api:<api>`` records, fastest first."""
    out: dict[str, list[LatencyResult]] = {}
    for r in records:
        if isinstance(r, LatencyResult) and _is_sweep(r):
            out.setdefault(r.test, []).append(r)
    return {test: sorted(rs, key=lambda r: r.median) for test, rs in out.items()}


def _sweeps(data: ReportInput, draw: bool) -> str:
    parts = []
    for test, results in sweeps(data.records).items():
        fastest = results[0].median
        rows: list[list[Cell]] = [
            [
                r.name[len(SWEEP_PREFIX) :],
                (format_seconds(r.median), r.median),
                (format_seconds(r.iqr), r.iqr),
                (str(r.n), r.n),
                (f"{r.median / fastest:.2f}x", r.median / fastest),
            ]
            for r in results
        ]
        boxes = [charts.Box(r.name[len(SWEEP_PREFIX) :], r.samples) for r in results]
        chart = _chart(
            partial(charts.box_plot, boxes, width=6.4),
            f"{test} run APIs",
            draw,
        )
        headers = ["api", "median", "IQR", "blocks", "vs fastest"]
        parts.append(f'<h3>{_e(test)}</h3><div class="pair">{table(headers, rows)}{chart}</div>')
    if not parts:
        return ""
    return _section("sweeps", "Run-API sweeps", "".join(parts))


def _profiles(data: ReportInput, draw: bool) -> str:
    parts = []
    for (test, name), by_op in data.profiles.items():
        merged: dict[str, list[float]] = {}
        for item in by_op:
            acc = merged.setdefault(str(item["op_type"]), [0.0, 0.0, 0.0])
            acc[0] += float(item["total_us"])
            acc[1] += float(item.get("count") or 0)
            acc[2] += float(item.get("share") or 0.0)
        ops = sorted(merged.items(), key=lambda kv: -kv[1][0])
        rows: list[list[Cell]] = [
            [op, (f"{t:,.1f}", t), (f"{c:g}", c), (f"{s:.1%}", s)] for op, (t, c, s) in ops
        ]
        top = [(op, t, s) for op, (t, _, s) in ops[:MAX_OPS]]
        chart = _chart(
            partial(charts.op_bars, top, title=f"{test}::{name}"),
            f"{test}::{name} per op",
            draw,
        )
        headers = ["op type", "kernel us", "nodes per run", "share"]
        parts.append(
            f"<h3>{_e(test)} :: {_e(name)}</h3>{chart}<details open><summary>per op type"
            f"</summary>{table(headers, rows, collapse=False)}</details>"
        )
    if not parts:
        return ""
    return _section("profiles", "Profiles by op type", "".join(parts))


def _moved(points: Sequence[HistoryPoint]) -> float:
    """Relative change of the last value from the one before (0 when unknown)."""
    previous, last = points[-2].value, points[-1].value
    return last / previous - 1.0 if previous else 0.0


def _history(data: ReportInput, draw: bool) -> str:
    if data.history_note and not data.history:
        return _section("history", "History", f'<p class="note">{_e(data.history_note)}</p>')
    keyed = {k: v for k, v in data.history.items() if len(v) >= 2}
    if not keyed:
        return ""
    rows: list[list[Cell]] = []
    for (test, name, kind, api), points in keyed.items():
        values = [p.value for p in points]
        change = _moved(points)
        fmt: Callable[[float], str] = format_ratio if kind == "compare" else format_seconds
        rows.append(
            [
                f"{test}::{name}",
                "ratio" if kind == "compare" else f"median ({api})",
                (str(len(points)), len(points)),
                " → ".join(fmt(v) for v in values[-6:]),
                (format_change(change), change),
                (fmt(min(values)), min(values)),
                (fmt(max(values)), max(values)),
            ]
        )
    # The panels: the measurements that moved most since the previous run first.
    moved = sorted(keyed.items(), key=lambda kv: -abs(_moved(kv[1])))[:MAX_PANELS]
    series = [
        charts.Series(
            f"{test.rpartition('::')[2]}::{name}",
            tuple(p.run_id for p in points),
            tuple(p.value for p in points),
            None if kind != "compare" else tuple(_or(p.low, p.value) for p in points),
            None if kind != "compare" else tuple(_or(p.high, p.value) for p in points),
            seconds=kind != "compare",
        )
        for (test, name, kind, _), points in moved
    ]
    more = (
        f'<p class="note">charts: the {MAX_PANELS} measurements that moved most since the '
        f"previous run, of {len(keyed)}</p>"
        if draw and len(keyed) > MAX_PANELS
        else ""
    )
    chart = _chart(partial(charts.history_grid, series), "history", draw)
    headers = ["measurement", "value", "runs", "recent values", "change vs previous", "min", "max"]
    intro = (
        "<p>Stored runs, oldest first: ratios of comparisons (band: interval), medians of "
        "latencies; the red dot is the latest run.</p>"
    )
    note = f'<p class="note">{_e(data.history_note)}</p>' if data.history_note else ""
    return _section("history", "History", intro + note + chart + more + table(headers, rows))


def _number(value: object) -> float | None:
    """A finite number from an environment value, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _env_value(key: str, value: object) -> str:
    """An environment value as text; sizes in bytes (``*_bytes``) in human units."""
    if value is None:
        return "-"
    number = _number(value) if key.endswith("bytes") else None
    return str(value) if number is None else format_bytes(number)


def _changes(data: ReportInput) -> str:
    """Change points: the steps in the stored history of this run's measurements."""
    title = "Change points"
    if data.changes is None:
        if not data.changes_note:
            return ""
        return _section("changes", title, f'<p class="note">{_e(data.changes_note)}</p>')
    if not data.changes:
        return _section(
            "changes",
            title,
            "<p>No step in the stored history of this run's measurements on this machine "
            "class.</p>",
        )
    rows: list[list[Cell]] = []
    for c in data.changes:
        step = c.change
        fmt: Callable[[float], str] = format_ratio if c.kind == "compare" else format_seconds
        rows.append(
            [
                f"{c.test}::{c.name}",
                c.machine,
                (str(step.run_id), step.run_id if isinstance(step.run_id, int) else 0),
                (step.commit or "-")[:8],
                c.started[:16].replace("T", " "),
                f"{fmt(step.before)} → {fmt(step.after)}",
                (format_change(step.change), step.change),
            ]
        )
    headers = ["measurement", "machine class", "first run after", "commit", "started (UTC)"]
    intro = (
        "<p>Steps in each measurement's stored history on this machine class (ratios of "
        "comparisons, medians of latencies, oldest run first): a penalized piecewise-constant "
        "fit that ignores single outliers; <code>ortperf changes</code> lists them for every "
        "machine class.</p>"
    )
    return _section("changes", title, intro + table([*headers, "before → after", "change"], rows))


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _environment(data: ReportInput) -> str:
    items = {**{f"git {k}": v for k, v in data.git.items()}, **data.environment}
    if not items:
        return ""
    rows: list[list[Cell]] = [[str(k), _env_value(str(k), v)] for k, v in items.items()]
    return _section("environment", "Environment", table(["key", "value"], rows, cls="env"))


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px;background:#fff}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;border-bottom:1px solid #ddd;padding-top:12px}
h3{font-size:14px;margin:18px 0 6px;font-family:ui-monospace,Menlo,Consolas,monospace}
nav a{margin-right:14px}dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;
margin:8px 0}dt{color:#666}dd{margin:0}
table{border-collapse:collapse;margin:8px 0;font-size:13px;width:100%}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top;
overflow-wrap:break-word}td.nw{white-space:nowrap}
th{background:#f0f3f7;cursor:pointer;user-select:none;white-space:nowrap;position:sticky;top:0;
z-index:1}
details.rows>summary{color:#777;font-size:12px}
th:hover{background:#e1e8f0}td[data-sort]{white-space:nowrap}
tbody tr:nth-child(even){background:#fbfbfd}
td.msg{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
tr.fail{background:#fdecea!important}
.badge{display:inline-block;white-space:nowrap;padding:0 6px;border-radius:8px;font-size:12px;
background:#e5e5e5}
.badge.regressed{background:#c0392b;color:#fff}.badge.inconclusive{background:#e67e22;color:#fff}.badge.unstable{background:#8e44ad;color:#fff}
.badge.improved{background:#27ae60;color:#fff}.badge.new{background:#2c6fbb;color:#fff}
.badge.ok{background:#d5ecd9}.badge.not_comparable{background:#ececec}
.status{font-weight:600}.status.bad{color:#c0392b}.status.warn{color:#b9620e}
.status.good{color:#27ae60}
dl.legend{grid-template-columns:max-content auto;font-size:12px;margin:4px 0 8px;color:#444}
dl.legend dt{color:inherit}
.note{color:#777;font-style:italic}figure{margin:8px 0}img{max-width:100%;height:auto}
.pair{display:grid;grid-template-columns:minmax(280px,1fr) 2fr;gap:12px;align-items:start}
.pair figure{margin:0}details{margin:4px 0 12px}summary{cursor:pointer;color:#2c6fbb}
table.env td:first-child{white-space:nowrap;color:#555;width:180px}
@media print{
body{background:#fff;font-size:11px}main{max-width:none;padding:0}nav{display:none}
*{max-height:none!important;overflow:visible!important}
th{position:static;cursor:auto}thead{display:table-header-group}
tr,figure,img{break-inside:avoid}h2,h3{break-after:avoid}
details::details-content{content-visibility:visible;display:contents}
summary{list-style:none;color:#555}
}
"""

JS = """
window.addEventListener("beforeprint", function () {
  document.querySelectorAll("details:not([open])").forEach(function (d) {
    d.open = true;
  });
});
document.querySelectorAll("table.sortable th").forEach(function (th, i) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0], up = th.dataset.dir !== "asc";
    th.dataset.dir = up ? "asc" : "desc";
    var key = function (row) { var c = row.cells[i]; return c.dataset.sort || c.textContent; };
    Array.from(body.rows).sort(function (a, b) {
      var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
      var d = isNaN(nx) || isNaN(ny) ? x.localeCompare(y) : nx - ny;
      return up ? d : -d;
    }).forEach(function (row) { body.appendChild(row); });
  });
});
"""


def build_html(data: ReportInput, *, charts_enabled: bool | None = None) -> str:
    """The whole page. ``charts_enabled=None`` draws charts when matplotlib is installed."""
    draw = charts.available() if charts_enabled is None else charts_enabled
    rows = summary_rows(data.records, data.judgements)
    notes = list(data.notes)
    if data.verdicts_note:
        notes.insert(0, data.verdicts_note)
    if not draw:
        notes.insert(0, PLOTS_HINT)
    note_html = "".join(f'<p class="note">{_e(n)}</p>' for n in notes)
    sections = [
        ("outcomes", "Outcomes", _section("outcomes", "Outcomes", _outcomes_body(rows))),
        ("budgets", "Latency budgets", _budgets(data)),
        ("comparisons", "Comparisons", _comparisons(data, draw)),
        ("distributions", "Distributions", _distributions(data, draw)),
        ("per-call", "Single calls", _per_call(data, draw)),
        ("throughput", "Throughput", _throughput(data, draw)),
        ("sweeps", "Run APIs", _sweeps(data, draw)),
        ("profiles", "Profiles", _profiles(data, draw)),
        ("history", "History", _history(data, draw)),
        ("changes", "Change points", _changes(data)),
        ("environment", "Environment", _environment(data)),
    ]
    nav = "".join(f'<a href="#{a}">{_e(t)}</a>' for a, t, body in sections if body)
    body = "".join(body for _, _, body in sections if body)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(data.title)}</title><style>{CSS}</style></head><body><main>"
        f"{_header(data, rows)}<nav>{nav}</nav>{note_html}{body}</main>"
        f"<script>{JS}</script></body></html>\n"
    )
