"""The HTML report's input (:class:`ReportInput`) and the pieces its sections are made of:
escaped text, sortable tables, sections, badges and charts as inline PNG."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_ortperf.results import Judgement, Record
from pytest_ortperf.text import escape_control

if TYPE_CHECKING:
    from pytest_ortperf.gating.history_changes import MeasurementChange
    from pytest_ortperf.gating.suite import Family
    from pytest_ortperf.store.history import HistoryKey, HistoryPoint

COLLAPSE_ROWS = 16
"""Tables longer than this sit in an open ``<details>`` that a click collapses."""


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
    family: Family | None = None
    """``--ortperf-family-alpha`` over the run's planned verdicts (None: off)."""


def esc(value: object) -> str:
    # Control characters (NUL is an HTML parse error, ESC shows as garbage) as escapes.
    return html.escape(escape_control(str(value)), quote=True)


def esc_breakable(value: object) -> str:
    """Escaped text that may break after ``/``, ``::`` and ``_`` (long test ids)."""
    text = esc(value)
    for mark in ("/", "::", "_"):
        text = text.replace(mark, mark + "<wbr>")
    return text


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}">'


Cell = str | tuple[str, object]
"""A cell's text, or (text, sort key) for a cell that sorts by a number."""


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Cell]], *, cls: str = "", collapse: bool = True
) -> str:
    """A sortable table (click a header); cells are escaped text. A long one can be
    collapsed (``collapse``), never cut to a fixed height: every row prints."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple):
                text, key = cell
                cells.append(f'<td data-sort="{esc(key)}">{esc(text)}</td>')
            else:
                cells.append(f"<td>{esc_breakable(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    classes = f"sortable {cls}".strip()
    html_table = (
        f'<table class="{classes}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
    return collapsible(html_table, len(rows)) if collapse else html_table


def collapsible(table_html: str, n_rows: int) -> str:
    """A long table in full, in an open ``<details>`` that a click collapses; the page is
    as long as its tables (no scroll box: a printout or a screenshot shows every row)."""
    if n_rows <= COLLAPSE_ROWS:
        return table_html
    return f'<details open class="rows"><summary>{n_rows} rows</summary>{table_html}</details>'


def badge(outcome: str) -> str:
    return f'<span class="badge {esc(outcome)}">{esc(outcome)}</span>'


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>'


Chart = Callable[[], bytes]


def chart_html(draw: Chart, alt: str, enabled: bool) -> str:
    """A chart as an <img>, or nothing when charts are off; a failed chart is a note."""
    if not enabled:
        return ""
    try:
        return f"<figure>{_img(draw(), alt)}</figure>"
    except Exception as exc:  # a chart must never cost the report its tables
        why = f"{esc(type(exc).__name__)}: {esc(exc)}"
        return f'<p class="note">chart {esc(alt)} not drawn: {why}</p>'


def finite_number(value: object) -> float | None:
    """A finite number from an environment value, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
