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
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

_orjson: Any
try:  # optional, the ``fast`` extra
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    _orjson = None

_msgspec: Any
_RAW: type  # msgspec.Raw: the shapes as raw JSON from the schema decode
_decode_raw: Callable[[Any], Any]
try:  # optional, the ``fast`` extra: decodes only the fields the core columns need
    import msgspec as _msgspec
except ImportError:  # pragma: no cover - exercised when msgspec is absent
    _msgspec = None

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
    """The events and the file they came from (None for a list of events)."""
    if isinstance(source, str | os.PathLike):
        path = Path(os.fspath(source))
        return _events_of(_parse(_read_bytes(path), path), str(path)), path
    return _events_of(source, "<events>"), None


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise FileNotFoundError(f"onnxruntime profile not found: {path}")
    return path.read_bytes()


def _parse(raw: bytes, path: Path) -> Any:
    try:
        return _loads(raw)
    except ValueError as exc:  # json and orjson decode errors both derive from it
        raise ValueError(f"{path}: not a valid JSON profile: {exc}") from exc


def _events_of(data: Any, label: str) -> list[Event]:
    if isinstance(data, Mapping) and "traceEvents" in data:  # Chrome's object format
        data = data["traceEvents"]
    if not isinstance(data, list | tuple):
        raise ValueError(
            f"{label}: expected a JSON list of profiling events, got {type(data).__name__}"
        )
    return data if isinstance(data, list) else list(data)


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
            with _gc_paused():
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


class _Scan(NamedTuple):
    """What one pass over the events collects. Node lists are parallel (fences left out);
    a node's ``key`` is ``(event name, op type, provider)``, a kernel's ``(kernel name,
    args of _KERNEL_ARGS)``: both repeat run after run, so columns are built per distinct
    key and spread with numpy."""

    node_ev: list[Any]  # the node events; their args structs when decoded with the schema
    ts: list[int]
    dur: list[int]
    tid: list[int]
    keys: list[tuple[str, str, str]]
    kernel_ts: list[int]
    kernel_dur: list[int]
    kernel_keys: list[tuple[str, tuple[Any, ...]]]
    runs: list[tuple[int, int]]  # (ts, dur) of each model_run


def _scan(events: list[Event]) -> _Scan:
    """One pass over the events: Node, Kernel and model_run fields, at one dict lookup each
    (a pass over a million scattered objects costs its cache misses, so there is one)."""
    try:
        return _scan_fast(events)
    except (KeyError, TypeError, AttributeError, IndexError):  # optional keys missing
        return _scan_tolerant(events)


def _scan_fast(events: list[Event]) -> _Scan:
    s = _Scan([], [], [], [], [], [], [], [], [])
    node, ts, dur, tid = s.node_ev.append, s.ts.append, s.dur.append, s.tid.append
    key, run = s.keys.append, s.runs.append
    kts, kdur, kkey = s.kernel_ts.append, s.kernel_dur.append, s.kernel_keys.append
    kernel_args = operator.itemgetter(*_KERNEL_ARGS)
    fences = False
    for e in events:
        cat = e["cat"]
        if cat == "Node":
            args = e["args"]
            name = e["name"]
            if name[-2] != "m":  # not "..._kernel_time": a fence (filtered below)
                fences = True
            node(e)
            ts(e["ts"])
            dur(e["dur"])
            tid(e["tid"])
            key((name, args["op_name"], args["provider"]))
        elif cat == "Kernel":
            kts(e["ts"])
            kdur(e["dur"])
            kkey((e["name"], kernel_args(e["args"])))
        elif cat == "Session" and e["name"] == "model_run":
            run((e["ts"], e["dur"]))
    if fences:
        keep = [not k[0].endswith(_FENCES) for k in s.keys]
        fields = ("node_ev", "ts", "dur", "tid", "keys")
        kept: dict[str, Any] = {f: list(itertools.compress(getattr(s, f), keep)) for f in fields}
        return s._replace(**kept)
    return s


def _scan_tolerant(events: list[Event]) -> _Scan:
    """:func:`_scan_fast` for events that lack optional keys (``tid``, ``args`` or some of
    its keys); KeyError or TypeError only for a missing cat/name/ts/dur."""
    s = _Scan([], [], [], [], [], [], [], [], [])
    for e in events:
        cat = e["cat"]
        if cat == "Node":
            name = e["name"]
            if name.endswith(_FENCES):
                continue
            args = e.get("args") or {}
            s.node_ev.append(e)
            s.ts.append(e["ts"])
            s.dur.append(e["dur"])
            s.tid.append(e.get("tid", 0))
            s.keys.append((name, args.get("op_name") or "", args.get("provider") or ""))
        elif cat == "Kernel":
            args = e.get("args") or {}
            s.kernel_ts.append(e["ts"])
            s.kernel_dur.append(e["dur"])
            s.kernel_keys.append((e["name"], tuple(args.get(k) for k in _KERNEL_ARGS)))
        elif cat == "Session" and e["name"] == "model_run":
            s.runs.append((e["ts"], e["dur"]))
    return s


