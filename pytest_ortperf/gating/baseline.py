"""Baseline files: ``__ortperf__/<module>.json`` beside each test module, and the raw
numbers of its entries in ``__ortperf__/<module>.samples.json``.

Format (``schema`` 3; schema 1 and 2 files, raw numbers inline, are read as they are and
written as schema 3 by the next update)::

    {"schema": 3, "entries": {"<test id within its module>::<measurement name>": {...}}}
    {"schema": 3, "raw": {"<entry key>": {"<digest>": {"samples": [...], ...}}}}

An entry's raw numbers (:data:`RAW_FIELDS`) live in the samples file under its key and the
digest of their text; the entry names that digest in its ``raw`` field. So a refresh of an
unchanged model changes a few short lines per entry of ``<module>.json`` (median, ratio,
interval, date, digest) and the samples file's lines of that entry (numbers wrapped at
:data:`RAW_PER_LINE` a line). The samples file holds every version that one of the two
files on disk references while an update writes them, so a kill at any point leaves
entries whose raw numbers are there.

A ``compare`` entry holds ``ratio``/``low``/``high``/``confidence``/``n``, the paired
``block_ratios``, ``runs`` (how many consecutive block ratios each independent run took:
``--ortperf-update`` measures several on fresh session pairs, whose spread is the
between-run variance; absent in schema 1: one run), ``medians`` (seconds per call per role),
``op_histograms`` and ``sessions`` (settings) per role. A ``latency`` entry holds
``median``/``n``, ``samples`` (seconds per call), ``session`` and its ``mode``: a
``normalized`` one also ``block_ratios``/``runs`` of the target over its ``control``
workload (``{"model", "median"}``). Both kinds carry ``test``, ``name``, ``api``,
``environment`` (the fingerprint's machine and software keys: CPU model and ISA flags,
effective CPUs, ORT version and build, Python/numpy/onnx versions, machine hash) and the
``updated`` date. Floats are rounded to 6 significant digits, keys sorted, lists of
numbers in an entry on one line, so a re-measured entry shows as a few changed lines in a
pull request.

Writes are atomic (temporary file in the same directory, fsync, ``os.replace``), and an
update (:func:`update_baseline`) reads, merges and writes a file under its lock
(``__ortperf__/.<module>.json.lock``, removed again when released), so concurrent runs
updating different tests of one module keep each other's entries. An update never drops
what it cannot read: a file that is not valid JSON, has an invalid entry or a newer schema
is left as it is and reported. Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from pytest_ortperf.files import file_lock, remove_stale_temps, write_atomic
from pytest_ortperf.gating.fingerprint import (
    RATIO_KEYS,
    differences,
    fingerprint_of,
    unchecked,
)
from pytest_ortperf.gating.history import judge_against_runs
from pytest_ortperf.gating.memory_rule import check_memory_entry, judge_memory_entry, memory_entry
from pytest_ortperf.gating.placement import Placement, add_placement, read_placement
from pytest_ortperf.gating.rules import (
    RatioBaseline,
    downgrade,
    judge_ratio,
    judge_structure,
    new,
    not_comparable,
    ratio_baseline,
)
from pytest_ortperf.gating.settings import LATENCY_MODES
from pytest_ortperf.results import OP_SHARES, Outcome, Verdict
from pytest_ortperf.stats import median
from pytest_ortperf.units import (
    format_bytes,
    format_change,
    format_ratio,
    format_seconds,
)

SCHEMA_VERSION = 3
RAW_FIELDS = ("samples", "block_ratios")
"""Entry fields of raw numbers, kept in the samples file (schema 3); any other field stays
in the entry."""
RAW_REF = "raw"
"""The entry field naming the digest of its raw numbers in the samples file."""
RAW_PER_LINE = 8
"""Numbers per line in the samples file (lines stay under 120 characters)."""
DIRNAME = "__ortperf__"
KINDS = ("compare", "latency", "memory")
ROLES = ("reference", "candidate")
ENVIRONMENT_KEYS = (
    "ort_version",
    "ort_build",
    "cpu_model",
    "isa",
    "effective_cpus",
    "logical_cores",
    "python_version",
    "numpy_version",
    "onnx_version",
    "fingerprint",
)
CONTROL_DRIFT = 0.10
"""How far the control workload's own median may move from the baseline's before a
regressed normalized latency is reported ``unstable`` instead: normalizing cancels a
machine-wide slowdown, not contention that hits the model harder than the control."""
SESSION_KEYS = ("model", "providers", "optimization", "threads", "spinning")
LOCK_TIMEOUT_S = 60.0
"""How long an update waits for another process's update of the same file."""
MAX_ENTRY_DEPTH = 8
"""Nesting deeper than this (objects and lists inside an entry) is refused: a valid entry
nests 4 deep (``sessions`` -> role -> ``providers`` -> list)."""
SHOWN_KEYS = 5
"""How many keys a note lists before it says ``... and N more``."""


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file and the problem."""

    remedy = "fix the file or delete it"
    """What to do about it before an update can write the file."""


class NewerBaselineError(BaselineError):
    """A baseline file written by a newer pytest-ortperf (a higher ``schema``)."""

    remedy = "upgrade pytest-ortperf (a newer schema is never downgraded)"


@dataclass(frozen=True)
class Baseline:
    """The entries of one baseline file (empty when the file does not exist)."""

    path: Path
    schema: int = SCHEMA_VERSION
    entries: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class UpdatePlan:
    """What an update or prune would write: the resulting ``entries`` and, per key touched,
    one human-readable line in ``lines`` (``added``/``changed``/``removed`` list the keys)."""

    entries: Mapping[str, Mapping[str, Any]]
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()

    @property
    def modified(self) -> bool:
        return bool(self.added or self.changed or self.removed)


def baseline_path(test_module: Path) -> Path:
    """``<dir>/__ortperf__/<stem>.json`` for the test module ``<dir>/<stem>.py``."""
    test_module = Path(test_module)
    return test_module.parent / DIRNAME / f"{test_module.stem}.json"


def entry_key(test: str, name: str) -> str:
    return f"{test}::{name}"


def entry_test(key: str, entry: Mapping[str, Any]) -> str:
    """The test id an entry belongs to (its ``test`` field; else the key minus the name)."""
    test = entry.get("test")
    if isinstance(test, str):
        return test
    name = entry.get("name")
    if isinstance(name, str) and key.endswith("::" + name):
        return key[: -len(name) - 2]
    return key.rsplit("::", 1)[0]


def split_nodeid(nodeid: str) -> tuple[str, str]:
    """``("tests/test_x.py", "test_y[p]")``: the module path and the id inside it.

    Baseline keys use the id inside the module, so they survive a change of rootdir.
    """
    module, _, local = nodeid.partition("::")
    return module, local or module


def local_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record dict whose ``test`` is the id inside its module (as baseline keys are)."""
    return {**record, "test": split_nodeid(str(record["test"]))[1]}


