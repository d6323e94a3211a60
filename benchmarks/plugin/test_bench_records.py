"""Records and baseline files through msgspec, against the hand-written code they replaced.

Side by side in one run, the code before (``results.py`` and ``gating/baseline.py`` read
from git at :data:`OLD`, loaded as temporary modules) and now:

- ``baseline_load``: :func:`load_baseline` of a baseline file of :data:`ENTRIES` entries
  (latency and compare, raw numbers in the samples file), every entry validated;
- ``to_dict``, ``from_dict`` and the round trip of :data:`RECORDS` records of every kind
  (latency with session, budget verdict and control; compare; per-call; throughput;
  memory; cold start; and a judgement of two verdicts);
- ``import``: importing ``results`` and the baseline modules in a fresh process (their
  common dependencies imported first; ``results`` now includes msgspec's import).

Asserted (correctness only): both sides read the same entries and rebuild equal records,
and their dict forms and baseline files are the same bytes. The times are printed and
recorded with ``record_property``, never asserted: a loaded machine cannot fail this test.
Each timing runs with the cyclic GC paused (collected before), old and new in turns.
Targets: each new figure at most the old one, for the imports their sum (``results`` alone
now pays for msgspec's import, ~10-20 ms; plugin load imports neither). Run alone on a quiet
machine::

    pytest -p no:cacheprovider --ortperf -s benchmarks/plugin/test_bench_records.py

Without ``--ortperf`` (a smoke run) the sizes are small and only the agreement is checked.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import pytest_ortperf.gating.baseline as new_baseline
import pytest_ortperf.results as new_results
from pytest_ortperf.gating.baseline_entries import entry_from_record

OLD = "bc23133"
"""The commit whose ``results.py`` and ``gating/baseline.py`` are the hand-written code."""
ENTRIES = 1000
RECORDS = 10_000
REPO = Path(__file__).resolve().parents[2]
ENV = {"ort_version": "1.20.0", "cpu_model": "bench", "logical_cores": 2, "fingerprint": "f"}


def measuring(config: pytest.Config) -> bool:
    """True under ``--ortperf`` (or when the plugin is not loaded)."""
    try:
        return bool(config.getoption("--ortperf") or config.getoption("--ortperf-update"))
    except ValueError:  # options not registered
        return True


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _old_source(path: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{OLD}:{path}"],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the old code is read from git ({OLD}:{path}): {exc}")
    return out.stdout


@pytest.fixture(scope="module")
def old() -> Iterator[dict[str, ModuleType]]:
    """The old ``results`` and ``gating.baseline`` as temporary modules (the old baseline
    module uses the old records, as it did)."""
    modules: dict[str, ModuleType] = {}
    for key, path in (
        ("results", "pytest_ortperf/results.py"),
        ("baseline", "pytest_ortperf/gating/baseline.py"),
    ):
        name = f"_ortperf_old_{key}"
        spec = importlib.util.spec_from_loader(name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        source = _old_source(path).replace(
            "from pytest_ortperf.results import", "from _ortperf_old_results import"
        )
        exec(compile(source, f"{OLD}:{path}", "exec"), module.__dict__)
        modules[key] = module
    yield modules
    for module in modules.values():
        sys.modules.pop(module.__name__, None)


def _samples(rng: random.Random, n: int) -> tuple[float, ...]:
    return tuple(rng.lognormvariate(-7.0, 0.1) for _ in range(n))


def make_records(count: int) -> list[Any]:
    """``count`` records of every kind (and judgements), with today's classes."""
    r = new_results
    rng = random.Random(7)
    session = r.SessionInfo(
        "model.onnx", ("CPUExecutionProvider",), "all", 1, False,
        (("Add", 2), ("MatMul", 3)), (("n0", "Add", "CPUExecutionProvider"),),
    )  # fmt: skip
    slo = r.SloVerdict(
        "p99", "met", 0.01, False, 0.002, 0.0019, math.nan, 200, "calls", 0, 0, 0,
        0.99, "any", "p99: met",
    )  # fmt: skip
    verdict = r.Verdict("ratio", r.Outcome.OK, 1.0, 0.99, -0.01, -0.03, 0.01, 0.05, 0.01,
                        0.3, 25, "ratio 0.99: ok")  # fmt: skip
    out: list[Any] = []
    for i in range(count):
        test, which = f"tests/test_models.py::test_m[{i}]", i % 7
        lat = r.LatencyResult(test, "latency", "run", _samples(rng, 30), 10, True, session,
                              1, False, slo=(slo,))  # fmt: skip
        if which == 0:
            out.append(lat)
        elif which == 1:
            control = r.LatencyResult(test, "control", "run", _samples(rng, 30), 10, True)
            out.append(r.LatencyResult(test, "norm", "run", _samples(rng, 30), 10, True,
                                       session, control=control, runs=(15, 15)))  # fmt: skip
        elif which == 2:
            ref = r.LatencyResult(test, "cmp", "run", _samples(rng, 25), 10, True, session)
            ratios = tuple(c / a for c, a in zip(lat.samples, ref.samples, strict=False))
            out.append(r.Comparison(test, "cmp", "run", ref, lat, ratios, 1.01, 0.99, 1.03,
                                    0.98, True, (r.OutputDiff("y", 1e-6, 1e-5),)))  # fmt: skip
        elif which == 3:
            out.append(r.PerCallResult(test, "tail", "run", _samples(rng, 200), 1e-7, 50,
                                       _samples(rng, 4), 10, True, session, slo=(slo,)))  # fmt: skip
        elif which == 4:
            level = r.ThroughputLevel(2, 400, 1.0, (400.0, 398.0), 0.004, 0.005, 0.006, 0.0045)
            out.append(r.ThroughputResult(test, "tp", "run", (level, level), "shared", 1, 1,
                                          False, 2, True, session))  # fmt: skip
        elif which == 5:
            out.append(r.MemoryResult((10_000_000, 10_100_000), 9_000_000, "vmhwm",
                                      {"in_use_peak_max": 123_456}, test, "mem"))  # fmt: skip
        else:
            out.append(r.ColdStartResult(test, "cold", _samples(rng, 5), _samples(rng, 5),
                                         imports=_samples(rng, 5), session=session))  # fmt: skip
        if i % 10 == 0:
            out.append(r.Judgement(test, "cmp", (verdict, verdict)))
    return out


