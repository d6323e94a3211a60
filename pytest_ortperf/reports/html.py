"""The HTML report: one self-contained file (inline CSS and JS, charts as base64 PNG).

:func:`build_html` turns a :class:`ReportInput` into the page's text; it does no I/O beyond
drawing charts in memory. Without matplotlib the page holds the tables and a line saying how
to get the charts. Sections: outcomes (failures first), comparisons against their baselines,
latency distributions, run-API sweeps, per-op profiles, history from the store, environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from pytest_ortperf.gating.suite import judged_verdicts, suite_rate
from pytest_ortperf.reports import charts
from pytest_ortperf.reports.html_base import (
    ReportInput,
    badge,
    collapsible,
    esc,
    esc_breakable,
    finite_number,
    section,
)
from pytest_ortperf.reports.html_sections import measurement_sections
from pytest_ortperf.reports.rows import SummaryRow, outcome_counts, summary_rows
from pytest_ortperf.results import Outcome
from pytest_ortperf.units import format_bytes

__all__ = ["OUTCOME_LEGEND", "PLOTS_HINT", "ReportInput", "build_html", "headline"]

PLOTS_HINT = "Charts need matplotlib: pip install pytest-ortperf[plots]"


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


def _legend(outcomes: Sequence[Outcome]) -> str:
    """The outcomes shown, each with what it means (``recorded``: measured, not gated)."""
    items = "".join(
        f"<dt>{badge(o)}</dt><dd>{esc(OUTCOME_LEGEND.get(o, ''))}</dd>" for o in outcomes
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
            f"{badge(row.outcome)}</td><td>{esc_breakable(row.test)}</td><td>{esc_breakable(row.name)}</td>"
            f'<td class="nw">{esc(row.metric)}</td><td>{esc(row.value)}</td>'
            f"<td>{esc(row.change)}</td>"
            f'<td class="msg">{esc(row.message)}</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("outcome", "test", "measurement", "metric", "value", "change [CI]", "detail")
    )
    return collapsible(
        f'<table class="sortable outcomes"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody></table>",
        len(lines),
    )


def _outcomes_body(rows: Sequence[SummaryRow]) -> str:
    legend = _legend(list(outcome_counts(rows)))
    return (legend and f"<details open><summary>legend</summary>{legend}</details>") + (
        _outcome_table(rows)
    )


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
    memory = finite_number(env.get("memory_bytes"))
    if memory is not None:
        facts.append(("memory", format_bytes(memory)))
    counts = outcome_counts(rows)
    text, tone = headline(counts)
    status = f'<p class="status {tone}">{esc(text)}</p>'
    chips = " ".join(
        f'<span title="{esc(OUTCOME_LEGEND.get(o, ""))}">{badge(o)}&nbsp;{n}</span>'
        for o, n in counts.items()
    )
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    rate = suite_rate(judged_verdicts(data.judgements), data.family)
    suite = "" if rate is None else f'<p class="suite">{esc(rate.text())}</p>'
    return f"<header><h1>{esc(data.title)}</h1><dl>{dl}</dl>{status}<p>{chips}</p>{suite}</header>"


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
    note_html = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    sections = [
        ("outcomes", "Outcomes", section("outcomes", "Outcomes", _outcomes_body(rows))),
        *measurement_sections(data, draw),
    ]
    nav = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t, body in sections if body)
    body = "".join(body for _, _, body in sections if body)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(data.title)}</title><style>{CSS}</style></head><body><main>"
        f"{_header(data, rows)}<nav>{nav}</nav>{note_html}{body}</main>"
        f"<script>{JS}</script></body></html>\n"
    )
