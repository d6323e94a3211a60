"""The sections of the HTML report about measurements: comparisons, latency distributions,
single calls, budgets, throughput, run-API sweeps, profiles, history, change points and the
environment. Each returns its HTML, or ``""`` when it has nothing to show."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from pytest_ortperf.reports import charts
from pytest_ortperf.reports.html_base import (
    Cell,
    ReportInput,
    chart_html,
    esc,
    finite_number,
    section,
    table,
)
from pytest_ortperf.reports.rows import verdict_change, verdicts_by_key
from pytest_ortperf.results import (
    Comparison,
    LatencyResult,
    PerCallResult,
    Record,
    ThroughputResult,
)
from pytest_ortperf.units import (
    format_bytes,
    format_change,
    format_ratio,
    format_ratio_bounds,
    format_seconds,
)

if TYPE_CHECKING:
    from pytest_ortperf.store.history import HistoryPoint

SWEEP_PREFIX = "api:"
"""Records named ``api:<api>`` come from ``ortperf.api_sweep``."""

MAX_BOXES = 30
MAX_RATIOS = 60
MAX_PANELS = 12
MAX_OPS = 15


def measurement_sections(data: ReportInput, draw: bool) -> list[tuple[str, str, str]]:
    """(anchor, title, HTML) of each section after the outcomes, in the page's order."""
    return [
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


def _is_sweep(record: Record) -> bool:
    return isinstance(record, LatencyResult) and record.name.startswith(SWEEP_PREFIX)


def _by_test(records: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for record in records:
        out.setdefault(record.test, []).append(record)
    return out


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
    chart = chart_html(lambda: charts.ratio_plot(shown, threshold=data.threshold), "ratios", draw)
    return section(
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
        chart = chart_html(partial(charts.box_plot, shown), test, draw)
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
            f"<h3>{esc(test)}</h3>{chart}{more}<details open><summary>statistics</summary>"
            f"{table(headers, rows, collapse=False)}</details>"
        )
    if not parts:
        return ""
    intro = (
        "<p>Each sample is one block's median group of calls, in seconds per call; boxes "
        "span the quartiles, "
        "whiskers 1.5 IQR.</p>"
    )
    return section("distributions", "Latency distributions", intro + "".join(parts))


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
            charts_html += chart_html(partial(charts.latency_histogram, hist), hist.label, draw)
        headers = ["arm", "p50", "p90", "p99", "p99.9", "block median", "p50 vs block",
                   "timer cost", "calls", "preempted rounds"]  # fmt: skip
        parts.append(
            f"<h3>{esc(r.test)} :: {esc(r.name)}</h3>{charts_html}"
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
    return section("per-call", "Single-call latency", intro + "".join(parts) + more)


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
    return section("budgets", "Latency budgets", intro + table(headers, rows))


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
    chart = chart_html(partial(charts.throughput_curves, curves, cores=cores), "throughput", draw)
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
    return section(
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
        chart = chart_html(
            partial(charts.box_plot, boxes, width=6.4),
            f"{test} run APIs",
            draw,
        )
        headers = ["api", "median", "IQR", "blocks", "vs fastest"]
        parts.append(f'<h3>{esc(test)}</h3><div class="pair">{table(headers, rows)}{chart}</div>')
    if not parts:
        return ""
    return section("sweeps", "Run-API sweeps", "".join(parts))


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
        chart = chart_html(
            partial(charts.op_bars, top, title=f"{test}::{name}"),
            f"{test}::{name} per op",
            draw,
        )
        headers = ["op type", "kernel us", "nodes per run", "share"]
        parts.append(
            f"<h3>{esc(test)} :: {esc(name)}</h3>{chart}<details open><summary>per op type"
            f"</summary>{table(headers, rows, collapse=False)}</details>"
        )
    if not parts:
        return ""
    return section("profiles", "Profiles by op type", "".join(parts))


def _moved(points: Sequence[HistoryPoint]) -> float:
    """Relative change of the last value from the one before (0 when unknown)."""
    previous, last = points[-2].value, points[-1].value
    return last / previous - 1.0 if previous else 0.0


def _history(data: ReportInput, draw: bool) -> str:
    if data.history_note and not data.history:
        return section("history", "History", f'<p class="note">{esc(data.history_note)}</p>')
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
    chart = chart_html(partial(charts.history_grid, series), "history", draw)
    headers = ["measurement", "value", "runs", "recent values", "change vs previous", "min", "max"]
    intro = (
        "<p>Stored runs, oldest first: ratios of comparisons (band: interval), medians of "
        "latencies; the red dot is the latest run.</p>"
    )
    note = f'<p class="note">{esc(data.history_note)}</p>' if data.history_note else ""
    return section("history", "History", intro + note + chart + more + table(headers, rows))


def _env_value(key: str, value: object) -> str:
    """An environment value as text; sizes in bytes (``*_bytes``) in human units."""
    if value is None:
        return "-"
    number = finite_number(value) if key.endswith("bytes") else None
    return str(value) if number is None else format_bytes(number)


def _changes(data: ReportInput) -> str:
    """Change points: the steps in the stored history of this run's measurements."""
    title = "Change points"
    if data.changes is None:
        if not data.changes_note:
            return ""
        return section("changes", title, f'<p class="note">{esc(data.changes_note)}</p>')
    if not data.changes:
        return section(
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
    return section("changes", title, intro + table([*headers, "before → after", "change"], rows))


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _environment(data: ReportInput) -> str:
    items = {**{f"git {k}": v for k, v in data.git.items()}, **data.environment}
    if not items:
        return ""
    rows: list[list[Cell]] = [[str(k), _env_value(str(k), v)] for k, v in items.items()]
    return section("environment", "Environment", table(["key", "value"], rows, cls="env"))