def _from_dict(module: ModuleType, data: dict[str, Any]) -> Any:
    if "verdicts" in data:
        return module.Judgement.from_dict(data)
    return module.record_from_dict(data)


def test_records_and_baseline_side_by_side(
    old: dict[str, ModuleType],
    request: pytest.FixtureRequest,
    record_property: Callable[[str, object], None],
    tmp_path: Path,
) -> None:
    full = measuring(request.config)
    records = make_records(RECORDS if full else 700)
    dicts = [x.to_dict() for x in records]
    old_records = [_from_dict(old["results"], d) for d in dicts]

    # Same dict forms, byte for byte; both sides rebuild what they wrote.
    for mine, theirs in zip(records, old_records, strict=True):
        assert json.dumps(mine.to_dict()) == json.dumps(theirs.to_dict())
    assert [_from_dict(new_results, d) for d in dicts] == records
    assert [_from_dict(old["results"], x.to_dict()) for x in old_records] == old_records
    reread = [_from_dict(new_results, json.loads(json.dumps(d))) for d in dicts]
    assert reread == records  # through JSON text too (tuples become lists)

    # A baseline file of ENTRIES entries: the same bytes written, the same entries read.
    entries: dict[str, dict[str, Any]] = {}
    for x in records:
        if getattr(x, "kind", "") in ("latency", "compare") and len(entries) < (
            ENTRIES if full else 100
        ):
            d = x.to_dict()
            entry = entry_from_record({**d, "test": d["test"].split("::")[1]}, ENV)
            entries[f"{entry['test']}::{entry['name']}"] = entry
    path = tmp_path / "__ortperf__" / "test_models.json"
    path.parent.mkdir()
    new_baseline.write_baseline(path, entries)
    assert new_baseline.dumps_baseline(entries) == old["baseline"].dumps_baseline(entries)
    loaded = new_baseline.load_baseline(path)
    assert dict(loaded.entries) == dict(old["baseline"].load_baseline(path).entries)
    assert len(loaded.entries) == len(entries)
    if not full:
        return

    def round_trip(module: ModuleType, items: list[Any]) -> None:
        for x in items:
            _from_dict(module, x.to_dict())

    sides = {
        "old": (old["results"], old["baseline"], old_records),
        "new": (new_results, new_baseline, records),
    }
    tasks: dict[str, tuple[int, Callable[[ModuleType, ModuleType, list[Any]], object]]] = {
        f"baseline_load_{ENTRIES}": (5, lambda _, b, __: b.load_baseline(path)),
        f"to_dict_{len(records)}": (3, lambda _, __, i: [x.to_dict() for x in i]),
        f"from_dict_{len(records)}": (3, lambda m, _, __: [_from_dict(m, d) for d in dicts]),
        f"round_trip_{len(records)}": (3, lambda m, _, i: round_trip(m, i)),
    }
    figures: dict[str, float] = {}
    for task, (repeat, fn) in tasks.items():
        for _ in range(repeat):  # old and new in turns, so that a busy spell hits both
            for side, (results, baseline, items) in sides.items():
                key = f"{task}_{side}_s"
                gc.collect()
                gc.disable()  # a collection falls on whichever side allocates past a threshold
                try:
                    took = best_of(lambda: fn(results, baseline, items), 1)  # noqa: B023
                finally:
                    gc.enable()
                figures[key] = min(figures.get(key, math.inf), took)
    figures.update(import_times(tmp_path))
    shown = {k: round(v, 4) for k, v in figures.items()}
    for key, value in shown.items():
        record_property(key, value)
    print(f"\nrecords and baselines, old ({OLD}) vs new: {json.dumps(shown, indent=1)}")


