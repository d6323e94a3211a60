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
between-run variance; absent in schema 1: one run), ``processes`` (runs per process, when
``--ortperf-update-processes`` took them in several), ``medians`` (seconds per call per role),
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
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ortperf.files import file_lock, remove_stale_temps, write_atomic
from pytest_ortperf.gating.baseline_entries import (
    entry_from_record,
    entry_key,
    entry_test,
    local_record,
    placements,
    round_floats,
    split_nodeid,
    summarize_entry,
)
from pytest_ortperf.gating.baseline_schema import entry_problem, is_scalar
from pytest_ortperf.gating.placement import add_placement
from pytest_ortperf.gating.structure import judge_structure
from pytest_ortperf.results import OP_SHARES

SCHEMA_VERSION = 3
RAW_FIELDS = ("samples", "block_ratios", "beside_ratios")
"""Entry fields of raw numbers, kept in the samples file (schema 3); any other field stays
in the entry."""
RAW_REF = "raw"
"""The entry field naming the digest of its raw numbers in the samples file."""
RAW_PER_LINE = 8
"""Numbers per line in the samples file (lines stay under 120 characters)."""
DIRNAME = "__ortperf__"
LOCK_TIMEOUT_S = 60.0
"""How long an update waits for another process's update of the same file."""
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


# --------------------------------------------------------------------------- formatting


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
        if all(is_scalar(v) for v in value):
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
        if not isinstance(entry, Mapping):
            raise BaselineError(f"{path}: entry {key!r} is not an object")
        problem = entry_problem(entry)
        if problem is not None:
            raise BaselineError(f"{path}: entry {key!r}: {problem}")
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
