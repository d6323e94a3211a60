"""The frames of a profile, built from one scan of its events: the nodes (nesting, self
time, shapes, sizes, thread and memory figures) and the GPU kernels."""

from __future__ import annotations

import itertools
import json
import operator
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from pytest_ortperf.profiling.trace import RAW_JSON, Event, Scan, decode_raw

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

# The columns parsed with the profile are run, name, op_type, provider, dur_us, self_us,
# ts_us, depth, parent and tid; the others (``Profile.nodes``) on first use.
Details = Callable[[], dict[str, Any]]

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
    if values and type(values[0]) is int:  # decoded as ints already (the schema decode)
        try:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        except (TypeError, ValueError, OverflowError):
            pass
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


def _format_column(values: Sequence[Any], names: Sequence[Hashable]) -> list[str]:
    """``format_type_shapes`` of each value, formatted once per node: a node's shapes
    repeat across runs (comparing them with its first ones is cheaper than formatting)."""
    n = len(values)
    first = dict(zip(reversed(names), range(n - 1, -1, -1), strict=True))  # node -> row
    ref = {name: values[row] for name, row in first.items()}
    text = {name: _format_shapes(value) for name, value in ref.items()}
    out = list(map(text.__getitem__, names))
    differs = list(map(operator.ne, values, map(ref.__getitem__, names)))
    if True in differs:  # dynamic shapes: format the rows that differ, once per change
        cache: dict[Hashable, tuple[Any, str]] = {}
        for row in itertools.compress(range(n), differs):
            name, value = names[row], values[row]
            hit = cache.get(name)
            if hit is None or hit[0] != value:
                hit = cache[name] = (value, _format_shapes(value))
            out[row] = hit[1]
    return out


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


