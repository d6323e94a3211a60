"""Matplotlib figures of profiles (optional: ``pip install pytest-ortperf[plots]``).

Figures are drawn with the non-interactive Agg backend and returned; nothing is shown.
Save one with ``fig.savefig("profile.png")``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from pytest_ortperf.profiling.compare import ProfileComparison
    from pytest_ortperf.profiling.parse import Profile

__all__ = ["plot_by_op", "plot_compare", "plot_timeline"]


def require_matplotlib() -> None:
    """Raise an ImportError that names the extra to install when matplotlib is missing."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install pytest-ortperf[plots]") from exc


def figure(
    width: float, height: float, *, nrows: int = 1, ncols: int = 1, sharey: bool = False
) -> tuple[Figure, Any]:
    """A figure of ``width`` x ``height`` inches and its axes as a flat array (one per
    panel, row by row), drawn on the Agg canvas: the one way every plot of this package,
    public or in the HTML report, makes a figure."""
    from matplotlib.figure import Figure

    # A Figure made directly (not through pyplot) uses the Agg canvas and no GUI backend.
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(nrows, ncols, sharey=sharey, squeeze=False).ravel()
    return fig, axes


def plot_by_op(profile: Profile, *, title: str | None = None) -> Figure:
    """Horizontal bars per op type: self time per run (left) and count per run (right)."""
    require_matplotlib()
    ops = profile.by_op().groupby("op_type")[["mean_us", "count_per_run"]].sum()
    ops = ops.sort_values("mean_us")
    fig, (ax0, ax1) = figure(10, max(2.5, 0.35 * len(ops) + 1.2), ncols=2, sharey=True)
    labels = [str(i) for i in ops.index]
    ax0.barh(labels, ops["mean_us"])
    ax0.set_xlabel("time per run (us)")
    ax0.set_title(title or "duration per op type")
    ax1.barh(labels, ops["count_per_run"], color="tab:orange")
    ax1.set_xlabel("nodes per run")
    ax1.set_title("occurrences")
    fig.tight_layout()
    return fig


def plot_compare(
    comparison: ProfileComparison,
    *,
    min_share: float = 0.0,
    labels: tuple[str, str] = ("base", "optimized"),
) -> Figure:
    """Base vs optimized per op type, side by side: time per run and count per run.

    ``min_share`` hides op types whose combined time is under that share of the total.
    """
    require_matplotlib()
    ops = comparison.by_op.set_index("op_type")
    weight = ops["base_us"] + ops["optimized_us"]
    total = float(weight.sum())
    if total > 0 and min_share > 0:
        ops = ops[weight / total >= min_share]
    ops = ops.iloc[::-1]  # largest at the top
    fig, (ax0, ax1) = figure(12, max(2.5, 0.45 * len(ops) + 1.2), ncols=2, sharey=True)
    pos = list(range(len(ops)))
    h = 0.4
    names = [str(i) for i in ops.index]
    ax0.barh([p + h / 2 for p in pos], ops["base_us"], height=h, label=labels[0])
    ax0.barh([p - h / 2 for p in pos], ops["optimized_us"], height=h, label=labels[1])
    ax0.set_yticks(pos, names)
    ax0.set_xlabel("time per run (us)")
    ax0.set_title("side by side duration")
    ax0.legend()
    ax1.barh([p + h / 2 for p in pos], ops["base_count"], height=h, label=labels[0])
    ax1.barh([p - h / 2 for p in pos], ops["optimized_count"], height=h, label=labels[1])
    ax1.set_xlabel("nodes per run")
    ax1.set_title("side by side count")
    fig.tight_layout()
    return fig


def plot_timeline(profile: Profile, run: int = 0, *, max_nodes: int = 200) -> Figure:
    """Gantt chart of one run: one bar per node execution, subgraph nodes indented."""
    require_matplotlib()
    if not 0 <= run < max(profile.n_runs, 1):
        raise ValueError(f"run {run} out of range: the profile holds {profile.n_runs} runs")
    nodes = profile.nodes[profile.nodes["run"] == run].sort_values("ts_us").head(max_nodes)
    fig, (ax,) = figure(12, max(2.5, 0.22 * len(nodes) + 1.2))
    if len(nodes):
        start = float(nodes["ts_us"].min())
        ops = sorted(set(nodes["op_type"]))
        cmap = {op: f"C{i % 10}" for i, op in enumerate(ops)}
        y = list(range(len(nodes)))[::-1]
        ax.barh(
            y,
            nodes["dur_us"].clip(lower=0.5),
            left=nodes["ts_us"] - start,
            color=[cmap[o] for o in nodes["op_type"]],
        )
        ax.set_yticks(
            y,
            [
                "· " * int(d) + f"{n} ({o})"
                for n, o, d in zip(nodes["name"], nodes["op_type"], nodes["depth"], strict=True)
            ],
        )
        ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("time since run start (us)")
    ax.set_title(f"run {run} timeline")
    fig.tight_layout()
    return fig