# --------------------------------------------------------------------------- formatting


def round_floats(value: Any, digits: int = 6) -> Any:
    """``value`` with every float rounded to ``digits`` significant digits (recursively)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot store a non-finite number ({value}) in a baseline")
        return float(f"{value:.{digits}g}")
    if isinstance(value, Mapping):
        return {str(k): round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v, digits) for v in value]
    return value


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _encode(value: Any, level: int, wrap: int = 0) -> str:
    """JSON text, indent 2, keys sorted; a list of scalars on one line, or ``wrap`` a line."""
    pad = "  " * level
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [
            f"{pad}  {json.dumps(str(k), ensure_ascii=False)}: "
            + _encode(value[k], level + 1, wrap)
            for k in sorted(value, key=str)
        ]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, (list, tuple)):
        if all(_scalar(v) for v in value):
            texts = [_encode(v, level + 1) for v in value]
            if not wrap or len(texts) <= wrap:
                return "[" + ", ".join(texts) + "]"
            lines = [
                f"{pad}  " + ", ".join(texts[i : i + wrap]) for i in range(0, len(texts), wrap)
            ]
            return "[\n" + ",\n".join(lines) + "\n" + pad + "]"
        items = [f"{pad}  {_encode(v, level + 1, wrap)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


RawVersions = dict[str, dict[str, dict[str, Any]]]
"""The samples file's ``raw``: ``{entry key: {digest: {field: [numbers]}}}``."""


def samples_path(path: Path) -> Path:
    """``__ortperf__/<module>.samples.json``: the raw numbers of the baseline file ``path``."""
    return path.with_name(f"{path.stem}.samples.json")


def _digest(raw: Mapping[str, Any]) -> str:
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def split_entries(
    entries: Mapping[str, Mapping[str, Any]],
) -> tuple[dict[str, dict[str, Any]], RawVersions]:
    """``entries`` (floats rounded) as the two files keep them: each entry without its
    :data:`RAW_FIELDS` but with their digest in ``raw``, and those fields per key and digest."""
    summaries: dict[str, dict[str, Any]] = {}
    raw: RawVersions = {}
    for key, entry in round_floats(entries).items():
        data = {f: entry[f] for f in RAW_FIELDS if f in entry}
        rest = {k: v for k, v in entry.items() if k not in data and k != RAW_REF}
        if data:
            digest = _digest(data)
            rest[RAW_REF] = digest
            raw[key] = {digest: data}
        summaries[key] = rest
    return summaries, raw


def dumps_baseline(entries: Mapping[str, Mapping[str, Any]]) -> str:
    """The text of ``<module>.json`` for ``entries``: sorted keys, indent 2, number lists on
    one line, floats to 6 significant digits, raw numbers replaced by their digest."""
    document = {"schema": SCHEMA_VERSION, "entries": split_entries(entries)[0]}
    return _encode(document, 0) + "\n"


def dumps_samples(raw: RawVersions) -> str:
    """The text of ``<module>.samples.json``: :data:`RAW_PER_LINE` numbers a line."""
    return _encode({"schema": SCHEMA_VERSION, "raw": raw}, 0, wrap=RAW_PER_LINE) + "\n"


# --------------------------------------------------------------------------- reading


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _depth(value: Any) -> int:
    """How deeply objects and lists nest in ``value`` (0 for a scalar), without recursion."""
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