IMPORT = """
import importlib, sys, time
import numpy, pytest_ortperf.stats, pytest_ortperf.files, pytest_ortperf.units
def load(name, path):
    if path is None:
        return importlib.import_module(name)
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(open(path).read(), name, "exec"), module.__dict__)
old = sys.argv[1:] or [None, None]
start = time.perf_counter()
load("pytest_ortperf.results", old[0])
middle = time.perf_counter()
load("pytest_ortperf.gating.baseline", old[1])
import pytest_ortperf.gating.baseline_judge  # the judging moved out of the file
end = time.perf_counter()
print(middle - start, end - middle)
"""


def import_times(directory: Path, repeat: int = 5) -> dict[str, float]:
    """Median seconds to import ``results`` (msgspec's import included, now), then the
    baseline modules with the gating modules they use, in fresh processes."""
    sources = []
    for path in ("pytest_ortperf/results.py", "pytest_ortperf/gating/baseline.py"):
        target = directory / path.replace("/", "-")
        target.write_text(_old_source(path))
        sources.append(str(target))
    out: dict[str, float] = {}
    for side, args in (("old", sources), ("new", [])):
        runs = []
        for _ in range(repeat):
            done = subprocess.run(
                [sys.executable, "-c", IMPORT, *args],
                capture_output=True, text=True, check=True, timeout=120,
            )  # fmt: skip
            runs.append([float(x) for x in done.stdout.split()])
        out[f"import_results_{side}_s"] = statistics.median(r[0] for r in runs)
        out[f"import_baseline_{side}_s"] = statistics.median(r[1] for r in runs)
        out[f"import_both_{side}_s"] = statistics.median(r[0] + r[1] for r in runs)
    return out
