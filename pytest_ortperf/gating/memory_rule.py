"""The memory rule: a tolerance, not a significance test.

Memory is far less noisy than time: the same model, shapes, settings and ORT version
allocate the same bytes from ORT's arena on every run, and a process's resident memory
moves by page-sized steps, not by a spread that a sample could estimate. So a memory
figure is judged against its baseline value with a tolerance:

    regressed  when  current > baseline + allowance
    improved   when  current < baseline - allowance
    ok         otherwise,   allowance = max(threshold * baseline, floor)

``threshold`` is the gate's (5% by default); ``floor`` is per figure, so that small
figures do not fail on a page or an allocator rounding:

- ``memory.arena_peak``: ORT's own peak bytes in use during a run (the ``mem_in_use_peak``
  of a profile, ORT >= 1.32): weights held in the arena plus the run's activations; exact
  for a given model and ORT version. Floor :data:`ARENA_FLOOR` (64 KiB).
- ``memory.growth``: how far the process's peak RSS during the measured calls rose above
  its RSS just before them: what the calls themselves allocated outside what was already
  held (a first run's arena, per-run buffers that are not reused). Floor
  :data:`GROWTH_FLOOR` (16 MiB: the kernel's and Python's allocators move RSS in steps).

The process's absolute peak RSS is reported but not gated: it counts everything the test
process loaded before (other tests, imports), which depends on what else ran.

A figure the baseline lacks, or that this run could not measure (no ``mem_*`` keys on an
older ORT), is ``new`` or left out; a baseline measured through another API or on another
ORT version is ``not_comparable`` (arena sizes differ between versions). Pure: no I/O.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from pytest_ortperf.gating.rules import new, not_comparable
from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.units import format_bytes, format_change

ARENA_FLOOR = 64 * 2**10
"""Smallest allowance of ``memory.arena_peak`` (bytes)."""
GROWTH_FLOOR = 16 * 2**20
"""Smallest allowance of ``memory.growth`` (bytes)."""
FLOORS = {"memory.arena_peak": ARENA_FLOOR, "memory.growth": GROWTH_FLOOR}
"""The gated memory figures and their floors."""
ARENA_KEY = "in_use_peak_max"
"""The key of ``MemoryResult.arena`` that ``memory.arena_peak`` reads."""
KIND = "memory"


def memory_figures(record: Mapping[str, Any]) -> dict[str, float]:
    """The gated figures of a memory record (``MemoryResult.to_dict()`` form), in bytes:
    ``memory.growth`` always, ``memory.arena_peak`` where ORT reported it."""
    peaks = [int(x) for x in record.get("peak_bytes") or ()]
    base = int(record.get("baseline_bytes") or 0)
    figures = {"memory.growth": float(max((max(0, p - base) for p in peaks), default=0))}
    arena = record.get("arena") or {}
    if arena.get(ARENA_KEY) is not None:
        figures["memory.arena_peak"] = float(arena[ARENA_KEY])
    return figures


def judge_memory(
    metric: str, current: float, baseline: float, *, threshold: float, floor: float
) -> Verdict:
    """One memory figure against its baseline value (bytes) with the tolerance
    ``max(threshold * baseline, floor)``. ``low`` and ``high`` equal the change: a memory
    figure has no sampling spread to put an interval on."""
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be a non-negative fraction, got {threshold}")
    if not (math.isfinite(current) and math.isfinite(baseline)) or current < 0 or baseline < 0:
        raise ValueError(f"{metric}: sizes must be finite and >= 0, got {current}, {baseline}")
    allowance = max(threshold * baseline, floor)
    diff = current - baseline
    change = diff / baseline if baseline > 0 else (0.0 if diff == 0 else math.inf)
    if diff > allowance:
        outcome = Outcome.REGRESSED
    elif diff < -allowance:
        outcome = Outcome.IMPROVED
    else:
        outcome = Outcome.OK
    sign = "+" if diff >= 0 else "-"
    message = (
        f"{metric} {format_bytes(current)} vs baseline {format_bytes(baseline)}: "
        f"{sign}{format_bytes(abs(diff))} ({format_change(change)}), tolerance "
        f"{format_bytes(allowance)} (max of {threshold:.0%} and {format_bytes(floor)}) "
        f"-> {outcome.value}"
    )
    return Verdict(
        metric, outcome, baseline, current, change, change, change, threshold, 0.0, None, 1, message
    )


def memory_entry(
    record: Mapping[str, Any], environment: Mapping[str, Any], *, updated: str | None = None
) -> dict[str, Any]:
    """The baseline entry of a measured memory record: ``kind``, ``test``, ``name``,
    ``api``, ``figures`` (``{metric: bytes}``), ``peak_bytes`` (the process peak, for
    reading only), ``method``, ``ort_version`` and ``updated``."""
    if not record.get("measured", False):
        raise ValueError("smoke records (measured=False) are not stored in baselines")
    return {
        "kind": KIND,
        "test": str(record["test"]),
        "name": str(record["name"]),
        "api": str(record["api"]),
        "figures": memory_figures(record),
        "peak_bytes": max((int(x) for x in record.get("peak_bytes") or ()), default=0),
        "method": str(record.get("method", "")),
        "ort_version": environment.get("ort_version"),
        "updated": updated or datetime.date.today().isoformat(),
    }


def check_memory_entry(entry: Mapping[str, Any]) -> str | None:
    """What is wrong with a memory baseline entry (None: nothing), for the file's check."""
    figures = entry.get("figures")
    if not isinstance(figures, Mapping) or not figures:
        return "field 'figures' must map memory metrics to byte counts"
    for metric, value in figures.items():
        if metric not in FLOORS:
            return f"field 'figures' names unknown metric {metric!r}"
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            return f"field 'figures' gives {metric!r} {value!r}, not a byte count"
    return None


def judge_memory_entry(
    entry: Mapping[str, Any] | None,
    record: Mapping[str, Any],
    environment: Mapping[str, Any],
    *,
    threshold: float,
) -> list[Verdict]:
    """Verdicts of a memory record against its baseline entry (None: not stored yet)."""
    figures = memory_figures(record)
    if entry is None or entry.get("kind") != KIND:
        return [new(metric, value, 1) for metric, value in figures.items()]
    stored = entry.get("figures") or {}
    why = []
    if entry.get("api") not in (None, record.get("api")):
        why.append(f"api ({entry.get('api')} -> {record.get('api')})")
    if entry.get("ort_version") not in (None, environment.get("ort_version")):
        why.append(f"ort_version ({entry.get('ort_version')} -> {environment.get('ort_version')})")
    verdicts = []
    for metric, value in figures.items():
        if metric not in stored:
            verdicts.append(new(metric, value, 1))
        elif why:
            verdicts.append(not_comparable(metric, value, float(stored[metric]), why, 1))
        else:
            verdicts.append(
                judge_memory(
                    metric, value, float(stored[metric]), threshold=threshold, floor=FLOORS[metric]
                )
            )
    return verdicts
