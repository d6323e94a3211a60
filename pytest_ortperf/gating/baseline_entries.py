"""Baseline entries from records: the key of an entry, what a ``compare``, ``latency`` or
``memory`` entry holds (:func:`entry_from_record`, floats to 6 significant digits), and
the one-line summaries an update prints. Pure: no I/O.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from pytest_ortperf.gating.baseline_schema import BESIDE, BESIDE_RATIOS, KINDS, RECIPE
from pytest_ortperf.gating.memory_rule import memory_entry
from pytest_ortperf.gating.placement import Placement, add_placement, read_placement
from pytest_ortperf.gating.structure import judge_structure
from pytest_ortperf.results import PROCESSES, Verdict
from pytest_ortperf.stats import median
from pytest_ortperf.units import format_bytes, format_ratio, format_seconds

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
SESSION_KEYS = ("model", "providers", "optimization", "threads", "spinning")


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


def _plain(value: Any) -> Any:
    """An environment value as the file keeps it: lists (ISA flags) as one string."""
    return " ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value


def _runs(record_dict: Mapping[str, Any], n: int) -> dict[str, Any]:
    """``runs`` of an entry: the record's run sizes when it took several, and
    ``processes`` (runs per process) when they were taken in several processes."""
    sizes = [int(v) for v in record_dict.get("runs") or ()]
    if len(sizes) < 2 or sum(sizes) != n:
        return {}
    processes = [int(v) for v in record_dict.get(PROCESSES) or ()]
    if len(processes) > 1 and sum(processes) == len(sizes):
        return {"runs": sizes, PROCESSES: processes}
    return {"runs": sizes}


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
    measured in ``environment`` (``machine.collect_environment()``); ``updated`` defaults to
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
    rounded: dict[str, Any] = round_floats(entry)
    if kind in ("latency", "compare"):  # to judge beside the baseline's (gating.beside)
        for key in (BESIDE, BESIDE_RATIOS):
            if record_dict.get(key):
                rounded[key] = round_floats(record_dict[key])
        if record_dict.get(RECIPE):  # as made: its digest covers its floats
            rounded[RECIPE] = record_dict[RECIPE]
    return rounded


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


def structure_verdict(entry: Mapping[str, Any], record_dict: Mapping[str, Any]) -> Verdict:
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
