"""The schema of a baseline entry: the types every reader of an entry relies on, declared
as msgspec structs and checked with :func:`msgspec.convert`.

An entry stays the plain dict read from the file, unknown fields kept as they are: the
structs only check it. :func:`entry_problem` turns the first failure into one line naming
the field (``field 'ratio' must be a positive number, got 'fast'``); the caller adds the
file and the entry. Kinds: ``compare``; ``latency``, ``absolute`` or ``normalized``;
``memory``, whose figures :func:`~pytest_ortperf.gating.memory_rule.check_memory_entry`
checks.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import msgspec

from pytest_ortperf.gating.memory_rule import check_memory_entry
from pytest_ortperf.gating.settings import LATENCY_MODES

KINDS = ("compare", "latency", "memory")
RECIPE = "recipe"
"""Key of a latency entry's recipe (``measuring.recipe.Recipe.to_dict()``: hashes of what
determines its speed, checked by ``Recipe.from_dict`` where it is used)."""
BESIDE = "beside"
"""Key of a latency entry's A/A ratio baseline (:mod:`pytest_ortperf.gating.beside`): its
summary; its block ratios are :data:`BESIDE_RATIOS` (kept in the samples file)."""
BESIDE_RATIOS = "beside_ratios"
MAX_ENTRY_DEPTH = 8
"""Nesting deeper than this (objects and lists inside an entry) is refused: a valid entry
nests 4 deep (``sessions`` -> role -> ``providers`` -> list)."""

_LARGEST = sys.float_info.max  # bounds that refuse inf and NaN (msgspec takes no `finite`)
Number = Annotated[float, msgspec.Meta(ge=-_LARGEST, le=_LARGEST)]
Positive = Annotated[float, msgspec.Meta(gt=0, le=_LARGEST)]
Positives = Annotated[list[Positive], msgspec.Meta(min_length=1)]
RunSizes = list[Annotated[int, msgspec.Meta(ge=1)]]
Scalar = str | int | float | bool | None


class Settings(msgspec.Struct, kw_only=True):
    """A session's settings (``SESSION_KEYS``)."""

    providers: list[str] = []
    model: Scalar = None
    optimization: Scalar = None
    threads: Scalar = None
    spinning: Scalar = None


class Control(msgspec.Struct, kw_only=True):
    """The control workload of a normalized latency: ``{model, median}``."""

    median: Positive


class Entry(msgspec.Struct, kw_only=True):
    """What every kind carries (all optional)."""

    test: str = ""
    name: str = ""
    api: str = ""
    updated: str = ""
    environment: dict[str, Scalar] = {}
    n: Annotated[int, msgspec.Meta(ge=0)] = 0
    op_shares: dict[str, dict[str, Number]] = {}


class Beside(msgspec.Struct, kw_only=True):
    """A latency's A/A ratio baseline: two fresh sessions of its model, interleaved."""

    ratio: Positive
    low: Positive
    high: Positive
    confidence: Number = 0.0
    n: Annotated[int, msgspec.Meta(ge=0)] = 0
    runs: RunSizes | None = None
    processes: RunSizes | None = None
    """Runs each process took (``--ortperf-update-processes``), adding up to ``runs``."""


class CompareEntry(Entry, kw_only=True):
    ratio: Positive
    low: Positive
    high: Positive
    confidence: Number = 0.0
    block_ratios: Positives
    runs: RunSizes | None = None
    processes: RunSizes | None = None
    """Runs per process, where the update took the entry in several."""
    medians: dict[str, Positive] = {}
    sessions: dict[str, Settings | None] = {}
    op_histograms: dict[str, dict[str, int]] = {}
    placements: dict[str, dict[str, tuple[str, str]]] = {}
    recipe: dict[str, Any] | None = None
    """The candidate's recipe (:mod:`pytest_ortperf.gating.beside`)."""
    beside: Beside | None = None
    beside_ratios: Positives | None = None


class LatencyEntry(Entry, kw_only=True):
    """An absolute latency."""

    samples: Positives
    median: Positive = 1.0
    calls_per_block: Annotated[int, msgspec.Meta(ge=1)] = 1
    session: Settings | None = None
    recipe: dict[str, Any] | None = None
    beside: Beside | None = None
    beside_ratios: Positives | None = None


class NormalizedEntry(LatencyEntry, kw_only=True):
    """A latency normalized by a control workload measured interleaved with it."""

    block_ratios: Positives
    runs: RunSizes | None = None
    processes: RunSizes | None = None
    control: Control


_SCHEMAS: dict[tuple[str, str], type[Entry]] = {
    ("compare", ""): CompareEntry,
    ("latency", "absolute"): LatencyEntry,
    ("latency", "normalized"): NormalizedEntry,
    ("memory", ""): Entry,
}