def _check_entry(path: Path, key: str, entry: Any) -> None:
    """Raise :class:`BaselineError` naming the file, the entry and the field unless ``entry``
    has the types everything reading it relies on (required fields of its kind; optional
    ones when present). Unknown fields are kept as they are, if not nested absurdly deep."""

    def fail(fieldname: str, problem: str) -> BaselineError:
        return BaselineError(f"{path}: entry {key!r}: field {fieldname!r} {problem}")

    if not isinstance(entry, Mapping):
        raise BaselineError(f"{path}: entry {key!r} is not an object")
    for fieldname, value in entry.items():
        if _depth(value) > MAX_ENTRY_DEPTH:
            raise fail(fieldname, f"is nested more than {MAX_ENTRY_DEPTH} levels deep")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise fail("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")

    def show(value: Any) -> str:
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."

    def positive_number(value: Any) -> bool:
        return _is_number(value) and math.isfinite(value) and value > 0

    def number(fieldname: str, positive: bool = False, required: bool = True) -> None:
        if fieldname not in entry and not required:
            return
        value = entry.get(fieldname)
        if not (_is_number(value) and math.isfinite(value)) or (positive and value <= 0):
            what = "a positive number" if positive else "a number"
            raise fail(fieldname, f"must be {what}, got {show(value)}")

    def numbers(fieldname: str) -> None:
        value = entry.get(fieldname)
        if not isinstance(value, list) or not value or not all(positive_number(v) for v in value):
            raise fail(fieldname, "must be a non-empty list of positive numbers")

    def count(fieldname: str, least: int) -> None:
        value = entry.get(fieldname, least)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise fail(fieldname, f"must be a whole number of at least {least}, got {show(value)}")

    def by_role(fieldname: str, check: Callable[[Any], bool], what: str) -> None:
        value = entry.get(fieldname, {})
        if not isinstance(value, Mapping) or not all(check(v) for v in value.values()):
            raise fail(fieldname, f"must map roles to {what}")

    def settings(value: Any) -> bool:  # a session's settings (SESSION_KEYS), or null
        if value is None:
            return True
        if not isinstance(value, Mapping):
            return False
        providers = value.get("providers", [])
        return (
            isinstance(providers, list)
            and all(isinstance(p, str) for p in providers)
            and all(_scalar(v) for k, v in value.items() if k != "providers")
        )

    for name in ("test", "name", "api", "updated"):
        if name in entry and not isinstance(entry[name], str):
            raise fail(name, f"must be a string, got {show(entry[name])}")
    env = entry.get("environment", {})
    if not isinstance(env, Mapping):
        raise fail("environment", f"must be an object, got {show(env)}")
    for name, value in env.items():
        if not _scalar(value):
            raise fail("environment", f"must hold plain values, got {name!r}: {show(value)}")
    count("n", 0)

    def runs() -> None:
        sizes = entry.get("runs")
        if sizes is None:
            return
        blocks = entry.get("block_ratios") or []
        if (
            not isinstance(sizes, list)
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes)
            or sum(sizes) != len(blocks)
        ):
            raise fail("runs", f"must be run sizes adding up to {len(blocks)} block ratios")

    if kind == "memory":
        problem = check_memory_entry(entry)
        if problem is not None:
            raise BaselineError(f"{path}: entry {key!r}: {problem}")
        return
    if kind == "compare":
        for name in ("ratio", "low", "high"):
            number(name, positive=True)
        number("confidence", required=False)
        numbers("block_ratios")
        hists = entry.get("op_histograms", {})
        if not isinstance(hists, Mapping) or not all(
            isinstance(h, Mapping)
            and all(isinstance(k, str) and isinstance(v, int) for k, v in h.items())
            for h in hists.values()
        ):
            raise fail("op_histograms", "must map roles to {op type: count}")
        stored = entry.get("placements", {})
        if not isinstance(stored, Mapping) or not all(
            isinstance(p, Mapping) and read_placement(p) is not None for p in stored.values()
        ):
            raise fail("placements", "must map roles to {node: [op type, provider]}")
        runs()
        by_role("medians", positive_number, "positive numbers (seconds)")
        by_role("sessions", settings, "session settings (or null)")
    else:
        numbers("samples")
        mode = entry.get("mode", "absolute")
        if mode not in LATENCY_MODES:
            raise fail("mode", f"must be one of {', '.join(LATENCY_MODES)}, got {show(mode)}")
        if mode == "normalized":
            numbers("block_ratios")
            runs()
            control = entry.get("control")
            if not isinstance(control, Mapping) or not positive_number(control.get("median")):
                raise fail("control", "must be {model, median} of the control workload")
        number("median", positive=True, required=False)
        count("calls_per_block", 1)
        session = entry.get("session")
        if not settings(session):
            raise fail("session", f"must be session settings or null, got {show(session)}")
    by_role(
        OP_SHARES,
        lambda shares: (
            isinstance(shares, Mapping)
            and all(_is_number(v) and math.isfinite(v) for v in shares.values())
        ),
        "{op type: share}",
    )


def _document(text: str, path: Path) -> Mapping[str, Any]:
    """The JSON object of a baseline or samples file, with its ``schema`` checked."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (unresolved merge conflict?)" if "<<<<<<<" in text else ""
        raise BaselineError(
            f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}{hint}"
        ) from exc
    except RecursionError:
        raise BaselineError(f"{path}: invalid baseline: JSON nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise BaselineError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise BaselineError(f"{path}: expected a JSON object at the top level")
    schema = data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise BaselineError(f"{path}: missing or invalid 'schema' (expected {SCHEMA_VERSION})")
    if schema > SCHEMA_VERSION:
        raise NewerBaselineError(
            f"{path}: written by a newer pytest-ortperf (schema {schema} > {SCHEMA_VERSION}); "
            "upgrade the plugin"
        )
    return data


def _parse_samples(text: str | None, path: Path, main: Path) -> RawVersions:
    """The ``raw`` versions of a samples file (``text`` None: the file is missing)."""
    if text is None:
        raise BaselineError(
            f"{path}: missing; it holds the raw numbers of the entries of {main} "
            "(restore both files together, or delete both and run --ortperf-update)"
        )
    raw = _document(text, path).get("raw", {})
    if not isinstance(raw, Mapping) or not all(
        isinstance(versions, Mapping)
        and all(isinstance(data, Mapping) for data in versions.values())
        for versions in raw.values()
    ):
        raise BaselineError(f"{path}: 'raw' must map entry keys to {{digest: {{field: [...]}}}}")
    return {k: {d: dict(data) for d, data in v.items()} for k, v in raw.items()}


def _with_raw(
    entry: Mapping[str, Any], key: str, raw: RawVersions, path: Path, main: Path
) -> dict[str, Any]:
    """``entry`` with the raw numbers its ``raw`` digest names in the samples file."""
    digest = entry[RAW_REF]
    data = raw.get(key, {}).get(digest) if isinstance(digest, str) else None
    if data is None:
        raise BaselineError(
            f"{path}: entry {key!r}: no raw numbers for digest {digest!r} that {main} names "
            "(restore both files together, or delete both and run --ortperf-update)"
        )
    unknown = sorted(set(data) - set(RAW_FIELDS))
    if unknown:
        raise BaselineError(f"{path}: entry {key!r}: field {unknown[0]!r} is not a raw field")
    try:
        matches = _digest(data) == digest
    except (TypeError, ValueError):
        matches = False
    if not matches:
        raise BaselineError(
            f"{path}: entry {key!r}: raw numbers do not match their digest {digest!r} "
            "(edited by hand?)"
        )
    return {**{k: v for k, v in entry.items() if k != RAW_REF}, **data}


def parse_baseline(text: str, path: Path, samples_text: str | None = None) -> Baseline:
    """Parse and validate the text of a baseline file and of its samples file (``None``:
    there is none); ``path`` is used in messages. The entries hold their raw numbers."""
    data = _document(text, path)
    schema = data["schema"]
    entries = data.get("entries", {})
    if not isinstance(entries, Mapping):
        raise BaselineError(f"{path}: 'entries' must be an object")
    raw: RawVersions | None = None
    merged: dict[str, Any] = {}
    for key, entry in entries.items():
        if schema >= 3 and isinstance(entry, Mapping) and RAW_REF in entry:
            if raw is None:
                raw = _parse_samples(samples_text, samples_path(path), path)
            entry = _with_raw(entry, key, raw, samples_path(path), path)
        _check_entry(path, key, entry)
        merged[key] = entry
    return Baseline(path=path, schema=schema, entries=merged)


def _read_text(path: Path) -> str | None:
    """The text of ``path``; None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read: {exc}") from exc


