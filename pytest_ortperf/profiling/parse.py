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

import contextlib
import gc
import itertools
import json
import operator
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_orjson: Any
try:  # optional, the ``fast`` extra
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    _orjson = None

__all__ = ["Profile", "ProfileComparison", "compare_profiles", "read_profile"]

Event = dict[str, Any]
ProfileSource = str | os.PathLike[str] | Sequence[Mapping[str, Any]]

# Ops that run subgraphs: nodes of those subgraphs are profiled inside the parent's window.
CONTROL_FLOW_OPS = frozenset(
    {"If", "Loop", "Scan", "BeamSearch", "GreedySearch", "Sampling", "WhisperBeamSearch"}
)

_DTYPES = {
    "float": "f32",
    "double": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float8e4m3fn": "f8e4m3fn",
    "float8e4m3fnuz": "f8e4m3fnuz",
    "float8e5m2": "f8e5m2",
    "float8e5m2fnuz": "f8e5m2fnuz",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint64": "u64",
    "uint32": "u32",
    "uint16": "u16",
    "uint8": "u8",
    "int4": "i4",
    "uint4": "u4",
    "bool": "bool",
    "string": "str",
    "complex64": "c64",
    "complex128": "c128",
}

# Node args that hold numbers (written as strings by ORT).
_NUMERIC_ARGS = ("activation_size", "parameter_size", "output_size")
_INDEX_ARGS = ("node_index", "graph_index", "exec_plan_index")

NODE_COLUMNS = (
    "run",
    "name",
    "op_type",
    "provider",
    "node_index",
    "dur_us",
    "self_us",
    "ts_us",
    "depth",
    "parent",
    "inputs",
    "outputs",
    "activation_size",
    "parameter_size",
    "output_size",
    "sub_threads",
    "sub_thread_runs",
    "tid",
)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: building ~10^6 small dicts otherwise triggers it over and over
    (it tripled the time to load a 400-run profile)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _loads(data: bytes) -> Any:
    if _orjson is not None:
        return _orjson.loads(data)
    return json.loads(data)


def _load_events(source: ProfileSource) -> tuple[list[Event], Path | None]:
    if isinstance(source, str | os.PathLike):
        path = Path(os.fspath(source))
        if not path.is_file():
            raise FileNotFoundError(f"onnxruntime profile not found: {path}")
        try:
            data = _loads(path.read_bytes())
        except ValueError as exc:  # json and orjson decode errors both derive from it
            raise ValueError(f"{path}: not a valid JSON profile: {exc}") from exc
        label = str(path)
    else:
        data, path, label = source, None, "<events>"
    if isinstance(data, Mapping) and "traceEvents" in data:  # Chrome's object format
        data = data["traceEvents"]
    if not isinstance(data, list | tuple):
        raise ValueError(
            f"{label}: expected a JSON list of profiling events, got {type(data).__name__}"
        )
    events = data if isinstance(data, list) else list(data)
    return events, path


def _bad_event(events: Sequence[Any], label: str, keys: Iterable[str]) -> ValueError:
    needed = tuple(keys)
    for i, event in enumerate(events):
        if not isinstance(event, Mapping):
            return ValueError(f"{label}: event {i} is not an object: {event!r:.200}")
        missing = [k for k in needed if k not in event]
        if missing:
            return ValueError(f"{label}: event {i} lacks {', '.join(missing)}: {event!r:.200}")
    return ValueError(f"{label}: malformed profiling events")


def format_type_shapes(value: Any) -> str:
    """``[{"float": [1, 3]}, {"int64": [4]}]`` -> ``"f32[1x3],i64[4]"``."""
    if not value:
        return ""
    if isinstance(value, str):
        if not value.startswith("["):
            return value
        value = json.loads(value)
    parts = []
    for item in value:
        for dtype, dims in item.items():
            short = _DTYPES.get(dtype, dtype)
            if isinstance(dims, list):
                parts.append(f"{short}[{'x'.join(map(str, dims))}]")
            else:
                parts.append(f"{short}[{dims}]")
    return ",".join(parts)


def _thread_stats(value: Any) -> tuple[int, int]:
    """(sub-threads that ran a share of the node, total runs on sub-threads)."""
    if not value:
        return 0, 0
    if isinstance(value, str):
        if not value.startswith("{"):
            return 0, 0
        value = json.loads(value)
    subs = value.get("sub_threads") or {}
    n = runs = 0
    for stats in subs.values():
        count = int(stats.get("num_run", 0)) if isinstance(stats, Mapping) else 0
        if count:
            n += 1
            runs += count
    return n, runs


def _numeric(values: list[Any]) -> pd.Series | np.ndarray:
    """Numbers from ORT's string-typed args; NaN where missing or not a number."""
    try:  # fast path: every value an integer written as a string (the usual case)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            parsed = np.fromstring(" ".join(values), dtype=np.int64, sep=" ")
        if len(parsed) == len(values):
            return parsed
    except (TypeError, ValueError, DeprecationWarning):
        pass
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")


