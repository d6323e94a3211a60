"""PNG charts of the HTML report (optional: ``pip install pytest-ortperf[plots]``).

Each function takes plain data and returns PNG bytes drawn with matplotlib's Agg canvas (no
GUI backend, nothing shown). :func:`available` says whether matplotlib can be imported.
"""

from __future__ import annotations

import importlib.util
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_ortperf.profiling.plots import figure
from pytest_ortperf.units import time_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
WIDTH_IN = 10.0
"""Figures are 1000 px wide: they fit a laptop screen at 100% zoom."""


def available() -> bool:
    """Whether matplotlib is installed."""
    return importlib.util.find_spec("matplotlib") is not None


def _figure(height: float, width: float = WIDTH_IN) -> tuple[Figure, Any]:
    fig, (ax,) = figure(width, max(1.6, height))
    return fig, ax


def _png(fig: Figure) -> bytes:
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _short(label: str, width: int = 48) -> str:
    return label if len(label) <= width else "…" + label[-(width - 1) :]


def _horizontal() -> dict[str, Any]:
    """Horizontal boxes: ``orientation`` from matplotlib 3.10 on (``vert`` is deprecated)."""
    import matplotlib

    major, minor = (int(x) for x in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


BASELINE_GROUP = 3
"""Colour group of the samples stored in a baseline, drawn beside this run's."""


@dataclass(frozen=True)
class Box:
    """One box of a box plot: raw samples in seconds and a colour group (0 a latency, 1
    and 2 a comparison's reference and candidate, :data:`BASELINE_GROUP` a baseline's)."""

    label: str
    samples: tuple[float, ...]
    group: int = 0


def box_plot(boxes: Sequence[Box], *, title: str = "", width: float = WIDTH_IN) -> bytes:
    """Horizontal box plots of latency samples (the first box at the top), whiskers at 1.5
    IQR, outliers as dots; a log axis when the medians span more than a factor of 20."""
    from matplotlib.patches import Patch

    unit, scale = time_unit([s for box in boxes for s in box.samples])
    fig, ax = _figure(0.3 * len(boxes) + 0.9, width)
    data = [[s / scale for s in box.samples] for box in reversed(boxes)]
    parts = ax.boxplot(
        data,
        **_horizontal(),
        widths=0.6,
        patch_artist=True,
        flierprops={"marker": ".", "markersize": 3, "alpha": 0.5},
        medianprops={"color": "black"},
    )
    colours = ("#8fb8de", "#f2b880", "#b5d99c", "#d0d0d0")
    for patch, box in zip(parts["boxes"], reversed(boxes), strict=True):
        patch.set_facecolor(colours[box.group % len(colours)])
    ax.set_yticks(range(1, len(boxes) + 1), [_short(b.label) for b in reversed(boxes)])
    ax.tick_params(axis="y", labelsize=8)
    medians = [sorted(d)[len(d) // 2] for d in data if d]
    if medians and min(medians) > 0 and max(medians) / min(medians) > 20:
        ax.set_xscale("log")
    ax.set_xlabel(f"time per call ({unit})")
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    groups = {b.group for b in boxes}
    handles = [
        Patch(facecolor=colours[group], label=label)
        for group, label in ((1, "reference"), (2, "candidate"), (BASELINE_GROUP, "baseline"))
        if group in groups and (group == BASELINE_GROUP or groups >= {1, 2})
    ]
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="lower right")
    return _png(fig)


@dataclass(frozen=True)
class RatioBar:
    """A ratio with its interval and, when gated, the baseline's ratio."""

    label: str
    ratio: float
    low: float
    high: float
    baseline: float | None = None
    failed: bool = False


def ratio_plot(rows: Sequence[RatioBar], *, threshold: float | None = None) -> bytes:
    """Ratios candidate/reference as points with interval bars (red when failed), the
    baseline ratio as a cross and 1.0 as a line; below 1 the candidate is faster."""
    fig, ax = _figure(0.22 * len(rows) + 1.0)
    ys = list(range(len(rows)))[::-1]
    for y, row in zip(ys, rows, strict=True):
        colour = "#c0392b" if row.failed else "#2c6fbb"
        ax.errorbar(
            row.ratio,
            y,
            xerr=[[max(row.ratio - row.low, 0.0)], [max(row.high - row.ratio, 0.0)]],
            fmt="o",
            color=colour,
            capsize=3,
            markersize=4,
        )
        if row.baseline is not None:
            ax.plot(row.baseline, y, "x", color="#555555", markersize=6)
            if threshold:
                ax.plot([row.baseline * (1 + threshold)] * 2, [y - 0.3, y + 0.3], color="#aaaaaa")
    ax.axvline(1.0, color="#888888", linestyle="--", linewidth=1)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_yticks(ys, [_short(r.label) for r in rows])
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("ratio candidate / reference (x: baseline; | : baseline + threshold)")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def op_bars(ops: Sequence[tuple[str, float, float]], *, title: str) -> bytes:
    """Horizontal bars of kernel time per op type, largest on top, labelled with its share.

    ``ops``: (op type, total us, share of kernel time 0..1).
    """
    fig, ax = _figure(0.3 * len(ops) + 1.1)
    ordered = list(reversed(ops))
    ax.barh([o[0] for o in ordered], [o[1] for o in ordered], color="#2c6fbb")
    for y, (_, total, share) in enumerate(ordered):
        ax.text(total, y, f" {share:.1%}", va="center", fontsize=8)
    ax.set_xlabel("kernel time (us, all profiled runs)")
    ax.set_title(title, fontsize=10, loc="left")
    ax.tick_params(axis="y", labelsize=8)
    ax.margins(x=0.12)
    return _png(fig)


@dataclass(frozen=True)
class Series:
    """One measurement over runs: x = run ids, y = values (a ratio, or a median in seconds
    when ``seconds``), optional interval."""

    label: str
    runs: tuple[int, ...]
    values: tuple[float, ...]
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None
    seconds: bool = False


def history_grid(series: Sequence[Series], *, columns: int = 4) -> bytes:
    """Small multiples, one panel per measurement: its value over runs, the interval as a
    band (ratios), the latest run marked."""
    from matplotlib.ticker import MaxNLocator

    rows = max(1, math.ceil(len(series) / columns))
    fig, axes = figure(WIDTH_IN, 1.9 * rows + 0.2, nrows=rows, ncols=columns)
    for ax, s in zip(axes, series, strict=False):
        unit, scale = time_unit(s.values) if s.seconds else ("", 1.0)
        ys = [v / scale for v in s.values]
        ax.plot(s.runs, ys, marker="o", markersize=3, color="#2c6fbb")
        ax.plot(s.runs[-1:], ys[-1:], marker="o", markersize=6, color="#c0392b")
        if s.low is not None and s.high is not None:
            ax.fill_between(s.runs, s.low, s.high, color="#2c6fbb", alpha=0.15, linewidth=0)
        ax.set_title(_short(s.label, 34), fontsize=8, loc="left")
        ax.set_ylabel(f"median ({unit})" if s.seconds else "ratio", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    for ax in axes[len(series) :]:
        ax.set_visible(False)
    return _png(fig)


# ---------------------------------------------------------------- per-call tails, throughput


@dataclass(frozen=True)
class Histogram:
    """Single-call times in seconds (timer cost subtracted) and marks to draw on them
    (label -> seconds: the quantiles, the block median)."""

    label: str
    samples: tuple[float, ...]
    marks: tuple[tuple[str, float], ...] = ()


def latency_histogram(hist: Histogram, *, bins: int = 60, width: float = WIDTH_IN) -> bytes:
    """A histogram of single-call times on log-spaced bins and a log x axis (the tail
    stays visible), with a log count axis; the marks as labelled vertical lines."""
    import numpy as np

    values = np.asarray([s for s in hist.samples if s > 0 and math.isfinite(s)])
    if values.size == 0:
        raise ValueError(f"{hist.label}: no positive call time to draw")
    unit, scale = time_unit(values.tolist())
    values = values / scale
    low, high = float(values.min()), float(values.max())
    edges = np.geomspace(low, high * 1.0001 if high > low else low * 1.01, bins + 1)
    fig, ax = _figure(2.6, width)
    ax.hist(values, bins=edges, color="#8fb8de", edgecolor="#2c6fbb", linewidth=0.4, log=True)
    ax.set_xscale("log")
    from matplotlib.ticker import LogFormatter

    # Plain numbers on the log axis (45 and 60, not 4.5 x 10^1), minor ticks labelled too.
    ax.xaxis.set_major_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.xaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.tick_params(axis="x", which="minor", labelsize=7)
    styles = ("--", ":", "-.", (0, (1, 3)), "-")
    for i, (label, seconds) in enumerate(hist.marks):
        if not (math.isfinite(seconds) and seconds > 0):
            continue
        x = seconds / scale
        ax.axvline(
            x,
            color="#333333" if label == "block median" else "#c0392b",
            linestyle=styles[i % len(styles)],
            linewidth=1,
            label=f"{label} {x:.3g} {unit}",
        )
    if hist.marks:
        ax.legend(fontsize=8, loc="upper right")
    ax.set_xlabel(f"time of one call ({unit}, log scale)")
    ax.set_ylabel("calls (log)")
    ax.set_title(_short(hist.label, 90), fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3, which="both")
    return _png(fig)


@dataclass(frozen=True)
class Curve:
    """Calls per second by number of calling threads, and the callers' p99 seconds."""

    label: str
    concurrency: tuple[int, ...]
    calls_per_s: tuple[float, ...]
    p99: tuple[float, ...]


def throughput_curves(curves: Sequence[Curve], *, cores: int | None = None) -> bytes:
    """Two panels over the number of threads: calls per second (dotted: ideal scaling from
    the fewest threads, linear up to ``cores`` and flat past them) and the p99 of a call as
    its caller saw it; a grey line at the number of cores."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = figure(WIDTH_IN, 3.0, nrows=1, ncols=2)
    rate_ax, p99_ax = axes[0], axes[1]
    unit, scale = time_unit([v for c in curves for v in c.p99])
    for i, c in enumerate(curves):
        colour = f"C{i % 10}"
        label = _short(c.label, 40)
        rate_ax.plot(c.concurrency, c.calls_per_s, marker="o", color=colour, label=label)
        if c.concurrency:
            n0, r0 = c.concurrency[0], c.calls_per_s[0]
            limit = cores or max(c.concurrency)
            ideal = [r0 * min(n, limit) / min(n0, limit) for n in c.concurrency]
            rate_ax.plot(c.concurrency, ideal, linestyle=":", color=colour, linewidth=1)
        p99_ax.plot(c.concurrency, [v / scale for v in c.p99], marker="o", color=colour)
    for ax in (rate_ax, p99_ax):
        ax.set_xlabel("calling threads")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if cores:
            ax.axvline(cores, color="#aaaaaa", linewidth=1)
    rate_ax.set_ylabel("calls / s (dotted: ideal)")
    p99_ax.set_ylabel(f"p99 of a call ({unit})")
    rate_ax.legend(fontsize=7, loc="best")
    return _png(fig)