def load_baseline(path: Path) -> Baseline:
    """Read a baseline file; a missing file gives an empty baseline.

    Raises :class:`BaselineError` naming the file (and line:column of a JSON syntax error,
    or the entry and field of an invalid entry, or a newer schema).
    """
    path = Path(path)
    text = _read_text(path)
    if text is None:
        return Baseline(path=path)
    return parse_baseline(text, path, _read_text(samples_path(path)))


# --------------------------------------------------------------------------- writing


def _referenced(path: Path) -> RawVersions:
    """The raw versions the baseline file on disk names (none where it cannot be read)."""
    try:
        text = _read_text(path)
        if text is None:
            return {}
        entries = _document(text, path).get("entries")
        raw = _parse_samples(_read_text(samples_path(path)), samples_path(path), path)
    except BaselineError:
        return {}
    if not isinstance(entries, Mapping):
        return {}
    kept: RawVersions = {}
    for key, entry in entries.items():
        digest = entry.get(RAW_REF) if isinstance(entry, Mapping) else None
        if isinstance(digest, str) and digest in raw.get(key, {}):
            kept.setdefault(key, {})[digest] = raw[key][digest]
    return kept


def write_baseline(path: Path, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Write ``entries`` atomically to the baseline file and its samples file; with no
    entries, delete both (and an empty ``__ortperf__`` directory).

    The samples file is written first holding the raw numbers of both the old and the new
    entries, then the baseline file, then the samples file again without the old ones: a
    failure or a kill at any point leaves the old or the new baseline file, each with its
    raw numbers (a version no file names any more goes with the next write). Call it
    under :func:`baseline_lock`."""
    path = Path(path)
    samples = samples_path(path)
    if not entries:
        for stale in (path, samples):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # only succeeds when empty
        return
    summaries, raw = split_entries(entries)  # serialize first: a failure here touches nothing
    text = _encode({"schema": SCHEMA_VERSION, "entries": summaries}, 0) + "\n"
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    both = _referenced(path)
    for key, versions in raw.items():
        both.setdefault(key, {}).update(versions)
    if raw:
        write_atomic(samples, dumps_samples(both), mode=mode)
    write_atomic(path, text, mode=mode)
    if not raw:
        with contextlib.suppress(FileNotFoundError):
            samples.unlink()
    elif both != raw:
        write_atomic(samples, dumps_samples(raw), mode=mode)


# --------------------------------------------------------------------------- entries


def _plain(value: Any) -> Any:
    """An environment value as the file keeps it: lists (ISA flags) as one string."""
    return " ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value


def _runs(record_dict: Mapping[str, Any], n: int) -> dict[str, Any]:
    """``runs`` of an entry: the record's run sizes when it took several."""
    sizes = [int(v) for v in record_dict.get("runs") or ()]
    return {"runs": sizes} if len(sizes) > 1 and sum(sizes) == n else {}


def _session_settings(session: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if session is None:
        return None
    return {k: session[k] for k in SESSION_KEYS if k in session}


def entry_from_record(
    record_dict: Mapping[str, Any],
    environment: Mapping[str, Any],
    *,
    updated: str | None = None,
) -> dict[str, Any]:
    """The baseline entry for a record (``Comparison.to_dict()`` / ``LatencyResult.to_dict()``)
    measured in ``environment`` (``env.collect_environment()``); ``updated`` defaults to
    today's date. Raises ValueError for smoke records and unknown kinds."""
    kind = record_dict.get("kind")
    if kind not in KINDS:
        raise ValueError(f"cannot store a record of kind {kind!r}")
    if not record_dict.get("measured", False):
        raise ValueError("smoke records (measured=False) are not stored in baselines")
    if kind == "memory":
        memory = memory_entry(record_dict, environment, updated=updated)
        plain = {k: _plain(environment.get(k)) for k in ENVIRONMENT_KEYS}
        return round_floats({**memory, "environment": plain})  # type: ignore[no-any-return]
    try:
        entry: dict[str, Any] = {
            "kind": kind,
            "test": str(record_dict["test"]),
            "name": str(record_dict["name"]),
            "api": str(record_dict["api"]),
            "environment": {k: _plain(environment.get(k)) for k in ENVIRONMENT_KEYS},
            "updated": updated or datetime.date.today().isoformat(),
        }
        if kind == "compare":
            arms = {role: record_dict[role] for role in ROLES}
            ratios = [float(x) for x in record_dict["block_ratios"]]
            entry.update(
                ratio=float(record_dict["ratio"]),
                low=float(record_dict["low"]),
                high=float(record_dict["high"]),
                confidence=float(record_dict["confidence"]),
                n=len(ratios),
                block_ratios=ratios,
                **_runs(record_dict, len(ratios)),
                medians={role: median(arm["samples"]) for role, arm in arms.items()},
                op_histograms=op_histograms(record_dict),
                **_placements_field(record_dict),
                sessions={
                    role: _session_settings(arm.get("session")) for role, arm in arms.items()
                },
            )
        else:
            samples = [float(x) for x in record_dict["samples"]]
            entry.update(
                median=median(samples),
                n=len(samples),
                samples=samples,
                calls_per_block=int(record_dict["calls_per_block"]),
                session=_session_settings(record_dict.get("session")),
                mode="absolute",
            )
            control = record_dict.get("control")
            if control:
                ratios = [float(x) for x in record_dict["block_ratios"]]
                entry.update(
                    mode="normalized",
                    block_ratios=ratios,
                    **_runs(record_dict, len(ratios)),
                    control={"model": str(control["name"]), "median": median(control["samples"])},
                )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"record of kind {kind!r} lacks or mangles field {exc}") from exc
    return round_floats(entry)  # type: ignore[no-any-return]


def op_histograms(record_dict: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``{role: {op type: count}}`` of a compare record (empty dicts where not recorded)."""
    out: dict[str, dict[str, int]] = {}
    for role in ROLES:
        session = (record_dict.get(role) or {}).get("session") or {}
        hist = session.get("op_histogram") or {}
        out[role] = {str(k): int(v) for k, v in sorted(hist.items())}
    return out


def placements(record_or_entry: Mapping[str, Any]) -> dict[str, Placement]:
    """``{role: placement}`` of a compare record (its sessions' ``placement``) or of a
    baseline entry (its ``placements``); roles without one are left out."""
    stored = record_or_entry.get("placements")
    out: dict[str, Placement] = {}
    for role in ROLES:
        if isinstance(stored, Mapping):
            value = stored.get(role)
        else:
            value = ((record_or_entry.get(role) or {}).get("session") or {}).get("placement")
        placement = read_placement(value)
        if placement:
            out[role] = placement
    return out


def _placements_field(record_dict: Mapping[str, Any]) -> dict[str, Any]:
    found = placements(record_dict)
    if not found:
        return {}
    return {
        "placements": {
            role: {name: list(pair) for name, pair in sorted(p.items())}
            for role, p in found.items()
        }
    }


def _structure(entry: Mapping[str, Any], record_dict: Mapping[str, Any]) -> Verdict:
    """The structure verdict: op histograms, then placement (where both sides have one)."""
    verdict = judge_structure(entry.get("op_histograms", {}), op_histograms(record_dict))
    return add_placement(verdict, placements(entry), placements(record_dict))


def summarize_entry(entry: Mapping[str, Any]) -> str:
    """A short description of an entry's headline number (``ratio 0.912``, ``median 1.2 ms``)."""
    if entry.get("kind") == "compare":
        return f"ratio {format_ratio(float(entry['ratio']))}"
    if entry.get("kind") == "memory":
        figures = entry.get("figures") or {}
        return ", ".join(f"{m} {format_bytes(float(v))}" for m, v in sorted(figures.items()))
    value = entry.get("median")
    if value is None:
        value = median(entry["samples"])
    return f"median {format_seconds(float(value))}"


def _describe_change(old: Mapping[str, Any], new_entry: Mapping[str, Any]) -> str:
    before, after = summarize_entry(old), summarize_entry(new_entry)
    if old.get("kind") == new_entry.get("kind") and before.split(" ")[0] == after.split(" ")[0]:
        label = before.split(" ")[0]
        text = f"{label} {before[len(label) + 1 :]} -> {after[len(label) + 1 :]}"
    else:
        text = f"{before} -> {after}"
    if old.get("kind") == new_entry.get("kind") == "compare":
        structure = add_placement(
            judge_structure(old.get("op_histograms", {}), new_entry.get("op_histograms", {})),
            placements(old),
            placements(new_entry),
        )
        if structure.n:
            text += f"; {structure.message}"
    return text


def plan_update(
    baseline: Baseline, recorded: Mapping[str, Mapping[str, Any]], ran_tests: set[str]
) -> UpdatePlan:
    """Entries after storing ``recorded`` (key -> entry from :func:`entry_from_record`).

    New keys are added, existing ones replaced (a line ``key: ratio 0.95 -> 0.91`` when
    something but the ``updated`` date differs), and entries of tests in ``ran_tests`` that
    did not record that measurement this time are removed. Pass in ``ran_tests`` only tests
    that ran to completion, or their entries are dropped.
    """
    entries: dict[str, Mapping[str, Any]] = dict(baseline.entries)
    added: list[str] = []
    changed: list[str] = []
    removed: list[str] = []
    lines: list[str] = []
    for key in sorted(recorded):
        entry = recorded[key]
        old = entries.get(key)
        entries[key] = entry
        if old is None:
            added.append(key)
            lines.append(f"{key}: new, {summarize_entry(entry)}")
        elif _without_date(old) != _without_date(entry):
            changed.append(key)
            lines.append(f"{key}: {_describe_change(old, entry)}")
    for key in sorted(baseline.entries):
        if key not in recorded and entry_test(key, baseline.entries[key]) in ran_tests:
            del entries[key]
            removed.append(key)
            lines.append(f"{key}: removed (no longer measured)")
    return UpdatePlan(dict(sorted(entries.items())), tuple(added), tuple(changed),
                      tuple(removed), tuple(lines))  # fmt: skip


def _without_date(entry: Mapping[str, Any]) -> dict[str, Any]:
    return round_floats({k: v for k, v in entry.items() if k != "updated"})  # type: ignore[no-any-return]


def unused_entries(baseline: Baseline, collected_test_ids: set[str]) -> list[str]:
    """Sorted keys of entries whose test is not among ``collected_test_ids``.

    Pass every test collected from the module (deselected ones included), not just the
    ones that ran, or entries of deselected tests look unused.
    """
    return sorted(
        key for key, entry in baseline.entries.items()
        if entry_test(key, entry) not in collected_test_ids
    )  # fmt: skip


def prune_unused(baseline: Baseline, existing_test_ids: set[str]) -> UpdatePlan:
    """Entries without those whose test no longer exists."""
    gone = unused_entries(baseline, existing_test_ids)
    entries = {k: v for k, v in baseline.entries.items() if k not in gone}
    lines = tuple(f"{key}: removed (test no longer exists)" for key in gone)
    return UpdatePlan(dict(sorted(entries.items())), removed=tuple(gone), lines=lines)


@dataclass(frozen=True)
class BaselinePlan:
    """What the end of a run does to the baseline files: the ``writes`` (test module ->
    the file's new entries; an empty mapping deletes the file), lines for the terminal
    summary, and the files an update had to leave as they were (``failed``: their paths
    as the notes show them; the run fails)."""

    writes: Mapping[str, Mapping[str, Mapping[str, Any]]]
    notes: tuple[str, ...]
    failed: tuple[str, ...] = ()


def plan_baselines(
    baselines: Mapping[str, Baseline | BaselineError],
    records: Sequence[Mapping[str, Any]],
    environment: Mapping[str, Any],
    *,
    passed: Iterable[str],
    collected: Iterable[str],
    update: bool,
    partial: bool,
) -> BaselinePlan:
    """Decide, without any I/O, what a run does to its baseline files.

    ``baselines`` maps each test module (the path part of node ids) to its loaded file or
    the error loading it; ``records`` are the gated records (``to_dict`` form) of tests that
    passed; ``passed`` and ``collected`` are node ids (``collected`` before deselection);
    ``partial`` says whether only part of the suite was selected (-k, -m, node ids).

    Without ``update``: report unused entries (tests that no longer exist) unless the run
    is partial. With ``update``: write or refresh the entries of the tests that ran, remove
    entries they no longer record, and prune those of tests that no longer exist; a file
    that could not be read is never replaced (what it holds would be lost): it is named in
    ``failed``, with a note saying how to fix it.
    """
    recorded: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for payload in records:
        module, local = split_nodeid(str(payload["test"]))
        entry = entry_from_record(local_record(payload), environment)
        if payload.get(OP_SHARES):
            entry[OP_SHARES] = payload[OP_SHARES]
        recorded[module][entry_key(local, str(payload["name"]))] = entry
    ran = _by_module(passed)
    existing = _by_module(collected)

    writes: dict[str, Mapping[str, Mapping[str, Any]]] = {}
    notes: list[str] = []
    failed: list[str] = []
    for module in sorted(baselines):
        shown = str(baseline_path(Path(module)))
        loaded = baselines[module]
        if isinstance(loaded, BaselineError):
            if not update:
                notes.append(f"baseline NOT read: {loaded}")
                continue
            notes.append(
                f"baseline {shown} NOT updated, left as it was: {loaded}; "
                f"{loaded.remedy}, then run --ortperf-update again"
            )
            failed.append(shown)
            continue
        if not update:
            if not partial and module in existing:
                unused = unused_entries(loaded, existing[module])
                if unused:
                    notes.append(
                        f"{len(unused)} unused baseline entries in {shown} (tests that no "
                        f"longer exist; --ortperf-update prunes them): {some_keys(unused)}"
                    )
            continue
        plan = plan_update(loaded, recorded.get(module, {}), ran.get(module, set()))
        lines = list(plan.lines)
        entries = plan.entries
        if not partial and module in existing:
            pruned = prune_unused(Baseline(loaded.path, SCHEMA_VERSION, entries), existing[module])
            entries, lines = pruned.entries, lines + list(pruned.lines)
        if entries != loaded.entries:
            writes[module] = entries
            notes.append(f"baseline {shown} updated:")
            notes.extend(f"  {line}" for line in lines)
        else:
            notes.append(f"baseline {shown} unchanged")
    return BaselinePlan(writes, tuple(notes), tuple(failed))


def some_keys(keys: Sequence[str], shown: int = SHOWN_KEYS) -> str:
    """``a, b, c, d, e, ... and 17003 more``: the first ``shown`` keys and how many others."""
    head = ", ".join(keys[:shown])
    return head if len(keys) <= shown else f"{head}, ... and {len(keys) - shown} more"


def _by_module(nodeids: Iterable[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for nodeid in nodeids:
        module, local = split_nodeid(nodeid)
        out[module].add(local)
    return out


# --------------------------------------------------------------------------- updating a file


def lock_path(path: Path) -> Path:
    """``__ortperf__/.<module>.json.lock``: the lock of the baseline file ``path``. It
    exists only while an update holds it (or after a killed one, until the next update of
    that file, which takes it over and removes it)."""
    return path.parent / f".{path.name}.lock"


@contextlib.contextmanager
def baseline_lock(path: Path, *, timeout: float | None = None) -> Iterator[None]:
    """Hold the lock of the baseline file ``path`` (see :func:`pytest_ortperf.files.file_lock`).

    Inside, temp files that a killed writer left beside ``path`` are removed (no one else
    can be writing this file), and others' once they are stale. On the way out, a
    ``__ortperf__`` directory left empty (no baseline in it) is removed again. Raises
    :class:`~pytest_ortperf.files.LockTimeout` (an OSError) naming the lock file and
    ``path`` when another process holds it longer than ``timeout`` seconds (default
    :data:`LOCK_TIMEOUT_S`).
    """
    path = Path(path)
    wait = LOCK_TIMEOUT_S if timeout is None else timeout
    with file_lock(lock_path(path), timeout=wait, what=path):
        remove_stale_temps(path.parent, owned=(path.name, samples_path(path).name))
        yield
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only succeeds when empty


def update_baseline(
    path: Path,
    module: str,
    records: Sequence[Mapping[str, Any]],
    environment: Mapping[str, Any],
    *,
    passed: Iterable[str],
    collected: Iterable[str],
    partial: bool,
    timeout: float | None = None,
) -> BaselinePlan:
    """``--ortperf-update`` of the baseline file ``path`` of one test ``module``: under the
    file's lock, read it afresh (another process may have written it since this run read
    it), plan with :func:`plan_baselines` and write. So two runs updating different tests
    of one module both keep their entries, whichever writes first.

    Returns the plan (its notes say what changed, or why the file was left as it was: then
    ``failed`` names it). Raises OSError when the file cannot be written (the old one is
    kept) or the lock not taken within ``timeout`` seconds (default :data:`LOCK_TIMEOUT_S`).
    """
    path = Path(path)
    with baseline_lock(path, timeout=timeout):
        loaded: Baseline | BaselineError
        try:
            loaded = load_baseline(path)
        except BaselineError as exc:
            loaded = exc
        plan = plan_baselines(
            {module: loaded},
            records,
            environment,
            passed=passed,
            collected=collected,
            update=True,
            partial=partial,
        )
        for entries in plan.writes.values():
            write_baseline(path, entries)
    return plan


# --------------------------------------------------------------------------- judging


def ratio_baseline_of(entry: Mapping[str, Any] | None) -> RatioBaseline | None:
    """What a compare entry, or a normalized latency entry, knows about its ratio."""
    if entry is None or not entry.get("block_ratios"):
        return None
    if entry.get("kind") == "latency" and entry.get("mode") != "normalized":
        return None
    return ratio_baseline(entry["block_ratios"], entry.get("runs"))


def _fingerprint_verdict(
    metric: str,
    pairs: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]],
    keys: Sequence[str],
    ignore: Collection[str],
    current: float,
    baseline: float,
    n: int,
) -> tuple[Verdict | None, list[str]]:
    """``not_comparable`` naming every fingerprint key that differs between the baseline's
    and the current side of ``pairs`` (None when all agree), and the keys an older baseline
    could not be checked on."""
    differing: list[str] = []
    missing: list[str] = []
    for old, now in pairs:
        for diff in differences(old, now, keys=keys, allowed=ignore):
            if diff.describe() not in differing:
                differing.append(diff.describe())
        missing += [k for k in unchecked(old, keys) if k not in missing and k not in ignore]
    if differing:
        return not_comparable(metric, current, baseline, differing, n), missing
    return None, missing


def _with_unchecked(verdict: Verdict, missing: Sequence[str]) -> Verdict:
    if not missing:
        return verdict
    note = (
        f"; baseline predates fingerprint keys {', '.join(missing)}: refresh it with "
        "--ortperf-update to check them"
    )
    return dataclasses.replace(verdict, message=verdict.message + note)


def judge_entry(
    entry: Mapping[str, Any] | None,
    record_dict: Mapping[str, Any],
    environment: Mapping[str, Any],
    *,
    threshold: float = 0.05,
    latency_threshold: float | None = None,
    alpha: float = 0.01,
    fingerprint_ignore: Collection[str] = (),
    earlier_medians: Sequence[float] | None = None,
) -> list[Verdict]:
    """Verdicts of one measured record against its baseline entry (None: not stored yet).

    compare -> ``[structure, ratio]``; latency -> ``[latency]``: normalized (the record
    carries control blocks) against the entry's target/control ratio, absolute against
    ``earlier_medians`` (per-run medians of earlier runs on this fingerprint; None: no
    store). A fingerprint key of :data:`RATIO_KEYS` (normalized latencies too) or
    :data:`LATENCY_KEYS` (absolute) that differs, and is not in ``fingerprint_ignore``,
    makes the timing verdict ``not_comparable``. ``latency_threshold`` defaults to
    ``threshold``. Timing verdicts carry :func:`measurement_warnings`.
    """
    kind = record_dict.get("kind")
    if kind == "memory":  # a tolerance on bytes: no timing warnings apply
        return judge_memory_entry(entry, record_dict, environment, threshold=threshold)
    lat_thr = threshold if latency_threshold is None else latency_threshold
    if entry is not None and entry.get("api") not in (None, record_dict.get("api")):
        # A figure through one run API says nothing about a baseline taken through another.
        metric = "ratio" if kind == "compare" else "latency"
        values = record_dict.get("block_ratios") or record_dict.get("samples") or [math.nan]
        return [
            not_comparable(
                metric, median(values), float(entry.get("ratio") or entry.get("median") or 0),
                [f"api ({entry.get('api')} -> {record_dict.get('api')})"], len(values),
            )
        ]  # fmt: skip
    if kind == "compare":
        verdicts = _judge_compare(entry, record_dict, environment, threshold, alpha,
                                  fingerprint_ignore)  # fmt: skip
    elif kind == "latency":
        verdicts = [
            _judge_latency(entry, record_dict, environment, lat_thr, alpha, fingerprint_ignore,
                           earlier_medians)
        ]  # fmt: skip
    else:
        raise ValueError(f"unknown record kind {kind!r}")
    notes, trusted, busy = measurement_warnings(record_dict)
    if busy and record_dict.get("control") and trusted:
        # A normalized latency on a busy machine cannot tell contention that hits the model
        # harder than the control from a slower model (a ratio of two variants of one
        # model can): near the threshold, that is not a regression to fail on.
        notes = [
            *notes,
            "a busy machine may slow the model more than its control (normalized latency)",
        ]
        trusted = False
    return [_with_warnings(v, notes, trusted) for v in verdicts]


PREEMPTED_WARNING = 0.25
"""Share of preempted blocks from which a verdict says so."""
PREEMPTED_BUSY = 0.10
"""Share of preempted blocks from which the machine counts as busy."""


def measurement_warnings(record_dict: Mapping[str, Any]) -> tuple[list[str], bool, bool]:
    """What a verdict should say about how its measurement went (pyperf-style warnings);
    whether the measurement can be trusted to fail a test near its threshold (not when
    every block was preempted and kept for want of clean ones); and whether the machine
    was busy while it was measured (:data:`PREEMPTED_BUSY` of the blocks preempted).

    The load average is not read: a lagging one-minute mean, it called quiet runs that
    followed busy ones busy (issue 22), and preempted blocks are measured in the run."""
    arm = record_dict.get("candidate") if record_dict.get("kind") == "compare" else record_dict
    arm = arm or {}
    notes = []
    preempted = int(arm.get("preempted") or 0)
    kept = bool(arm.get("preempted_kept"))
    blocks = len(arm.get("samples") or ()) + (0 if kept else preempted)
    if kept:
        notes.append(
            f"every block was preempted ({preempted}): more busy processes than cores; the "
            "figure includes waiting time and cannot fail the test"
        )
    elif blocks and preempted / blocks >= PREEMPTED_WARNING:
        notes.append(
            f"{preempted / blocks:.0%} of blocks were preempted and left out: more busy "
            "processes than cores"
        )
    busy = kept or bool(blocks and preempted / blocks >= PREEMPTED_BUSY)
    return notes, not kept, busy


def _with_warnings(verdict: Verdict, notes: Sequence[str], trusted: bool) -> Verdict:
    """``verdict`` with the measurement's warnings; an untrusted measurement's regression
    becomes ``unstable``, unless it is gross (:func:`~pytest_ortperf.gating.rules.downgrade`)."""
    if verdict.metric == "structure" or not notes:
        return verdict
    if trusted:
        return dataclasses.replace(verdict, message=verdict.message + "; " + "; ".join(notes))
    return downgrade(verdict, "; ".join(notes))


def _judge_compare(
    entry: Mapping[str, Any] | None,
    record_dict: Mapping[str, Any],
    environment: Mapping[str, Any],
    threshold: float,
    alpha: float,
    ignore: Collection[str],
) -> list[Verdict]:
    ratios = [float(x) for x in record_dict["block_ratios"]]
    current = float(record_dict.get("ratio") or median(ratios))
    baseline = ratio_baseline_of(entry)
    if entry is None or entry.get("kind") != "compare" or baseline is None:
        return [judge_structure({}, op_histograms(record_dict)), new("ratio", current, len(ratios))]
    structure = _structure(entry, record_dict)
    sessions = entry.get("sessions") or {}
    pairs = [
        (
            fingerprint_of(entry.get("environment") or {}, sessions.get(role) or {}),
            fingerprint_of(environment, (record_dict.get(role) or {}).get("session") or {}),
        )
        for role in ROLES
    ]
    refused, missing = _fingerprint_verdict(
        "ratio", pairs, RATIO_KEYS, ignore, current, baseline.ratio, len(ratios)
    )
    if refused is not None:
        return [structure, refused]
    verdict = judge_ratio(
        ratios, baseline, threshold=threshold, alpha=alpha, runs=record_dict.get("runs")
    )
    return [structure, _with_unchecked(verdict, missing)]


def _judge_latency(
    entry: Mapping[str, Any] | None,
    record_dict: Mapping[str, Any],
    environment: Mapping[str, Any],
    threshold: float,
    alpha: float,
    ignore: Collection[str],
    earlier_medians: Sequence[float] | None,
) -> Verdict:
    samples = [float(x) for x in record_dict["samples"]]
    current = median(samples)
    control = record_dict.get("control")
    now = fingerprint_of(environment, record_dict.get("session") or {})
    if not control:  # absolute: judged against earlier runs, never against one run's blocks
        return judge_against_runs(current, earlier_medians or (), threshold=threshold, alpha=alpha)
    baseline = ratio_baseline_of(entry)
    if entry is None or entry.get("kind") != "latency":
        return new("latency", current, len(samples))
    if baseline is None:
        return dataclasses.replace(
            new("latency", current, len(samples)),
            message=f"latency {format_seconds(current)}: the baseline has no control "
            "measurement (taken before normalized latencies): refresh it with --ortperf-update",
        )
    stored = float(entry.get("median") or median(entry["samples"]))
    old = fingerprint_of(entry.get("environment") or {}, entry.get("session") or {})
    refused, missing = _fingerprint_verdict(
        "latency", [(old, now)], RATIO_KEYS, ignore, current, stored, len(samples)
    )
    if refused is not None:
        return refused
    ratios = [float(x) for x in record_dict["block_ratios"]]
    verdict = judge_ratio(
        ratios, baseline, threshold=threshold, alpha=alpha, metric="latency",
        shown_baseline=stored, runs=record_dict.get("runs"),
    )  # fmt: skip
    drift = median(control["samples"]) / float(entry["control"]["median"]) - 1.0
    if verdict.outcome is Outcome.REGRESSED and abs(drift) > CONTROL_DRIFT:
        verdict = downgrade(
            verdict,
            f"the control workload itself ran {format_change(drift)} against the "
            "baseline's: the machine is busier or different now, and contention need not "
            "hit the model and the control alike; re-run on a quieter runner",
        )
    return _with_unchecked(verdict, missing)
