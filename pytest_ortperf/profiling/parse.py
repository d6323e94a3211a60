"""Parse and aggregate onnxruntime profiling files (Chrome-trace JSON).

``read_profile`` works outside pytest too::

    prof = read_profile("onnxruntime_profile_2024-01-01.json")
    prof.by_op()            # per op type: time per run, share, count per run
    prof.compare(other)     # which nodes / op types appeared or vanished

Every format ORT has written is accepted: ``args`` values as strings (numbers converted),
``_fence_before``/``_fence_after`` events (ignored), ``node_index`` or the older
``graph_index``/``exec_plan_index``, optional ``mem_*`` keys (ORT >= 1.32), events in any
order. Node events are assigned to runs by the time windows of the ``model_run`` events.
Nodes executed inside a control-flow node's subgraph (If, Loop, Scan, ...) lie inside their
parent's time window on the same thread; they are kept with ``depth > 0`` and their time is
subtracted from the parent's ``self_us`` so aggregates never count it twice.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from pytest_ortperf.profiling.compare import ProfileComparison, compare_profiles
from pytest_ortperf.profiling.frames import (
    NODE_COLUMNS,
    Columns,
    Details,
    dict_columns,
    ints,
    kernel_frame,
    node_frame,
    typed_columns,
)
from pytest_ortperf.profiling.trace import (
    Event,
    ProfileSource,
    Scan,
    bad_event,
    events_of,
    gc_paused,
    load_events,
    node_events,
    parse_json,
    read_bytes,
    scan_events,
    scan_typed,
    write_events,
)

# compare_profiles and ProfileComparison live in profiling.compare; this module's path is
# documented for all four
__all__ = ["Profile", "ProfileComparison", "compare_profiles", "read_profile"]


class Profile:
    """Per-node timings of one or more runs of a session.

    ``nodes`` has one row per node execution. ``dur_us`` is the node's own event duration;
    ``self_us`` subtracts the time of subgraph nodes run inside it (If/Loop/Scan), so sums of
    ``self_us`` over all rows equal the kernel time of the top-level (``depth == 0``) nodes.
    Times are microseconds; ``ts_us`` is relative to the start of profiling.

    The file is parsed once. The columns the aggregates need (op type, provider, times,
    nesting) are built with it; the others of ``nodes`` (shapes, sizes, thread and memory
    figures) on its first use, from what that one parse kept (with msgspec; without it, or
    for a file its schema does not fit, from a second parse of the file's bytes).
    """

    def __init__(
        self,
        nodes: pd.DataFrame,
        run_info: pd.DataFrame,
        kernels: pd.DataFrame | None = None,
        *,
        events: list[Event] | None = None,
        source: Path | None = None,
        details: Details | None = None,
    ) -> None:
        self._core = nodes
        self._details = details
        self._runs = run_info
        self.kernels = kernels if kernels is not None else pd.DataFrame()
        self.events = events
        self.source = source

    @property
    def nodes(self) -> pd.DataFrame:
        """One row per node execution, columns :data:`NODE_COLUMNS` and ``mem_*`` keys."""
        if self._details is not None:
            with gc_paused():
                extra = self._details()
            core = self._core
            data = {c: extra[c] if c in extra else core[c] for c in NODE_COLUMNS}
            data.update((k, v) for k, v in extra.items() if k not in data)
            self._core = pd.DataFrame(data, index=core.index)
            self._details = None  # releases the raw args
        return self._core

    def placement(self) -> dict[str, tuple[str, str]]:
        """Where each node ran: ``{node name: (op type, provider)}`` (subgraph nodes too),
        from the columns parsed with the file."""
        frame = self._core[["name", "op_type", "provider"]].drop_duplicates("name")
        return dict(
            zip(
                frame["name"].tolist(),
                zip(frame["op_type"].tolist(), frame["provider"].tolist(), strict=True),
                strict=True,
            )
        )

    @property
    def n_runs(self) -> int:
        return len(self._runs)

    @property
    def has_memory(self) -> bool:
        return any(c.startswith("mem_") for c in self.nodes.columns)

    def __repr__(self) -> str:
        return f"<Profile runs={self.n_runs} node_executions={len(self.nodes)}>"

    def runs(self) -> pd.DataFrame:
        """Per run: ``wall_us`` (model_run), ``kernel_us`` (top-level nodes), ``overhead_us``."""
        out = self._runs[["run", "start_us", "wall_us"]].copy()
        top = self._core[self._core["depth"] == 0]
        kernel = top.groupby("run")["dur_us"].sum()
        count = top.groupby("run")["dur_us"].size()
        out["kernel_us"] = out["run"].map(kernel).fillna(0).astype(np.int64)
        out["overhead_us"] = out["wall_us"] - out["kernel_us"]
        out["n_nodes"] = out["run"].map(count).fillna(0).astype(np.int64)
        return out

    def kernel_us_per_run(self) -> float:
        """Mean kernel time per run (top-level nodes), microseconds."""
        if not self.n_runs:
            return 0.0
        return float(self._core["self_us"].sum()) / self.n_runs

    def _aggregate(self, keys: list[str]) -> pd.DataFrame:
        n = max(self.n_runs, 1)
        frame = self._core if set(keys) <= set(self._core.columns) else self.nodes
        total_all = float(frame["self_us"].sum())
        grouped = frame.groupby(keys, sort=False, dropna=False)
        out = grouped.agg(
            total_us=("self_us", "sum"),
            count=("self_us", "size"),
            first_ts=("ts_us", "min"),
        ).reset_index()
        out["mean_us"] = out["total_us"] / n
        out["share"] = out["total_us"] / total_all if total_all > 0 else 0.0
        out["count_per_run"] = out["count"] / n
        out["mean_per_call_us"] = out["total_us"] / out["count"]
        return out

    def by_node(self) -> pd.DataFrame:
        """Per node: total and mean self time per run, share of kernel time, count per run."""
        keys = ["name", "op_type", "provider", "depth", "inputs", "outputs"]
        out = self._aggregate(keys).sort_values("first_ts", kind="stable")
        return out.drop(columns=["first_ts", "count"]).reset_index(drop=True)

    def by_op(self) -> pd.DataFrame:
        """Per op type and provider, sorted by total time (largest first)."""
        out = self._aggregate(["op_type", "provider"])
        out = out.sort_values("total_us", ascending=False, kind="stable")
        return out.drop(columns=["first_ts"]).reset_index(drop=True)

    def select_runs(self, start: int = 0, stop: int | None = None) -> Profile:
        """A profile holding runs ``start <= run < stop``, renumbered from 0."""
        stop = self.n_runs if stop is None else min(stop, self.n_runs)
        start = max(0, start)
        nodes = self.nodes[(self.nodes["run"] >= start) & (self.nodes["run"] < stop)].copy()
        nodes["run"] -= start
        runs = self._runs[(self._runs["run"] >= start) & (self._runs["run"] < stop)].copy()
        runs["run"] -= start
        kernels = self.kernels
        if len(kernels):
            kernels = kernels[(kernels["run"] >= start) & (kernels["run"] < stop)].copy()
            kernels["run"] -= start
        return Profile(
            nodes.reset_index(drop=True),
            runs.reset_index(drop=True),
            kernels.reset_index(drop=True),
            events=self.events,
            source=self.source,
        )

    def drop_warmup(self, warmup: int) -> Profile:
        """The profile without its first ``warmup`` runs."""
        return self.select_runs(warmup)

    def compare(self, other: Profile) -> ProfileComparison:
        """This profile as base against ``other`` as optimized, see :func:`compare_profiles`."""
        return compare_profiles(self, other)

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """Write the ORT events of the runs held here as a Chrome trace / Perfetto JSON file."""
        events = self.events
        if events is None:
            if self.source is None:
                raise ValueError("this profile keeps no events; read it with keep_events=True")
            events, _ = load_events(self.source)
        start = self._runs["start_us"].to_numpy(dtype=np.int64)
        end = start + self._runs["wall_us"].to_numpy(dtype=np.int64)
        order = np.argsort(start)
        start, end = start[order], end[order]
        ts = np.asarray([e.get("ts", -1) for e in events], dtype=np.float64)
        pos = np.searchsorted(start, ts, side="right") - 1
        keep = (pos >= 0) & (ts <= end[np.maximum(pos, 0)])
        selected = [e for e, k in zip(events, keep.tolist(), strict=True) if k]
        out = Path(os.fspath(path))
        write_events(out, selected)
        return out

    def memory(self) -> dict[str, int]:
        """ORT allocator figures from ``mem_*`` keys (ORT >= 1.32); empty when absent."""
        figures: dict[str, int] = {}
        for col in ("mem_in_use_peak", "mem_arena_held", "mem_bytes_in_use"):
            if col in self.nodes.columns and self.nodes[col].notna().any():
                figures[col.removeprefix("mem_") + "_max"] = int(self.nodes[col].max())
        return figures


def read_profile(source: ProfileSource, *, keep_events: bool | None = None) -> Profile:
    """Parse an ORT profiling JSON file (path) or its already loaded list of events.

    ``keep_events`` keeps the raw events on the profile (for :meth:`Profile.to_chrome_trace`);
    by default they are kept for a list and re-read from the file on demand for a path.
    """
    with gc_paused():
        return _read_profile(source, keep_events)


def _read_profile(source: ProfileSource, keep_events: bool | None) -> Profile:
    scan: Scan | None = None
    events: list[Event] | None = None
    path: Path | None = None
    raw: bytes | None = None
    if isinstance(source, str | os.PathLike):
        path = Path(os.fspath(source))
        raw = read_bytes(path)
        keep_events = bool(keep_events)
        if not keep_events:  # decode only what the core columns need, where msgspec can
            scan = scan_typed(raw)
        if scan is None:
            events = events_of(parse_json(raw, path), str(path))
    else:
        events = events_of(source, "<events>")
        keep_events = keep_events is None or keep_events
    label = str(path) if path is not None else "<events>"
    try:
        if scan is None:
            assert events is not None
            scan = scan_events(events)
        run_start = ints([r[0] for r in scan.runs])
        run_dur = ints([r[1] for r in scan.runs])
        ts = ints(scan.ts)
        dur = ints(scan.dur)
        tid = ints(scan.tid)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise bad_event(events or [], label, ("cat", "name", "ts", "dur")) from None

    order = np.argsort(run_start, kind="stable")
    run_start, run_dur = run_start[order], run_dur[order]
    run_info = pd.DataFrame(
        {"run": np.arange(len(run_start)), "start_us": run_start, "wall_us": run_dur}
    )

    def assign(times: np.ndarray) -> np.ndarray:
        if not len(run_start):
            return np.zeros(len(times), dtype=np.int64)
        pos = np.searchsorted(run_start, times, side="right") - 1
        inside = (pos >= 0) & (times <= (run_start + run_dur)[np.maximum(pos, 0)])
        return np.where(inside, pos, -1)

    # The detail columns are built on demand. Decoded with the schema, from the args structs
    # of that one pass (untracked by the GC, so keeping them costs no GC pass after). Parsed
    # generically, from the events of a list (or events kept anyway); a file's dicts are
    # not kept alive (a million of them would slow every GC pass after) but its bytes
    # are, and parsed again (the file may be gone by then: profile_session removes it).
    typed = events is None
    listed = scan.node_ev if raw is None or keep_events else None
    kept = None if typed else raw

    def columns() -> Columns:
        if typed:
            return typed_columns(scan.node_ev)
        if listed is not None:
            return dict_columns(listed)
        assert kept is not None
        with gc_paused():
            return dict_columns(node_events(kept, label))

    nodes, details = node_frame(scan.keys, ts, dur, tid, assign(ts), columns)
    if not len(run_start) and len(nodes):
        # No model_run events (a truncated trace): all nodes form one run without wall time.
        first, last = int(ts.min()), int((ts + dur).max())
        run_info = pd.DataFrame({"run": [0], "start_us": [first], "wall_us": [last - first]})
    try:
        kernels = kernel_frame(scan, assign) if scan.kernel_keys else pd.DataFrame()
    except (TypeError, ValueError):
        raise bad_event(events or [], label, ("name", "ts", "dur")) from None
    return Profile(
        nodes,
        run_info,
        kernels,
        events=events if keep_events else None,
        source=path,
        details=details,
    )
