"""Judging a measured record against its baseline entry (:func:`judge_entry`): the
structure and ratio of a comparison, a normalized latency against its entry's ratio, an
absolute one against earlier runs, and the warnings of a measurement that a busy machine
disturbed. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from pytest_ortperf.gating.baseline_entries import ROLES, op_histograms, structure_verdict
from pytest_ortperf.gating.fingerprint import RATIO_KEYS, differences, fingerprint_of, unchecked
from pytest_ortperf.gating.history import judge_against_runs
from pytest_ortperf.gating.memory_rule import judge_memory_entry
from pytest_ortperf.gating.rules import (
    RatioBaseline,
    downgrade,
    judge_ratio,
    new,
    not_comparable,
    ratio_baseline,
)
from pytest_ortperf.gating.settings import DEFAULT_ALPHA
from pytest_ortperf.gating.structure import judge_structure
from pytest_ortperf.results import PROCESSES, Outcome, Verdict
from pytest_ortperf.stats import median
from pytest_ortperf.units import format_change, format_seconds

CONTROL_DRIFT = 0.10
"""How far the control workload's own median may move from the baseline's before a
regressed normalized latency is reported ``unstable`` instead: normalizing cancels a
machine-wide slowdown, not contention that hits the model harder than the control."""


def ratio_baseline_of(entry: Mapping[str, Any] | None) -> RatioBaseline | None:
    """What a compare entry, or a normalized latency entry, knows about its ratio."""
    if entry is None or not entry.get("block_ratios"):
        return None
    if entry.get("kind") == "latency" and entry.get("mode") != "normalized":
        return None
    return ratio_baseline(entry["block_ratios"], entry.get("runs"), entry.get(PROCESSES))


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
    alpha: float = DEFAULT_ALPHA,
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
    structure = structure_verdict(entry, record_dict)
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
