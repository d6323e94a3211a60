"""Records of measured samples: one arm's latency, two arms' comparison, runs merged.

Every :class:`~pytest_ortperf.results.LatencyResult` of timed samples is built by
:func:`latency_result`, whether the session ran here or in a worker
(:func:`pytest_ortperf.remote.interleave.arm_result`); every
:class:`~pytest_ortperf.results.Comparison` of two arms by :func:`comparison`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

from pytest_ortperf.measuring.engine import Samples
from pytest_ortperf.results import Comparison, LatencyResult, OutputDiff, SessionInfo
from pytest_ortperf.stats import paired_ratio, ratio_of_blocks

R = TypeVar("R", LatencyResult, Comparison)


def latency_result(
    test: str, name: str, api: str, samples: Samples, session: SessionInfo, measured: bool
) -> LatencyResult:
    """The record of one target's timed ``samples`` (``session``: the session's record)."""
    return LatencyResult(
        test=test,
        name=name,
        api=api,
        samples=samples.values,
        calls_per_block=samples.calls_per_block,
        measured=measured,
        session=session,
        preempted=samples.preempted,
        preempted_kept=samples.preempted_kept,
    )


def comparison(
    reference: LatencyResult,
    candidate: LatencyResult,
    name: str,
    confidence: float,
    diffs: tuple[OutputDiff, ...] = (),
    runs: tuple[int, ...] = (),
) -> Comparison:
    """The comparison of two arms measured side by side (their samples pair up by index):
    the Hodges-Lehmann ratio of the block ratios with its interval at ``confidence``."""
    ratios = ratio_of_blocks(reference.samples, candidate.samples)
    estimate = paired_ratio(ratios, confidence)
    return Comparison(
        test=reference.test,
        name=name,
        api=reference.api,
        reference=reference,
        candidate=candidate,
        block_ratios=tuple(ratios),
        ratio=estimate.ratio,
        low=estimate.low,
        high=estimate.high,
        confidence=confidence,
        measured=reference.measured,
        output_diffs=diffs,
        runs=runs,
    )


def _merge_latency(parts: Sequence[LatencyResult]) -> LatencyResult:
    first = parts[0]
    controls = [p.control for p in parts if p.control is not None]
    return dataclasses.replace(
        first,
        samples=tuple(x for p in parts for x in p.samples),
        preempted=sum(p.preempted for p in parts),
        preempted_kept=any(p.preempted_kept for p in parts),
        control=_merge_latency(controls) if len(controls) == len(parts) else None,
        runs=tuple(len(p.samples) for p in parts),
    )


def merge_runs(parts: Sequence[R]) -> R:
    """One record of several independent runs of the same measurement, their blocks in
    order and ``runs`` their sizes (a baseline's runs: see ``Recorder.baseline_runs``)."""
    first = parts[0]
    if isinstance(first, Comparison):
        arms = [p for p in parts if isinstance(p, Comparison)]
        merged = comparison(
            _merge_latency([p.reference for p in arms]),
            _merge_latency([p.candidate for p in arms]),
            first.name, first.confidence, first.output_diffs,
            tuple(len(p.block_ratios) for p in arms),
        )  # fmt: skip
        return merged  # type: ignore[return-value]
    return _merge_latency([p for p in parts if isinstance(p, LatencyResult)])  # type: ignore[return-value]


def run_sizes(record: LatencyResult | Comparison) -> tuple[int, ...]:
    """The sizes of a record's runs: its ``runs``, else one run of all its blocks."""
    if record.runs:
        return record.runs
    return (len(record.block_ratios if isinstance(record, Comparison) else record.samples),)


def merge_processes(parts: Sequence[R]) -> R:
    """One record of the same measurement taken in several processes, each of them one
    record of its own runs (``--ortperf-update-processes``): every run in order, ``runs``
    the sizes of all of them."""
    runs = tuple(n for p in parts for n in run_sizes(p))
    return dataclasses.replace(merge_runs(parts), runs=runs)