if _msgspec is not None:

    class _TypedArgs(_msgspec.Struct, gc=False, forbid_unknown_fields=True):  # type: ignore[misc,call-arg]
        """The args of nodes and kernels, decoded in the one pass over the file; shapes are
        kept as raw JSON (formatted once per node, not built run after run). A key not
        listed here (a newer ORT's, say) sends the file to the generic parse."""

        op_name: str = ""
        provider: str = ""
        parent_name: str | None = None
        stream: str | None = None
        grid_x: str | None = None
        grid_y: str | None = None
        grid_z: str | None = None
        block_x: str | None = None
        block_y: str | None = None
        block_z: str | None = None
        input_type_shape: _msgspec.Raw = _msgspec.Raw(b"")
        output_type_shape: _msgspec.Raw = _msgspec.Raw(b"")
        thread_scheduling_stats: Any = None
        node_index: int | None = None
        graph_index: int | None = None
        exec_plan_index: int | None = None
        activation_size: int | None = None
        parameter_size: int | None = None
        output_size: int | None = None
        mem_arena_held: int | None = None
        mem_arena_held_delta: int | None = None
        mem_bytes_in_use: int | None = None
        mem_bytes_requested_in_use: int | None = None
        mem_in_use_delta: int | None = None
        mem_in_use_peak: int | None = None
        mem_requested_in_use_delta: int | None = None

    class _TypedEvent(_msgspec.Struct, gc=False):  # type: ignore[misc,call-arg]
        cat: str
        name: str
        ts: int
        dur: int
        tid: int = 0
        args: _TypedArgs | None = None

    # strict=False: the numbers ORT writes as strings ("1048580") are decoded as ints
    _DECODER = _msgspec.json.Decoder(list[_TypedEvent], strict=False)
    _RAW = _msgspec.Raw
    _decode_raw = _msgspec.json.decode
else:  # pragma: no cover - exercised when msgspec is absent
    _RAW = type("_NoRaw", (), {})  # nothing is of this type
    _decode_raw = _loads


def _scan_typed(raw: bytes) -> _Scan | None:
    """:func:`_scan` of a file's bytes decoded with a schema of the fields the node frame
    needs (below orjson's time: shapes stay raw JSON, numbers become ints, no dict is
    built); ``node_ev`` holds the args structs. None without msgspec or for a file that
    does not fit (then the generic parse decides)."""
    if _msgspec is None:
        return None
    try:
        events = _DECODER.decode(raw)
    except _msgspec.DecodeError:  # a ValidationError too
        return None
    s = _Scan([], [], [], [], [], [], [], [], [])
    ts, dur, tid, key, run = s.ts.append, s.dur.append, s.tid.append, s.keys.append, s.runs.append
    kts, kdur, kkey = s.kernel_ts.append, s.kernel_dur.append, s.kernel_keys.append
    node = s.node_ev.append  # the args structs here, not events
    empty = _TypedArgs()
    for e in events:
        cat = e.cat
        if cat == "Node":
            name = e.name
            if name.endswith(_FENCES):
                continue
            args = e.args or empty
            node(args)
            ts(e.ts)
            dur(e.dur)
            tid(e.tid)
            key((name, args.op_name, args.provider))
        elif cat == "Kernel":
            a = e.args or empty
            kts(e.ts)
            kdur(e.dur)
            kkey(
                (e.name, (a.op_name or None, a.parent_name, a.stream, a.grid_x, a.grid_y,
                          a.grid_z, a.block_x, a.block_y, a.block_z))
            )  # fmt: skip
        elif cat == "Session" and e.name == "model_run":
            run((e.ts, e.dur))
    return s


def _ints(values: Sequence[Any]) -> np.ndarray:
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


