"""Machine-readable results of one run: our own JSON, or pytest-benchmark's layout.

Our schema, ``"schema": "pytest-ortperf/1"`` (a new major number only when a key changes
meaning or disappears; keys may be added within a version)::

    {
      "schema": "pytest-ortperf/1",
      "generator": {"name": "pytest-ortperf", "version": "0.1.0"},
      "started": "2026-11-03T10:15:02+00:00", "finished": "...", "run_id": 12 | null,
      "exit_status": 0 | null,
      "git": {"commit": ..., "branch": ..., "dirty": ...},
      "environment": {"ort_version": ..., "cpu_model": ..., "fingerprint": ..., ...},
      "settings": {"budget_s": 1.0, "threshold": 0.05, "alpha": 0.01, "strict": false,
                   "update": false, "baseline": "files" | "history",
                   "history": {"branch": "main", "machine": ..., "window": 10}  # history only},
      "counts": {"regressed": 1, "ok": 3, ...},          # gated metrics by outcome
      "suite": {"gated": 50, "alpha_max": 0.01, "alpha_min": 0.01,   # null: none gated
                "false_alarm_if_independent": 0.395, "false_alarm_bound": 0.5,
                "family": {"alpha": 0.01, "planned": 50, "per_verdict": 0.0002} | null,
                "measuring_s": 61.5 | null},  # the gated verdicts' seconds in all
      "results": [
        {"id": "<test node id>::<name>", "kind": "latency" | "compare" | "memory" |
         "per_call" | "throughput",
         "test": ..., "name": ..., "api": ..., "measured": true,
         ...the record's own fields (results.LatencyResult/Comparison/MemoryResult.to_dict():
         latency: samples (seconds per call), calls_per_block, session, summary {n, median,
         mean, std, min, max, p90, p99, iqr};
         compare: ratio, low, high, confidence, block_ratios, reference, candidate (two
         latency dicts), output_diffs;
         memory: peak_bytes, baseline_bytes, method, arena;
         per_call: calls (seconds, timer included), timer_cost, calls_per_round, blocks,
         calls_per_block, n, quantiles {p50, p90, p99, p99.9: seconds less the timer's
         cost, null where fewer than 10 calls lie beyond}, block_median, preempted,
         reference (the other arm of a tail comparison, same form);
         throughput: levels [{concurrency, calls, seconds, calls_per_s, rates, p50, p90,
         p99, mean}], sessions, intra_op_threads, inter_op_threads, spinning, cores),
         "verdicts": [{"metric": "ratio" | "latency" | "structure" | "p99", "outcome": "ok" |
                       "regressed" | "improved" | "inconclusive" | "new" | "not_comparable",
                       "baseline", "current", "change", "low", "high", "threshold",
                       "alpha", "p_value", "n", "message", "looks" where a
                       confirmation judged several looks at alpha each, and
                       "seconds" and "pairs" where the gate measured for it: the
                       time it took and its session pairs}]}
      ],
      "profiles": [{"test": ..., "name": ..., "by_op": [{"op_type", "total_us", "count",
                    "share"}]}],
      "notes": ["..."]
    }

All times are seconds; ``change``/``low``/``high`` of a verdict are relative
(``current / baseline - 1``). The pytest-benchmark layout (:func:`pytest_benchmark_json`)
has one benchmark per latency and one per arm of a comparison, grouped by test.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pytest_ortperf import __version__
from pytest_ortperf.gating.suite import Family, judged_verdicts, suite_rate
from pytest_ortperf.reports.rows import verdicts_by_key
from pytest_ortperf.results import Comparison, Judgement, LatencyResult, Record
from pytest_ortperf.stats import quantile

SCHEMA = "pytest-ortperf/1"


@dataclass(frozen=True)
class RunInfo:
    """What a run was, besides its records."""

    started: float
    finished: float
    environment: Mapping[str, Any] = field(default_factory=dict)
    git: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    run_id: int | None = None
    exit_status: int | None = None
    notes: Sequence[str] = ()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat()


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: they become null (recursively)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def ortperf_json(
    run: RunInfo,
    records: Sequence[Record],
    judgements: Sequence[Judgement] = (),
    profiles: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]] | None = None,
    *,
    family: Family | None = None,
) -> dict[str, Any]:
    """Our own document (see the module docstring), JSON-ready (no NaN); ``suite``: the
    gated verdicts' false-alarm figures (:class:`~pytest_ortperf.gating.suite.SuiteRate`)."""
    judged = verdicts_by_key(judgements)
    suite = suite_rate(judged_verdicts(judgements), family)
    counts: dict[str, int] = {}
    for verdicts in judged.values():
        for v in verdicts:
            counts[v.outcome.value] = counts.get(v.outcome.value, 0) + 1
    results = [
        {
            "id": f"{r.test}::{r.name}",
            **r.to_dict(),
            "verdicts": [v.to_dict() for v in judged.get((r.test, r.name), ())],
        }
        for r in records
    ]
    doc = {
        "schema": SCHEMA,
        "generator": {"name": "pytest-ortperf", "version": __version__},
        "started": _iso(run.started),
        "finished": _iso(run.finished),
        "run_id": run.run_id,
        "exit_status": run.exit_status,
        "git": dict(run.git),
        "environment": dict(run.environment),
        "settings": dict(run.settings),
        "counts": counts,
        "suite": None if suite is None else suite.to_dict(),
        "results": results,
        "profiles": [
            {"test": test, "name": name, "by_op": [dict(item) for item in by_op]}
            for (test, name), by_op in (profiles or {}).items()
        ],
        "notes": list(run.notes),
    }
    result: dict[str, Any] = _finite(doc)
    return result


