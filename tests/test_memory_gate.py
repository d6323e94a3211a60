"""Memory gating: the tolerance rule on injected numbers, and a real session's memory
(process peak, growth, ORT's in-use peak) judged against a baseline entry."""

import math

import numpy as np
import onnxruntime as ort
import pytest

from pytest_ortperf import models
from pytest_ortperf.gating.gate import Gate
from pytest_ortperf.gating.memory_rule import (
    ARENA_FLOOR,
    GROWTH_FLOOR,
    check_memory_entry,
    judge_memory,
    judge_memory_entry,
    memory_entry,
    memory_figures,
)
from pytest_ortperf.gating.settings import GateSettings
from pytest_ortperf.measuring.engine import Engine, EngineConfig
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.recorder import Recorder
from pytest_ortperf.results import MemoryResult, Outcome, record_from_dict

MiB = 2**20


@pytest.mark.parametrize(
    ("current", "baseline", "floor", "outcome"),
    [
        (100 * MiB, 100 * MiB, GROWTH_FLOOR, Outcome.OK),
        # 5% of 100 MiB is 5 MiB, but the floor of 16 MiB decides
        (115 * MiB, 100 * MiB, GROWTH_FLOOR, Outcome.OK),
        (117 * MiB, 100 * MiB, GROWTH_FLOOR, Outcome.REGRESSED),
        (83 * MiB, 100 * MiB, GROWTH_FLOOR, Outcome.IMPROVED),
        # above the floor, the threshold decides: 5% of 1000 MiB is 50 MiB
        (1049 * MiB, 1000 * MiB, GROWTH_FLOOR, Outcome.OK),
        (1051 * MiB, 1000 * MiB, GROWTH_FLOOR, Outcome.REGRESSED),
        (2 * ARENA_FLOOR, ARENA_FLOOR, ARENA_FLOOR, Outcome.OK),  # +64 KiB: at the floor
        (2 * ARENA_FLOOR + 1, ARENA_FLOOR, ARENA_FLOOR, Outcome.REGRESSED),
        (0, 0, GROWTH_FLOOR, Outcome.OK),
    ],
)
def test_the_tolerance_rule(current, baseline, floor, outcome):
    verdict = judge_memory("memory.growth", current, baseline, threshold=0.05, floor=floor)
    assert verdict.outcome is outcome
    assert verdict.failed() is (outcome is Outcome.REGRESSED)
    assert f"-> {outcome.value}" in verdict.message


def test_the_rule_says_what_it_compared():
    verdict = judge_memory("memory.arena_peak", 3 * MiB, 2 * MiB, threshold=0.05, floor=ARENA_FLOOR)
    assert verdict.change == pytest.approx(0.5) and verdict.low == verdict.high == verdict.change
    assert verdict.message == (
        "memory.arena_peak 3.0 MiB vs baseline 2.0 MiB: +1.0 MiB (+50.0%), tolerance 0.1 MiB "
        "(max of 5% and 0.1 MiB) -> regressed"
    )
    with pytest.raises(ValueError, match="sizes must be finite"):
        judge_memory("memory.growth", math.nan, 1, threshold=0.05, floor=1)


def record(peaks=(120 * MiB,), base=100 * MiB, arena=None, api="iobinding"):
    return MemoryResult(
        peak_bytes=tuple(peaks), baseline_bytes=base, method="vmhwm",
        arena=arena or {}, test="t.py::t", name="m:memory", api=api,
    ).to_dict()  # fmt: skip


def test_entries_and_their_verdicts():
    env = {"ort_version": "1.32.0"}
    first = record(arena={"in_use_peak_max": 600_000})
    assert memory_figures(first) == {"memory.growth": 20 * MiB, "memory.arena_peak": 600_000}
    assert [v.outcome for v in judge_memory_entry(None, first, env, threshold=0.05)] == [
        Outcome.NEW,
        Outcome.NEW,
    ]
    entry = memory_entry(first, env, updated="2026-11-26")
    assert entry == {
        "kind": "memory", "test": "t.py::t", "name": "m:memory", "api": "iobinding",
        "figures": {"memory.growth": 20 * MiB, "memory.arena_peak": 600_000},
        "peak_bytes": 120 * MiB, "method": "vmhwm", "ort_version": "1.32.0",
        "updated": "2026-11-26",
    }  # fmt: skip
    assert check_memory_entry(entry) is None
    bigger = record(arena={"in_use_peak_max": 900_000})
    verdicts = {v.metric: v.outcome for v in judge_memory_entry(entry, bigger, env, threshold=0.05)}
    assert verdicts == {"memory.growth": Outcome.OK, "memory.arena_peak": Outcome.REGRESSED}
    # another ORT version allocates differently: reported, not judged
    other = judge_memory_entry(entry, bigger, {"ort_version": "1.33.0"}, threshold=0.05)
    assert {v.outcome for v in other} == {Outcome.NOT_COMPARABLE}
    assert "ort_version (1.32.0 -> 1.33.0)" in other[0].message
    # an older ORT without mem_* keys: only the growth is judged
    old = judge_memory_entry(entry, record(), env, threshold=0.05)
    assert [v.metric for v in old] == ["memory.growth"]
    with pytest.raises(ValueError, match="smoke records"):
        memory_entry({**first, "measured": False}, env)
    assert "unknown metric 'memory.rss'" in check_memory_entry({"figures": {"memory.rss": 1}})
    assert "not a byte count" in check_memory_entry({"figures": {"memory.growth": -1}})