_POSITIVE = "must be a positive number, got {value}"
_STRING = "must be a string, got {value}"
_NUMBERS = "must be a non-empty list of positive numbers"
PROBLEMS = {
    "ratio": _POSITIVE,
    "low": _POSITIVE,
    "high": _POSITIVE,
    "median": _POSITIVE,
    "confidence": "must be a number, got {value}",
    "samples": _NUMBERS,
    "block_ratios": _NUMBERS,
    "n": "must be a whole number of at least 0, got {value}",
    "calls_per_block": "must be a whole number of at least 1, got {value}",
    "test": _STRING,
    "name": _STRING,
    "api": _STRING,
    "updated": _STRING,
    "environment": "must be an object, got {value}",
    "runs": "must be run sizes adding up to {blocks} block ratios",
    "processes": "must be counts of runs per process adding up to the entry's runs",
    "medians": "must map roles to positive numbers (seconds)",
    "sessions": "must map roles to session settings (or null)",
    "session": "must be session settings or null, got {value}",
    "op_histograms": "must map roles to {{op type: count}}",
    "placements": "must map roles to {{node: [op type, provider]}}",
    "op_shares": "must map roles to {{op type: share}}",
    "control": "must be {{model, median}} of the control workload",
    "recipe": "must be an object (the recipe of the model, settings and onnxruntime)",
    "beside": "must be {{ratio, low, high, n, runs}} of an A/A ratio baseline",
    "beside_ratios": _NUMBERS,
}
"""What each field must be, as an error says it (``value``: the field's, shortened;
``blocks``: how many block ratios the entry has)."""

_AT = re.compile(r" - at `\$\.(\w+)")
_MISSING = re.compile(r"missing required field `(\w+)`")
_TYPED = {
    schema: frozenset(schema.__struct_fields__) - {"session", "sessions", RECIPE}
    for schema in _SCHEMAS.values()
}
"""The fields whose nesting a schema bounds (not walked for their depth: the schema check
refuses a deeper value without walking it). A session's settings and a recipe may hold
unknown keys."""


def show(value: Any) -> str:
    """``repr`` of a value, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def depth(value: Any) -> int:
    """How deeply objects and lists nest in ``value`` (0 for a scalar), without recursion;
    counting stops past :data:`MAX_ENTRY_DEPTH`."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level + 1)
        if deepest > MAX_ENTRY_DEPTH:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def _field_problem(entry: Mapping[str, Any], fieldname: str) -> str:
    """``field 'x' <what it must be>, got <its value>`` from :data:`PROBLEMS`."""
    value = entry.get(fieldname)
    if depth(value) > MAX_ENTRY_DEPTH:  # said so, rather than shown (and not walked before)
        return f"field {fieldname!r} is nested more than {MAX_ENTRY_DEPTH} levels deep"
    if fieldname == "environment" and isinstance(value, Mapping):
        name, bad = next((k, v) for k, v in value.items() if not is_scalar(v))
        return f"field 'environment' must hold plain values, got {name!r}: {show(bad)}"
    blocks = entry.get("block_ratios")
    problem = PROBLEMS[fieldname].format(
        value=show(value), blocks=len(blocks) if isinstance(blocks, list) else 0
    )
    return f"field {fieldname!r} {problem}"


def entry_problem(entry: Mapping[str, Any]) -> str | None:
    """What is wrong with a baseline entry (None: nothing): ``field 'x' ...`` for the first
    field that lacks the type everything reading the entry relies on (required fields of
    its kind; optional ones when present). Unknown fields are accepted, if not nested
    more than :data:`MAX_ENTRY_DEPTH` deep."""
    kind = entry.get("kind")
    mode = entry.get("mode", "absolute") if kind == "latency" else ""
    schema = _SCHEMAS.get((kind, mode)) if isinstance(kind, str) and isinstance(mode, str) else None
    typed = _TYPED[schema] if schema is not None else frozenset()
    for fieldname, value in entry.items():
        if fieldname not in typed and not is_scalar(value) and depth(value) > MAX_ENTRY_DEPTH:
            return f"field {fieldname!r} is nested more than {MAX_ENTRY_DEPTH} levels deep"
    if kind not in KINDS:
        return f"field 'kind' must be one of {', '.join(KINDS)}, got {kind!r}"
    if schema is None:
        return f"field 'mode' must be one of {', '.join(LATENCY_MODES)}, got {show(mode)}"
    try:
        checked = msgspec.convert(entry, schema)
    except msgspec.ValidationError as exc:
        found = _AT.search(str(exc)) or _MISSING.search(str(exc))
        if found is None or found.group(1) not in PROBLEMS:  # not expected: say what msgspec says
            return f"not a valid {kind} entry: {exc}"
        return _field_problem(entry, found.group(1))
    runs = getattr(checked, "runs", None)
    if runs is not None and sum(runs) != len(checked.block_ratios):  # type: ignore[attr-defined]
        return _field_problem(entry, "runs")
    processes = getattr(checked, "processes", None)
    if processes is not None and (runs is None or sum(processes) != len(runs)):
        return _field_problem(entry, "processes")
    beside = getattr(checked, BESIDE, None)
    if beside is not None:
        ratios = getattr(checked, BESIDE_RATIOS, None)
        if ratios is None or (beside.runs is not None and sum(beside.runs) != len(ratios)):
            return f"field {BESIDE!r} must come with {BESIDE_RATIOS!r}, its runs adding up to them"
        if beside.processes is not None and (
            beside.runs is None or sum(beside.processes) != len(beside.runs)
        ):
            return f"field {BESIDE!r} must count its runs per process, adding up to its runs"
    if kind == "memory":
        return check_memory_entry(entry)
    return None