def _read_profile(source: ProfileSource, keep_events: bool | None) -> Profile:
    scan: _Scan | None = None
    events: list[Event] | None = None
    path: Path | None = None
    raw: bytes | None = None
    if isinstance(source, str | os.PathLike):
        path = Path(os.fspath(source))
        raw = _read_bytes(path)
        keep_events = bool(keep_events)
        if not keep_events:  # decode only what the core columns need, where msgspec can
            scan = _scan_typed(raw)
        if scan is None:
            events = _events_of(_parse(raw, path), str(path))
    else:
        events = _events_of(source, "<events>")
        keep_events = keep_events is None or keep_events
    label = str(path) if path is not None else "<events>"
    try:
        if scan is None:
            assert events is not None
            scan = _scan(events)
        run_start = _ints([r[0] for r in scan.runs])
        run_dur = _ints([r[1] for r in scan.runs])
        ts = _ints(scan.ts)
        dur = _ints(scan.dur)
        tid = _ints(scan.tid)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise _bad_event(events or [], label, ("cat", "name", "ts", "dur")) from None

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

    def columns() -> _Columns:
        if typed:
            return _typed_columns(scan.node_ev)
        if listed is not None:
            return _dict_columns(listed)
        assert kept is not None
        with _gc_paused():
            return _dict_columns(_scan(_events_of(_loads(kept), label)).node_ev)

    nodes, details = _node_frame(scan.keys, ts, dur, tid, assign(ts), columns)
    if not len(run_start) and len(nodes):
        # No model_run events (a truncated trace): all nodes form one run without wall time.
        first, last = int(ts.min()), int((ts + dur).max())
        run_info = pd.DataFrame({"run": [0], "start_us": [first], "wall_us": [last - first]})
    try:
        kernels = _kernel_frame(scan, assign) if scan.kernel_keys else pd.DataFrame()
    except (TypeError, ValueError):
        raise _bad_event(events or [], label, ("name", "ts", "dur")) from None
    return Profile(
        nodes,
        run_info,
        kernels,
        events=events if keep_events else None,
        source=path,
        details=details,
    )


_FENCES = ("_fence_before", "_fence_after")


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


def _node_frame(
    keys: list[tuple[str, str, str]],
    ts: np.ndarray,
    dur: np.ndarray,
    tid: np.ndarray,
    run: np.ndarray,
    columns: Callable[[], _Columns],
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
            cols = _Columns({k: [v[i] for i in rows] for k, v in cols.values.items()}, cols.mem)
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


class _Columns(NamedTuple):
    """Detail args per key (:data:`_DETAIL_ARGS` and ``mem``), one value per node event;
    shapes as parsed JSON, or as ``msgspec.Raw`` from the schema decode."""

    values: dict[str, list[Any]]
    mem: list[str]  # the mem_* keys present, sorted


def _dict_columns(events: list[Event]) -> _Columns:
    args = _args(events)
    present = set(itertools.chain.from_iterable(args))
    mem_keys = sorted(k for k in present if k.startswith("mem_"))
    keys = [*_DETAIL_ARGS, *mem_keys]
    wanted = [k for k in keys if k in present]
    cols = dict(zip(wanted, _arg_columns(args, wanted), strict=True))
    none = [None] * len(args)
    for key in keys:
        cols.setdefault(key, none)
    return _Columns(cols, mem_keys)


def _typed_columns(args: list[Any]) -> _Columns:
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
    return _Columns(cols, mem)


def _format_shapes(value: Any) -> str:
    """:func:`format_type_shapes` of a parsed value or of raw JSON (``msgspec.Raw``)."""
    if isinstance(value, _RAW):
        raw: Any = value
        return format_type_shapes(_decode_raw(raw)) if len(raw) else ""
    return format_type_shapes(value)


def _node_details(columns: _Columns, codes: list[int]) -> dict[str, Any]:
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


def _kernel_frame(scan: _Scan, assign: Any) -> pd.DataFrame:
    """GPU kernels (``cat`` ``Kernel``, as ORT's CUDA/ROCm profilers write them: the kernel
    name; args ``op_name`` and ``parent_name`` (node), ``stream``, ``grid_x/y/z``,
    ``block_x/y/z``, all strings; memcpy activities have grid and block ``-1``)."""
    distinct, codes = _codes(scan.kernel_keys)
    ts = _ints(scan.kernel_ts)
    args = [a for _, a in distinct]
    frame = pd.DataFrame(
        {
            "run": assign(ts),
            "name": _spread([name for name, _ in distinct], codes),
            "op_type": _spread([a[0] or "" for a in args], codes),
            "node": _spread([a[1] or "" for a in args], codes),
            "dur_us": _ints(scan.kernel_dur),
            "ts_us": ts,
            "stream": _numeric([a[2] for a in args])[codes],
            "grid": _spread([_dims(a[3:6]) for a in args], codes),
            "block": _spread([_dims(a[6:9]) for a in args], codes),
        }
    )
    return frame.sort_values("ts_us", kind="stable").reset_index(drop=True)


_KERNEL_ARGS = (
    "op_name", "parent_name", "stream", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
    "block_z",
)  # fmt: skip


def _dims(xyz: Sequence[Any]) -> str:
    """``"256x1x1"`` (``""`` where unknown)."""
    return "" if None in xyz else "x".join(map(str, xyz))


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