class OneEntry:
    """A baseline source holding one entry (what a baseline file would give the gate)."""

    def __init__(self, entry):
        self.value = entry

    def entry(self, nodeid, name):
        return self.value if name == self.value["name"] else None


def measure(gate=None, properties=None):
    rec = Recorder(
        test="t.py::t",
        measured=True,
        engine=Engine(EngineConfig()),
        user_properties=[] if properties is None else properties,
        gate=gate,
    )
    session = OrtSession.create(models.control(), name="control")
    feeds = {"X": np.ones((64, 256), np.float32)}
    return rec, rec.memory(session, feeds, runs=3)


def test_a_real_session_is_recorded_and_judged_against_its_entry():
    properties = []
    _, first = measure(properties=properties)
    assert first.name == "control:memory" and len(first.peak_bytes) == 3
    assert first.max_peak_bytes >= first.baseline_bytes > 0
    # ORT >= 1.32 reports its in-use peak: two 256x256 float weights and the activations
    if tuple(int(x) for x in ort.__version__.split(".")[:2]) >= (1, 32):
        assert first.arena_peak_bytes is not None and first.arena_peak_bytes >= 2 * 256 * 256 * 4
    (payload,) = [v for k, v in properties if k == "ortperf"]
    assert record_from_dict(payload) == first
    env = {"ort_version": ort.__version__}
    entry = memory_entry(first.to_dict(), env)

    gate = Gate(GateSettings(), OneEntry(entry), lambda: env)
    rec, again = measure(gate)
    assert not rec.failures, rec.failures
    outcomes = {v.metric: v.outcome for v in judge_memory_entry(entry, again.to_dict(), env,
                                                                threshold=0.05)}  # fmt: skip
    assert set(outcomes.values()) == {Outcome.OK}
    # a baseline whose model used half the bytes: the same session now fails its gate
    if "memory.arena_peak" in entry["figures"]:
        halved = {**entry, "figures": {**entry["figures"]}}
        halved["figures"]["memory.arena_peak"] //= 2
        rec, _ = measure(Gate(GateSettings(), OneEntry(halved), lambda: env))
        (failure,) = rec.failures
        assert "'control:memory' failed its performance gate" in failure
        assert "FAIL memory.arena_peak" in failure and "-> regressed" in failure


MEMORY_SUITE = """
import numpy as np
from pytest_ortperf import models


def test_mem(ort_session, ortperf):
    s = ort_session(models.control())
    ortperf.memory(s, {"X": np.ones((64, 256), np.float32)}, runs=3)
"""


def test_update_stores_a_memory_entry_and_the_next_run_is_judged_by_it(pytester):
    import json

    pytester.makepyfile(test_mem=MEMORY_SUITE)
    args = ("-p", "no:cacheprovider", "--ortperf-store=none")
    pytester.runpytest(*args, "--ortperf-update").assert_outcomes(passed=1)
    path = pytester.path / "__ortperf__" / "test_mem.json"
    data = json.loads(path.read_text())
    (entry,) = data["entries"].values()
    assert entry["kind"] == "memory" and entry["name"].endswith("control:memory")
    assert set(entry["figures"]) <= {"memory.arena_peak", "memory.growth"} and entry["figures"]

    result = pytester.runpytest(*args, "--ortperf")
    result.assert_outcomes(passed=1)
    for metric in entry["figures"]:
        result.stdout.fnmatch_lines([f"*test_mem*control:memory*{metric}*ok*"])

    if "memory.arena_peak" in entry["figures"]:  # ORT >= 1.32: its own peak, halved
        entry["figures"]["memory.arena_peak"] //= 2
        path.write_text(json.dumps(data))
        result = pytester.runpytest(*args, "--ortperf")
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*FAIL memory.arena_peak*regressed*"])
