"""Placement: which execution provider each node ran on, as part of the structure metric.

A placement maps a node name to its ``(op type, provider)``. It comes from onnxruntime's
node assignment (:func:`pytest_ortperf.profiling.ep_assignment.session_placement`) or from a
profile (:meth:`Profile.placement`); a
baseline entry keeps it per role as ``placements: {role: {node: [op type, provider]}}``.

Judged exactly, like the op-type histogram, by :func:`judge_placement`:

- a node that ran on another provider than in the baseline fails the gate (``fell back to
  CPU`` when it moved from a device provider to ``CPUExecutionProvider``);
- a new Memcpy node (``MemcpyFromHost``/``MemcpyToHost``: data now moves between devices)
  fails the gate.

Nodes added or removed otherwise are the op histogram's business. A role without a
placement on either side is not judged (baselines taken before placement was recorded).
Everything here is pure: no I/O, no onnxruntime.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_ortperf.results import Outcome, Verdict

__all__ = [
    "CPU",
    "MEMCPY_OPS",
    "Placement",
    "add_placement",
    "judge_placement",
    "placement_to_json",
    "read_placement",
]

Placement = Mapping[str, tuple[str, str]]
"""``{node name: (op type, provider)}``."""

CPU = "CPUExecutionProvider"
MEMCPY_OPS = frozenset({"MemcpyFromHost", "MemcpyToHost"})
SHOWN = 10
"""How many changed nodes a message names before it says ``... and N more``."""


def placement_to_json(placement: Placement) -> dict[str, list[str]]:
    """The form records and baseline files keep: ``{node: [op type, provider]}``, sorted."""
    return {name: [op, provider] for name, (op, provider) in sorted(placement.items())}


def read_placement(value: Any) -> dict[str, tuple[str, str]] | None:
    """A placement from its JSON form; None unless ``value`` is a well-formed one."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, tuple[str, str]] = {}
    for name, pair in value.items():
        if (
            not isinstance(name, str)
            or not isinstance(pair, Sequence)
            or isinstance(pair, str)
            or len(pair) != 2
            or not all(isinstance(p, str) for p in pair)
        ):
            return None
        out[name] = (pair[0], pair[1])
    return out


def _role_changes(base: Placement, current: Placement) -> list[str]:
    changes = []
    for name in sorted(set(base) & set(current)):
        (op, old), (_, new) = base[name], current[name]
        if old != new:
            what = "fell back to CPU" if new == CPU else "moved"
            changes.append(f"node {name!r} ({op}) {what}: {old} -> {new}")
    for name in sorted(set(current) - set(base)):
        op, provider = current[name]
        if op in MEMCPY_OPS:
            changes.append(f"new {op} node {name!r} on {provider}")
    return changes


def judge_placement(
    baseline: Mapping[str, Placement], current: Mapping[str, Placement]
) -> tuple[list[str], list[str], int]:
    """Compare placements per role: ``(message parts, roles compared, nodes changed)``.

    One part per role with changes: ``candidate placement changed: node 'mm' (MatMul) fell
    back to CPU: CUDAExecutionProvider -> CPUExecutionProvider, new MemcpyToHost node ...``.
    """
    parts: list[str] = []
    compared: list[str] = []
    moved = 0
    for role in sorted(set(baseline) & set(current)):
        b, c = baseline[role], current[role]
        if not b or not c:
            continue
        compared.append(role)
        changes = _role_changes(b, c)
        if changes:
            moved += len(changes)
            shown = ", ".join(changes[:SHOWN])
            if len(changes) > SHOWN:
                shown += f", ... and {len(changes) - SHOWN} more"
            parts.append(f"{role} placement changed: {shown}")
    return parts, compared, moved


def _summary(placement: Placement) -> str:
    counts: dict[str, int] = {}
    for _, provider in placement.values():
        counts[provider] = counts.get(provider, 0) + 1
    return ", ".join(f"{n} on {p}" for p, n in sorted(counts.items()))


def add_placement(
    structure: Verdict, baseline: Mapping[str, Placement], current: Mapping[str, Placement]
) -> Verdict:
    """The structure verdict with placement judged too: regressed (whatever the histograms
    said) when a node changed provider or a Memcpy node appeared, the nodes named."""
    parts, compared, moved = judge_placement(baseline, current)
    if not compared:
        return structure
    if parts:
        if structure.outcome is Outcome.REGRESSED:
            message = structure.message + "; " + "; ".join(parts)
        else:
            message = "; ".join(parts)
        return dataclasses.replace(
            structure, outcome=Outcome.REGRESSED, n=structure.n + moved, message=message
        )
    sizes = ", ".join(f"{role}: {_summary(current[role])}" for role in compared)
    return dataclasses.replace(
        structure, message=f"{structure.message}; placement unchanged ({sizes})"
    )
