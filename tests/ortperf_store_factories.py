"""Records with injected samples and a ``save`` shortcut for the store and CLI tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ortperf import store
from pytest_ortperf.results import Comparison, LatencyResult, OutputDiff, Record, SessionInfo

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


def latency(test: str, name: str = "latency", median: float = 1e-3, n: int = 20) -> LatencyResult:
    samples = tuple(median * (1.0 + 0.01 * ((i % 5) - 2)) for i in range(n))
    return LatencyResult(test, name, "run", samples, 10, True, SESSION)


def comparison(test: str, name: str = "fused", ratio: float = 0.8) -> Comparison:
    ref = latency(test, "reference", 1e-3, 10)
    cand = latency(test, "candidate", 1e-3 * ratio, 10)
    blocks = tuple(c / r for c, r in zip(cand.samples, ref.samples, strict=True))
    return Comparison(
        test=test,
        name=name,
        api="run",
        reference=ref,
        candidate=cand,
        block_ratios=blocks,
        ratio=ratio,
        low=ratio * 0.99,
        high=ratio * 1.01,
        confidence=0.95,
        measured=True,
        output_diffs=(OutputDiff("y", 1e-7, 1e-6),),
    )


def save(
    path: Path | str,
    records: Sequence[Record],
    *,
    started: float = 1_700_000_000.0,
    env: Mapping[str, Any] = ENV,
    profiles: Mapping[tuple[str, str], Any] | None = None,
) -> int:
    return store.save_run(
        path,
        started=started,
        finished=started + 5.0,
        command_line="pytest --ortperf",
        git=GIT,
        environment=env,
        records=records,
        profiles=profiles,
    )