def _format_column(values: list[Any]) -> list[str]:
    """``format_type_shapes`` of each value, cached: most nodes repeat across runs."""
    if _orjson is None:
        return [format_type_shapes(v) for v in values]
    dumps = _orjson.dumps
    cache: dict[bytes, str] = {}
    out = []
    for value in values:
        key = dumps(value)
        text = cache.get(key)
        if text is None:
            text = cache[key] = format_type_shapes(value)
        out.append(text)
    return out


def _ints(values: list[Any]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _columns(
    args: list[Mapping[str, Any]], keys: Iterable[str], present: set[str]
) -> dict[str, list[Any]]:
    """Columns of the given arg keys (None where an event lacks one); ``present``: all keys."""
    wanted = [k for k in keys if k in present]
    columns: dict[str, list[Any]] = {k: [None] * len(args) for k in keys if k not in present}
    if len(wanted) >= 2:
        try:  # one C-level call per event when every event has every key (the usual case)
            rows = list(map(operator.itemgetter(*wanted), args))
            columns.update(zip(wanted, map(list, zip(*rows, strict=True)), strict=True))
            return columns
        except KeyError:
            pass
    for key in wanted:
        columns[key] = [a.get(key) for a in args]
    return columns


def _strings(values: list[Any]) -> list[Any]:
    return [v or "" for v in values] if None in values else values


def _empty_nodes() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in NODE_COLUMNS})