def ints(values: Sequence[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError):  # numbers written as strings, say
        return np.array(values, dtype=np.int64)


def _codes(keys: list[Any]) -> tuple[list[Any], np.ndarray]:
    """The distinct keys (first seen first) and each key's position among them."""
    distinct = list(dict.fromkeys(keys))
    position = dict(zip(distinct, range(len(distinct)), strict=True))
    return distinct, np.fromiter(map(position.__getitem__, keys), np.int64, count=len(keys))


def _spread(values: list[Any], codes: np.ndarray) -> np.ndarray:
    """``values[code]`` for each code, as an object array."""
    table = np.empty(len(values), dtype=object)
    table[:] = values
    spread: np.ndarray = table[codes]
    return spread


def _args(events: list[Event]) -> list[Mapping[str, Any]]:
    try:
        args: list[Mapping[str, Any]] = list(map(operator.itemgetter("args"), events))
    except KeyError:
        args = [e.get("args") or {} for e in events]
    return [a or {} for a in args] if None in args else args


def _arg_columns(args: list[Mapping[str, Any]], keys: Sequence[str]) -> list[list[Any]]:
    """One list per key of ``args`` (None where an event lacks the key)."""
    if not args:
        return [[] for _ in keys]
    try:  # one C-level call per event when every event has every key (the usual case)
        if len(keys) == 1:
            return [list(map(operator.itemgetter(keys[0]), args))]
        rows = map(operator.itemgetter(*keys), args)
        return [list(col) for col in zip(*rows, strict=True)]
    except KeyError:
        return [_arg_column(args, k) for k in keys]


def _arg_column(args: list[Mapping[str, Any]], key: str) -> list[Any]:
    try:
        return list(map(operator.itemgetter(key), args))
    except KeyError:
        return [a.get(key) for a in args]


def node_frame(
    keys: list[tuple[str, str, str]],
    ts: np.ndarray,
    dur: np.ndarray,
    tid: np.ndarray,
    run: np.ndarray,
    columns: Callable[[], Columns],
) -> tuple[pd.DataFrame, Details | None]:
    """The core columns of the node frame, and the builder of the others from the detail
    args ``columns()`` gives (in the order of ``keys``) when called."""
    distinct, codes = _codes(keys)
    picks = None  # positions in the scan of the rows, when not all of them in order
    keep = run >= 0  # node events outside every model_run window (none in practice)
    if not keep.all():
        picks = np.flatnonzero(keep)
        ts, dur, tid, run, codes = ts[picks], dur[picks], tid[picks], run[picks], codes[picks]
    if not len(ts):
        return _empty_nodes(), None
    order = np.lexsort((-dur, ts))
    if (order[1:] < order[:-1]).any():  # not in execution order already
        picks = order if picks is None else picks[order]
        ts, dur, tid, run, codes = ts[order], dur[order], tid[order], run[order], codes[order]
    names = [k[0].removesuffix("_kernel_time") for k in distinct]
    ops = [k[1] for k in distinct]
    parents = [i for i, op in enumerate(ops) if op in CONTROL_FLOW_OPS]
    is_parent = np.isin(codes, parents) if parents else np.zeros(len(codes), dtype=bool)
    depth, parent_pos, self_us = _nest(ts, dur, tid, is_parent)
    name_col = _spread(names, codes)
    if is_parent.any():
        parent = np.where(parent_pos >= 0, name_col[np.maximum(parent_pos, 0)], "")
    else:
        parent = np.full(len(codes), "", dtype=object)
    frame = pd.DataFrame(
        {
            "run": run,
            "name": name_col,
            "op_type": _spread(ops, codes),
            "provider": _spread([k[2] for k in distinct], codes),
            "dur_us": dur,
            "self_us": self_us,
            "ts_us": ts,
            "depth": depth,
            "parent": parent,
            "tid": tid,
        }
    )

    def details() -> dict[str, Any]:
        cols = columns()
        if picks is not None:
            rows = picks.tolist()
            cols = Columns({k: [v[i] for i in rows] for k, v in cols.values.items()}, cols.mem)
        return _node_details(cols, codes.tolist())

    return frame, details


_SHAPE_ARGS = ("input_type_shape", "output_type_shape")
_DETAIL_ARGS = (*_SHAPE_ARGS, "thread_scheduling_stats", *_INDEX_ARGS, *_NUMERIC_ARGS)
# The mem_* keys ORT 1.32 writes (those of the schema decode)
_TYPED_MEM = (
    "mem_arena_held",
    "mem_arena_held_delta",
    "mem_bytes_in_use",
    "mem_bytes_requested_in_use",
    "mem_in_use_delta",
    "mem_in_use_peak",
    "mem_requested_in_use_delta",
)


class Columns(NamedTuple):
    """Detail args per key (:data:`_DETAIL_ARGS` and ``mem``), one value per node event;
    shapes as parsed JSON, or as ``msgspec.Raw`` from the schema decode."""

    values: dict[str, list[Any]]
    mem: list[str]  # the mem_* keys present, sorted


def dict_columns(events: list[Event]) -> Columns:
    args = _args(events)
    present = set(itertools.chain.from_iterable(args))
    mem_keys = sorted(k for k in present if k.startswith("mem_"))
    keys = [*_DETAIL_ARGS, *mem_keys]
    wanted = [k for k in keys if k in present]
    cols = dict(zip(wanted, _arg_columns(args, wanted), strict=True))
    none = [None] * len(args)
    for key in keys:
        cols.setdefault(key, none)
    return Columns(cols, mem_keys)


def typed_columns(args: list[Any]) -> Columns:
    keys = (*_DETAIL_ARGS, *_TYPED_MEM)
    if args:
        rows = map(operator.attrgetter(*keys), args)
        cols = dict(zip(keys, map(list, zip(*rows, strict=True)), strict=True))
    else:
        cols = {k: [] for k in keys}
    mem = [k for k in _TYPED_MEM if cols[k].count(None) < len(args)]
    for key in _TYPED_MEM:
        if key not in mem:
            del cols[key]
    return Columns(cols, mem)


def _format_shapes(value: Any) -> str:
    """:func:`format_type_shapes` of a parsed value or of raw JSON (``msgspec.Raw``)."""
    if isinstance(value, RAW_JSON):
        raw: Any = value
        return format_type_shapes(decode_raw(raw)) if len(raw) else ""
    return format_type_shapes(value)


def _node_details(columns: Columns, codes: list[int]) -> dict[str, Any]:
    """The node columns besides the core ones: shapes, sizes, thread and memory figures."""
    cols, mem_keys = columns
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
        "node_index": _numeric(index_values),
        "inputs": _format_column(cols["input_type_shape"], codes),
        "outputs": _format_column(cols["output_type_shape"], codes),
    }
    for key in _NUMERIC_ARGS:
        data[key] = _numeric(cols[key])
    data["sub_threads"] = np.array([t[0] for t in threads], dtype=np.int64)
    data["sub_thread_runs"] = np.array([t[1] for t in threads], dtype=np.int64)
    for key in mem_keys:
        data[key] = _numeric(cols[key])
    return data


def kernel_frame(scan: Scan, assign: Any) -> pd.DataFrame:
    """GPU kernels (``cat`` ``Kernel``, as ORT's CUDA/ROCm profilers write them: the kernel
    name; args ``op_name`` and ``parent_name`` (node), ``stream``, ``grid_x/y/z``,
    ``block_x/y/z``, all strings; memcpy activities have grid and block ``-1``)."""
    distinct, codes = _codes(scan.kernel_keys)
    ts = ints(scan.kernel_ts)
    args = [a for _, a in distinct]
    frame = pd.DataFrame(
        {
            "run": assign(ts),
            "name": _spread([name for name, _ in distinct], codes),
            "op_type": _spread([a[0] or "" for a in args], codes),
            "node": _spread([a[1] or "" for a in args], codes),
            "dur_us": ints(scan.kernel_dur),
            "ts_us": ts,
            "stream": _numeric([a[2] for a in args])[codes],
            "grid": _spread([_dims(a[3:6]) for a in args], codes),
            "block": _spread([_dims(a[6:9]) for a in args], codes),
        }
    )
    return frame.sort_values("ts_us", kind="stable").reset_index(drop=True)


def _dims(xyz: Sequence[Any]) -> str:
    """``"256x1x1"`` (``""`` where unknown)."""
    return "" if None in xyz else "x".join(map(str, xyz))
