"""Reading an onnxruntime profile: the JSON of a file, and the one pass over its events.

The pass (:func:`scan_events`) collects the fields the node frame needs. A file is decoded
with msgspec against a schema of those fields (:func:`scan_typed`); one that does not fit
(a newer onnxruntime's keys, say) is parsed generically (orjson where installed, else json).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import operator
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

_orjson: Any
try:  # optional, the ``fast`` extra
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    _orjson = None


Event = dict[str, Any]
ProfileSource = str | os.PathLike[str] | Sequence[Mapping[str, Any]]

FENCES = ("_fence_before", "_fence_after")
KERNEL_ARGS = (
    "op_name", "parent_name", "stream", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
    "block_z",
)  # fmt: skip


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
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


def load_events(source: ProfileSource) -> tuple[list[Event], Path | None]:
    """The events and the file they came from (None for a list of events)."""
    if isinstance(source, str | os.PathLike):
        path = Path(os.fspath(source))
        return events_of(parse_json(read_bytes(path), path), str(path)), path
    return events_of(source, "<events>"), None


def read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise FileNotFoundError(f"onnxruntime profile not found: {path}")
    return path.read_bytes()


def parse_json(raw: bytes, path: Path) -> Any:
    try:
        return _loads(raw)
    except ValueError as exc:  # json and orjson decode errors both derive from it
        raise ValueError(f"{path}: not a valid JSON profile: {exc}") from exc


def events_of(data: Any, label: str) -> list[Event]:
    if isinstance(data, Mapping) and "traceEvents" in data:  # Chrome's object format
        data = data["traceEvents"]
    if not isinstance(data, list | tuple):
        raise ValueError(
            f"{label}: expected a JSON list of profiling events, got {type(data).__name__}"
        )
    return data if isinstance(data, list) else list(data)


def bad_event(events: Sequence[Any], label: str, keys: Iterable[str]) -> ValueError:
    needed = tuple(keys)
    for i, event in enumerate(events):
        if not isinstance(event, Mapping):
            return ValueError(f"{label}: event {i} is not an object: {event!r:.200}")
        missing = [k for k in needed if k not in event]
        if missing:
            return ValueError(f"{label}: event {i} lacks {', '.join(missing)}: {event!r:.200}")
    return ValueError(f"{label}: malformed profiling events")


def node_events(raw: bytes, label: str) -> list[Event]:
    """The node events of a file's bytes, parsed generically (a second parse of the file)."""
    return scan_events(events_of(_loads(raw), label)).node_ev


def write_events(path: Path, events: list[Event]) -> None:
    """Write events as a JSON list (a Chrome trace / Perfetto file)."""
    if _orjson is not None:
        path.write_bytes(_orjson.dumps(events))
    else:
        path.write_text(json.dumps(events), encoding="utf-8")


class Scan(NamedTuple):
    """What one pass over the events collects. Node lists are parallel (fences left out);
    a node's ``key`` is ``(event name, op type, provider)``, a kernel's ``(kernel name,
    args of KERNEL_ARGS)``: both repeat run after run, so columns are built per distinct
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


def scan_events(events: list[Event]) -> Scan:
    """One pass over the events: Node, Kernel and model_run fields, at one dict lookup each
    (a pass over a million scattered objects costs its cache misses, so there is one)."""
    try:
        return _scan_fast(events)
    except (KeyError, TypeError, AttributeError, IndexError):  # optional keys missing
        return _scan_tolerant(events)


def _scan_fast(events: list[Event]) -> Scan:
    s = Scan([], [], [], [], [], [], [], [], [])
    node, ts, dur, tid = s.node_ev.append, s.ts.append, s.dur.append, s.tid.append
    key, run = s.keys.append, s.runs.append
    kts, kdur, kkey = s.kernel_ts.append, s.kernel_dur.append, s.kernel_keys.append
    kernel_args = operator.itemgetter(*KERNEL_ARGS)
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
        keep = [not k[0].endswith(FENCES) for k in s.keys]
        fields = ("node_ev", "ts", "dur", "tid", "keys")
        kept: dict[str, Any] = {f: list(itertools.compress(getattr(s, f), keep)) for f in fields}
        return s._replace(**kept)
    return s


def _scan_tolerant(events: list[Event]) -> Scan:
    """:func:`_scan_fast` for events that lack optional keys (``tid``, ``args`` or some of
    its keys); KeyError or TypeError only for a missing cat/name/ts/dur."""
    s = Scan([], [], [], [], [], [], [], [], [])
    for e in events:
        cat = e["cat"]
        if cat == "Node":
            name = e["name"]
            if name.endswith(FENCES):
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
            s.kernel_keys.append((e["name"], tuple(args.get(k) for k in KERNEL_ARGS)))
        elif cat == "Session" and e["name"] == "model_run":
            s.runs.append((e["ts"], e["dur"]))
    return s


class _TypedArgs(msgspec.Struct, gc=False, forbid_unknown_fields=True):  # type: ignore[misc,call-arg]
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
    input_type_shape: msgspec.Raw = msgspec.Raw(b"")
    output_type_shape: msgspec.Raw = msgspec.Raw(b"")
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


class _TypedEvent(msgspec.Struct, gc=False):  # type: ignore[misc,call-arg]
    cat: str
    name: str
    ts: int
    dur: int
    tid: int = 0
    args: _TypedArgs | None = None


# strict=False: the numbers ORT writes as strings ("1048580") are decoded as ints
_DECODER = msgspec.json.Decoder(list[_TypedEvent], strict=False)
RAW_JSON = msgspec.Raw  # the shapes as raw JSON from the schema decode
decode_raw = msgspec.json.decode


def scan_typed(raw: bytes) -> Scan | None:
    """:func:`scan_events` of a file's bytes decoded with a schema of the fields the node frame
    needs (below orjson's time: shapes stay raw JSON, numbers become ints, no dict is
    built); ``node_ev`` holds the args structs. None for a file that does not fit (then
    the generic parse decides)."""
    try:
        events = _DECODER.decode(raw)
    except msgspec.DecodeError:  # a ValidationError too
        return None
    s = Scan([], [], [], [], [], [], [], [], [])
    ts, dur, tid, key, run = s.ts.append, s.dur.append, s.tid.append, s.keys.append, s.runs.append
    kts, kdur, kkey = s.kernel_ts.append, s.kernel_dur.append, s.kernel_keys.append
    node = s.node_ev.append  # the args structs here, not events
    empty = _TypedArgs()
    for e in events:
        cat = e.cat
        if cat == "Node":
            name = e.name
            if name.endswith(FENCES):
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