def _nest(
    ts: np.ndarray, dur: np.ndarray, tid: np.ndarray, is_parent: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Depth, innermost parent position (-1) and self time of nodes sorted by (ts, -dur)."""
    n = len(ts)
    depth = np.zeros(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    end = ts + dur
    # Outer parents come first in (ts, -dur) order, so inner ones overwrite ``parent``.
    for i in np.flatnonzero(is_parent):
        hi = int(np.searchsorted(ts, end[i], side="left"))  # children start before its end
        if hi <= i + 1:
            continue
        sl = slice(i + 1, hi)
        inside = (end[sl] <= end[i]) & (tid[sl] == tid[i])
        idx = np.flatnonzero(inside) + i + 1
        depth[idx] += 1
        parent[idx] = i
    has = parent >= 0
    child_time = np.bincount(parent[has], weights=dur[has], minlength=n)
    self_us = dur - child_time.astype(np.int64)
    return depth, parent, self_us


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


class Profile:
    """Per-node timings of one or more runs of a session.

    ``nodes`` has one row per node execution. ``dur_us`` is the node's own event duration;
    ``self_us`` subtracts the time of subgraph nodes run inside it (If/Loop/Scan), so sums of
    ``self_us`` over all rows equal the kernel time of the top-level (``depth == 0``) nodes.
    Times are microseconds; ``ts_us`` is relative to the start of profiling.
    """

    def __init__(
        self,
        nodes: pd.DataFrame,
        run_info: pd.DataFrame,
        kernels: pd.DataFrame | None = None,
        *,
        events: list[Event] | None = None,
        source: Path | None = None,
    ) -> None:
        self.nodes = nodes
        self._runs = run_info
        self.kernels = kernels if kernels is not None else pd.DataFrame()
        self.events = events
        self.source = source

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
        top = self.nodes[self.nodes["depth"] == 0]
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
        return float(self.nodes["self_us"].sum()) / self.n_runs

    def _aggregate(self, keys: list[str]) -> pd.DataFrame:
        n = max(self.n_runs, 1)
        total_all = float(self.nodes["self_us"].sum())
        grouped = self.nodes.groupby(keys, sort=False, dropna=False)
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
            events, _ = _load_events(self.source)
        start = self._runs["start_us"].to_numpy(dtype=np.int64)
        end = start + self._runs["wall_us"].to_numpy(dtype=np.int64)
        order = np.argsort(start)
        start, end = start[order], end[order]
        ts = np.asarray([e.get("ts", -1) for e in events], dtype=np.float64)
        pos = np.searchsorted(start, ts, side="right") - 1
        keep = (pos >= 0) & (ts <= end[np.maximum(pos, 0)])
        selected = [e for e, k in zip(events, keep.tolist(), strict=True) if k]
        out = Path(os.fspath(path))
        if _orjson is not None:
            out.write_bytes(_orjson.dumps(selected))
        else:
            out.write_text(json.dumps(selected), encoding="utf-8")
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
    with _gc_paused():
        return _read_profile(source, keep_events)


def _read_profile(source: ProfileSource, keep_events: bool | None) -> Profile:
    events, path = _load_events(source)
    label = str(path) if path is not None else "<events>"
    if keep_events is None:
        keep_events = path is None
    try:
        cats = [e["cat"] for e in events]
    except (KeyError, TypeError):
        raise _bad_event(events, label, ("cat",)) from None
    try:
        sessions = [
            e
            for e, c in zip(events, cats, strict=True)
            if c == "Session" and e["name"] == "model_run"
        ]
        node_ev = [
            e
            for e, c in zip(events, cats, strict=True)
            if c == "Node" and not e["name"].endswith(("_fence_before", "_fence_after"))
        ]
        kernel_ev = [e for e, c in zip(events, cats, strict=True) if c == "Kernel"]
        run_start = _ints([e["ts"] for e in sessions])
        run_dur = _ints([e["dur"] for e in sessions])
        ts = _ints([e["ts"] for e in node_ev])
        dur = _ints([e["dur"] for e in node_ev])
    except (KeyError, TypeError, ValueError):
        raise _bad_event(events, label, ("cat", "name", "ts", "dur")) from None

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

    nodes = _node_frame(node_ev, ts, dur, assign(ts))
    if not len(run_start) and len(nodes):
        # No model_run events (a truncated trace): all nodes form one run without wall time.
        first, last = int(ts.min()), int((ts + dur).max())
        run_info = pd.DataFrame({"run": [0], "start_us": [first], "wall_us": [last - first]})
    kernels = _kernel_frame(kernel_ev, assign) if kernel_ev else pd.DataFrame()
    return Profile(nodes, run_info, kernels, events=events if keep_events else None, source=path)


def _node_frame(
    node_ev: list[Event], ts: np.ndarray, dur: np.ndarray, run: np.ndarray
) -> pd.DataFrame:
    keep = run >= 0  # node events outside every model_run window (none in practice)
    if not keep.all():
        idx = np.flatnonzero(keep)
        node_ev = [node_ev[i] for i in idx]
        ts, dur, run = ts[idx], dur[idx], run[idx]
    if not node_ev:
        return _empty_nodes()
    order = np.lexsort((-dur, ts))
    node_ev = [node_ev[i] for i in order]
    ts, dur, run = ts[order], dur[order], run[order]
    args: list[Mapping[str, Any]] = [e.get("args") or {} for e in node_ev]
    names = [e["name"].removesuffix("_kernel_time") for e in node_ev]
    present = set(itertools.chain.from_iterable(args))
    mem_keys = sorted(k for k in present if k.startswith("mem_"))
    cols = _columns(
        args,
        [
            "op_name",
            "provider",
            "input_type_shape",
            "output_type_shape",
            "thread_scheduling_stats",
            *_INDEX_ARGS,
            *_NUMERIC_ARGS,
            *mem_keys,
        ],
        present,
    )
    op_type = _strings(cols["op_name"])
    tid = np.array([e.get("tid", 0) for e in node_ev], dtype=np.int64)
    is_parent = pd.Series(op_type, dtype=object).isin(CONTROL_FLOW_OPS).to_numpy()
    depth, parent_pos, self_us = _nest(ts, dur, tid, is_parent)
    if is_parent.any():
        parent = [names[p] if p >= 0 else "" for p in parent_pos.tolist()]
    else:
        parent = [""] * len(names)

    index_values: list[Any] = cols[_INDEX_ARGS[0]]
    for key in _INDEX_ARGS[1:]:  # node_index, else the older names
        if None in index_values:
            index_values = [
                v if v is not None else g for v, g in zip(index_values, cols[key], strict=True)
            ]
    stats = cols["thread_scheduling_stats"]
    # Single-threaded sessions write "" everywhere: skip the per-node work then.
    threads = [_thread_stats(t) for t in stats] if any(stats) else [(0, 0)] * len(stats)
    data: dict[str, Any] = {
        "run": run,
        "name": names,
        "op_type": op_type,
        "provider": _strings(cols["provider"]),
        "node_index": _numeric(index_values),
        "dur_us": dur,
        "self_us": self_us,
        "ts_us": ts,
        "depth": depth,
        "parent": parent,
        "inputs": _format_column(cols["input_type_shape"]),
        "outputs": _format_column(cols["output_type_shape"]),
    }
    for key in _NUMERIC_ARGS:
        data[key] = _numeric(cols[key])
    data["sub_threads"] = np.array([t[0] for t in threads], dtype=np.int64)
    data["sub_thread_runs"] = np.array([t[1] for t in threads], dtype=np.int64)
    data["tid"] = tid
    for key in mem_keys:
        data[key] = _numeric(cols[key])
    return pd.DataFrame(data)


def _kernel_frame(kernel_ev: list[Event], assign: Any) -> pd.DataFrame:
    ts = _ints([e["ts"] for e in kernel_ev])
    args: list[Mapping[str, Any]] = [e.get("args") or {} for e in kernel_ev]
    frame = pd.DataFrame(
        {
            "run": assign(ts),
            "name": [e["name"] for e in kernel_ev],
            "op_type": [a.get("op_name", "") for a in args],
            "node": [a.get("parent_name", "") for a in args],
            "dur_us": _ints([e["dur"] for e in kernel_ev]),
            "ts_us": ts,
            "stream": _numeric([a.get("stream") for a in args]),
        }
    )
    return frame.sort_values("ts_us", kind="stable").reset_index(drop=True)


def _keyed(profile: Profile) -> pd.DataFrame:
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


def compare_profiles(base: Profile, optimized: Profile) -> ProfileComparison:
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

    def per_op(p: Profile) -> pd.DataFrame:
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
