"""How the ``ortperf`` commands print stored rows: aligned tables, times, commits and the
figure a change is computed on."""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pytest_ortperf.reports.terminal import WIDTH, format_table
from pytest_ortperf.results import figure_of
from pytest_ortperf.units import format_ratio_interval

MIN_WIDTH = 60
"""The narrowest table :func:`terminal_width` allows."""


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = WIDTH) -> str:
    """Rows aligned under their headers, cut to ``width`` columns (default 100), control
    characters escaped (``reports.terminal.format_table``)."""
    return "\n".join(format_table(headers, rows, width=width))


def terminal_width() -> int:
    """The terminal's width ($COLUMNS first); 100 when stdout is no terminal (a pipe, a file)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def text(value: Any) -> str:
    """A stored value as a cell; ``-`` when missing."""
    return "-" if missing(value) else str(value)


def when(ts: Any) -> str:
    """A stored timestamp in local time, to the minute."""
    return datetime.fromtimestamp(ts.timestamp()).strftime("%Y-%m-%d %H:%M")


def commit(row: Any) -> str:
    """A run's commit, 8 digits, ``*`` when it had uncommitted changes."""
    sha = row.get("commit")
    if not isinstance(sha, str) or not sha:
        return "-"
    return sha[:8] + ("*" if row.get("dirty") is True else "")


def ratio(row: Any) -> str:
    """A stored comparison's ratio with its interval; ``-`` when none."""
    if missing(row.get("ratio")):
        return "-"
    return format_ratio_interval(row["ratio"], row["low"], row["high"])


def metric(row: Any) -> float:
    """The figure a change is computed on: the ratio of a comparison, else the median
    (NaN when missing, e.g. for memory records)."""
    value = figure_of(row)
    return math.nan if value is None else value