# ------------------------------------------------------------------------------ pytest-benchmark


def benchmark_stats(samples: Sequence[float], calls_per_block: int) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` of per-call times (one round = one block): quartiles by
    linear interpolation, outliers as pytest-benchmark counts them (beyond 1.5 IQR, beyond
    one standard deviation), ``ops`` calls per second, ``total`` the sum of the data."""
    data = sorted(float(x) for x in samples)
    n = len(data)
    mean = math.fsum(data) / n
    stddev = math.sqrt(math.fsum((x - mean) ** 2 for x in data) / (n - 1)) if n > 1 else 0.0
    q1, q3 = quantile(data, 0.25), quantile(data, 0.75)
    iqr = q3 - q1
    lo_fence, hi_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    iqr_outliers = sum(x < lo_fence or x > hi_fence for x in data)
    stddev_outliers = sum(x < mean - stddev or x > mean + stddev for x in data)
    return {
        "min": data[0],
        "max": data[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": n,
        "median": quantile(data, 0.5),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": next(x for x in data if x >= lo_fence),
        "hd15iqr": next(x for x in reversed(data) if x <= hi_fence),
        "ops": 1.0 / mean if mean > 0 else 0.0,
        "total": math.fsum(data),
        "iterations": calls_per_block,
        "data": list(samples),
    }


def _split_param(nodeid: str) -> tuple[str, str | None]:
    """``("tests/t.py::test_x", "64")`` from ``tests/t.py::test_x[64]``."""
    if nodeid.endswith("]") and "[" in nodeid:
        base, _, param = nodeid[:-1].partition("[")
        return base, param
    return nodeid, None


def _benchmark(
    result: LatencyResult, group: str, extra: Mapping[str, Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    local = result.test.partition("::")[2] or result.test
    _, param = _split_param(result.test)
    return {
        "group": group,
        "name": f"{local}::{result.name}",
        "fullname": f"{result.test}::{result.name}",
        "params": None if param is None else {"id": param},
        "param": param,
        "extra_info": {"api": result.api, **extra},
        "options": dict(options),
        "stats": benchmark_stats(result.samples, result.calls_per_block),
    }


def _machine_info(env: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "node": platform.node(),
        "processor": env.get("cpu_model") or platform.processor(),
        "machine": env.get("machine") or platform.machine(),
        "python_compiler": platform.python_compiler(),
        "python_implementation": env.get("python_implementation")
        or platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": env.get("python_version") or platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": platform.release(),
        "system": env.get("system") or platform.system(),
        "cpu": {
            "brand_raw": env.get("cpu_model"),
            "count": env.get("logical_cores"),
            "arch": env.get("machine"),
        },
        "onnxruntime": env.get("ort_version"),
        "fingerprint": env.get("fingerprint"),
    }


def pytest_benchmark_json(run: RunInfo, records: Sequence[Record]) -> dict[str, Any]:
    """pytest-benchmark's JSON layout: latencies and both arms of each comparison as
    benchmarks (memory records are left out); a comparison's ratio and interval go to its
    arms' ``extra_info``."""
    options = {
        "disable_gc": False,
        "timer": "perf_counter_ns",
        "min_rounds": 5,
        "max_time": run.settings.get("budget_s"),
        "min_time": 0.02,
        "warmup": True,
    }
    benchmarks: list[dict[str, Any]] = []
    for r in records:
        if isinstance(r, LatencyResult):
            benchmarks.append(_benchmark(r, r.test, {"ortperf_kind": "latency"}, options))
        elif isinstance(r, Comparison):
            extra = {
                "ortperf_kind": "compare",
                "comparison": r.name,
                "ratio": r.ratio,
                "ratio_low": r.low,
                "ratio_high": r.high,
                "confidence": r.confidence,
            }
            group = f"{r.test}::{r.name}"
            for role, arm in (("reference", r.reference), ("candidate", r.candidate)):
                benchmarks.append(_benchmark(arm, group, {**extra, "role": role}, options))
    git = run.git
    doc = {
        "machine_info": _machine_info(run.environment),
        "commit_info": {
            "id": git.get("commit"),
            "time": None,
            "author_time": None,
            "dirty": git.get("dirty"),
            "project": None,
            "branch": git.get("branch"),
        },
        "benchmarks": benchmarks,
        "datetime": _iso(run.started),
        "version": __version__,
        "generator": f"pytest-ortperf {__version__}",
    }
    result: dict[str, Any] = _finite(doc)
    return result
