"""Records with injected samples and a ``save`` shortcut for the store and CLI tests."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ortperf.measuring import records
from pytest_ortperf.results import (
    Comparison,
    LatencyResult,
    MemoryResult,
    OutputDiff,
    Record,
    SessionInfo,
)
from pytest_ortperf.store.write import save_run

SESSION = SessionInfo(
    model="model.onnx",
    providers=("CPUExecutionProvider",),
    optimization="all",
    threads=1,
    spinning=False,
    op_histogram=(("Add", 1), ("MatMul", 2)),
)

ENV: dict[str, Any] = {
    "ort_version": "1.32.0",
    "providers": ["CPUExecutionProvider"],
    "onnx_version": "1.17.0",
    "numpy_version": "2.0.0",
    "python_version": "3.11.7",
    "os": "Linux-test",
    "system": "Linux",
    "machine": "x86_64",
    "cpu_model": "Test CPU 3000",
    "logical_cores": 4,
    "memory_bytes": 16 << 30,
}
OTHER_ENV = {**ENV, "cpu_model": "Other CPU", "logical_cores": 64}
GIT = {"commit": "0123456789abcdef0123456789abcdef01234567", "branch": "main", "dirty": False}


SPREAD = (-0.35, 0.35, -0.25, 0.25, -0.15, 0.15, -0.07, 0.07, -0.02, 0.02)
"""Log-offsets symmetric about 0 (median and Hodges-Lehmann estimate both 0): times
``exp(offset)`` of a noisy measurement, from -30% to +42%."""


def tight(median: float, n: int) -> tuple[float, ...]:
    """``n`` samples within +-2% of ``median`` (its median exactly)."""
    return tuple(median * (1.0 + 0.01 * ((i % 5) - 2)) for i in range(n))


def noisy(median: float, n: int) -> tuple[float, ...]:
    """``n`` samples spread -30%..+42% around ``median``, symmetric on log scale (median
    and Hodges-Lehmann estimate exactly ``median``) when ``n`` is a multiple of 10."""
    return tuple(median * math.exp(SPREAD[i % len(SPREAD)]) for i in range(n))


def latency(
    test: str,
    name: str = "latency",
    median: float = 1e-3,
    n: int = 20,
    *,
    samples: Sequence[float] | None = None,
) -> LatencyResult:
    values = tight(median, n) if samples is None else tuple(samples)
    return LatencyResult(test, name, "run", values, 10, True, SESSION)


def comparison(test: str, name: str = "fused", ratio: float = 0.8) -> Comparison:
    """A comparison whose every block read ``ratio``, with a stated interval of +-1%."""
    measured = measured_comparison(test, [ratio] * 10, name)
    return dataclasses.replace(
        measured,
        ratio=ratio,
        low=ratio * 0.99,
        high=ratio * 1.01,
        output_diffs=(OutputDiff("y", 1e-7, 1e-6),),
    )


def measured_comparison(
    test: str, block_ratios: Sequence[float], name: str = "fused"
) -> Comparison:
    """A comparison whose candidate took ``block_ratios`` times the reference block by
    block, summarized as the recorder does (Hodges-Lehmann ratio, 95% interval)."""
    ref = latency(test, f"{name}:reference", samples=tight(1e-3, len(block_ratios)))
    cand_samples = tuple(r * x for r, x in zip(ref.samples, block_ratios, strict=True))
    cand = latency(test, f"{name}:candidate", samples=cand_samples)
    return records.comparison(ref, cand, name, 0.95)


def memory(test: str, name: str = "memory") -> MemoryResult:
    return MemoryResult(
        peak_bytes=(300 << 20, 310 << 20, 310 << 20),
        baseline_bytes=250 << 20,
        method="vmhwm",
        arena={"in_use_peak_max": 12 << 20},
        test=test,
        name=name,
        api="run",
    )


def save(
    path: Path | str,
    records: Sequence[Record],
    *,
    started: float = 1_700_000_000.0,
    env: Mapping[str, Any] = ENV,
    profiles: Mapping[tuple[str, str], Any] | None = None,
) -> int:
    return save_run(
        path,
        started=started,
        finished=started + 5.0,
        command_line="pytest --ortperf",
        git=GIT,
        environment=env,
        records=records,
        profiles=profiles,
    )
