"""Two profiles side by side: which nodes and op types appeared, vanished or moved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

__all__ = ["ProfileComparison", "compare_profiles"]


class Profiled(Protocol):
    """What a comparison reads of a :class:`~pytest_ortperf.profiling.parse.Profile`."""

    @property
    def nodes(self) -> pd.DataFrame: ...

    @property
    def n_runs(self) -> int: ...

    def by_op(self) -> pd.DataFrame: ...

    def kernel_us_per_run(self) -> float: ...


@dataclass(frozen=True)
class ProfileComparison:
    """Nodes and op types of a base profile against an optimized one.

    ``nodes``: one row per node key (op type, provider, input/output types and shapes,
    occurrence index in the run) with ``tag`` ``=`` (in both), ``-`` (base only),
    ``+`` (optimized only) and mean self time per run on each side.
    ``by_op``: per op type, count and time per run on each side and a ``change`` text
    such as ``Transpose 2 -> 0`` (empty when the count did not change).
    """

    nodes: pd.DataFrame
    by_op: pd.DataFrame
    base_kernel_us: float
    optimized_kernel_us: float

    @property
    def changed_ops(self) -> dict[str, tuple[float, float]]:
        """Op types whose count per run changed: ``{op: (base, optimized)}``."""
        rows = self.by_op[self.by_op["change"] != ""]
        return {
            str(op): (float(b), float(o))
            for op, b, o in zip(
                rows["op_type"], rows["base_count"], rows["optimized_count"], strict=True
            )
        }

    def summary_lines(self, top: int = 5) -> list[str]:
        """Short lines for a failure message or a terminal report."""
        lines = []
        changes = [c for c in self.by_op["change"] if c]
        shown = ", ".join(changes[:10]) + (
            f", ... ({len(changes) - 10} more)" if len(changes) > 10 else ""
        )
        lines.append("op types: " + (shown if changes else "same counts"))
        tags = self.nodes["tag"].value_counts()
        lines.append(
            f"nodes: {int(tags.get('=', 0))} in both (=), {int(tags.get('-', 0))} only in "
            f"base (-), {int(tags.get('+', 0))} only in optimized (+)"
        )
        b, o = self.base_kernel_us, self.optimized_kernel_us
        ratio = f" (x{o / b:.2f})" if b > 0 else ""
        lines.append(f"kernel time per run: base {b:.1f} us, optimized {o:.1f} us{ratio}")
        delta = (self.by_op["optimized_us"] - self.by_op["base_us"]).abs()
        for pos in delta.sort_values(ascending=False).index[:top]:
            row = self.by_op.loc[pos]
            if row["base_us"] == row["optimized_us"]:
                continue
            lines.append(
                f"  {row['op_type']}: {row['base_us']:.1f} -> {row['optimized_us']:.1f} us/run"
                f" ({row['optimized_us'] - row['base_us']:+.1f})"
            )
        return lines


def _keyed(profile: Profiled) -> pd.DataFrame:
    """Per (op type, provider, shapes, occurrence in the run): mean self time per run."""
    nodes = profile.nodes
    keys = ["op_type", "provider", "inputs", "outputs"]
    if nodes.empty:
        return pd.DataFrame(columns=[*keys, "occurrence", "name", "us", "count", "order"])
    ordered = nodes.sort_values(["run", "ts_us"], kind="stable")
    ordered = ordered.assign(
        occurrence=ordered.groupby(["run", *keys], sort=False).cumcount(),
        order=ordered.groupby("run", sort=False).cumcount(),
    )
    n = max(profile.n_runs, 1)
    out = (
        ordered.groupby([*keys, "occurrence"], sort=False, dropna=False)
        .agg(
            name=("name", "first"),
            us=("self_us", "sum"),
            count=("self_us", "size"),
            order=("order", "median"),
        )
        .reset_index()
    )
    out["us"] = out["us"] / n
    return out


def compare_profiles(base: Profiled, optimized: Profiled) -> ProfileComparison:
    """Match the nodes of two profiles and summarize what changed per op type.

    Nodes are matched on op type, provider, input/output types and shapes (any dtype) and
    their occurrence index among such nodes within a run; node names are not used since
    optimizers rename them. Times are mean self time per run in microseconds.
    """
    keys = ["op_type", "provider", "inputs", "outputs", "occurrence"]
    b, o = _keyed(base), _keyed(optimized)
    merged = b.merge(o, on=keys, how="outer", suffixes=("_base", "_opt"), indicator=True)
    tag = merged["_merge"].map({"both": "=", "left_only": "-", "right_only": "+"})
    nodes = pd.DataFrame(
        {
            "tag": tag.astype(str),
            "op_type": merged["op_type"],
            "provider": merged["provider"],
            "inputs": merged["inputs"],
            "outputs": merged["outputs"],
            "occurrence": merged["occurrence"].astype(np.int64),
            "base_name": merged["name_base"].fillna(""),
            "optimized_name": merged["name_opt"].fillna(""),
            "base_us": merged["us_base"].astype(float),
            "optimized_us": merged["us_opt"].astype(float),
            "_order": _display_order(merged["order_base"], merged["order_opt"]),
            "_rank": tag.map({"-": 0, "=": 1, "+": 2}).astype(int),
            "_opt": merged["order_opt"].astype(float),
        }
    )
    nodes = nodes.sort_values(["_order", "_rank", "_opt"], kind="stable")
    nodes = nodes.drop(columns=["_order", "_rank", "_opt"])
    nodes = nodes.reset_index(drop=True)

    def per_op(p: Profiled) -> pd.DataFrame:
        agg = p.by_op().groupby("op_type", sort=False)[["count_per_run", "mean_us"]].sum()
        return agg.rename(columns={"count_per_run": "count", "mean_us": "us"})

    ops = per_op(base).merge(
        per_op(optimized), how="outer", left_index=True, right_index=True, suffixes=("_b", "_o")
    )
    ops = ops.fillna(0.0).reset_index()
    by_op = pd.DataFrame(
        {
            "op_type": ops["op_type"],
            "base_count": ops["count_b"],
            "optimized_count": ops["count_o"],
            "base_us": ops["us_b"],
            "optimized_us": ops["us_o"],
        }
    )
    by_op["change"] = [
        f"{op} {_count(cb)} -> {_count(co)}" if not np.isclose(cb, co) else ""
        for op, cb, co in zip(
            by_op["op_type"], by_op["base_count"], by_op["optimized_count"], strict=True
        )
    ]
    by_op["_total"] = by_op["base_us"] + by_op["optimized_us"]
    by_op = by_op.sort_values("_total", ascending=False, kind="stable").drop(columns="_total")
    return ProfileComparison(
        nodes=nodes,
        by_op=by_op.reset_index(drop=True),
        base_kernel_us=base.kernel_us_per_run(),
        optimized_kernel_us=optimized.kernel_us_per_run(),
    )


def _display_order(base: pd.Series, optimized: pd.Series) -> pd.Series:
    """Base execution order; a node only in the optimized run goes just before the next
    node (in optimized order) that both runs share."""
    base = base.astype(float)
    in_opt = optimized.notna()
    by_opt = base[in_opt].reindex(optimized[in_opt].sort_values(kind="stable").index)
    next_shared = by_opt.bfill() - 0.5
    fallback = (base.max() if base.notna().any() else 0.0) + 1.0
    return base.fillna(next_shared.reindex(base.index)).fillna(fallback)


def _count(value: float) -> str:
    return str(round(value)) if np.isclose(value, round(value)) else f"{value:.2f}"
