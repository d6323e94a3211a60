"""The placement gate: which provider each node ran on, judged with the structure metric.

CUDA is judged on recorded profiles (``tests/data/profiles/cuda_placement_*.json``, written
in ORT's profile format by ``make_cuda_placement.py``): the second recording has the
attention Softmax fallen back to the CPU, with the two Memcpy nodes that brings. The CPU
provider itself runs end to end: placement recorded from onnxruntime's node assignment,
stored in the baseline, unchanged on the next run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from onnx import TensorProto
from onnx import helper as oh

from pytest_ortperf import models
from pytest_ortperf.gating.baseline import (
    Baseline,
    BaselineError,
    load_baseline,
    plan_update,
    write_baseline,
)
from pytest_ortperf.gating.baseline_entries import entry_from_record, placements
from pytest_ortperf.gating.baseline_judge import judge_entry
from pytest_ortperf.gating.placement import (
    CPU,
    add_placement,
    judge_placement,
    placement_to_json,
    read_placement,
)
from pytest_ortperf.gating.structure import judge_structure
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.profiling.ep_assignment import session_placement
from pytest_ortperf.profiling.parse import read_profile
from pytest_ortperf.results import Comparison, LatencyResult, Outcome, SessionInfo

DATA = Path(__file__).parent / "data" / "profiles"
BASE = DATA / "cuda_placement_base.json"
FALLBACK = DATA / "cuda_placement_fallback.json"
CUDA = "CUDAExecutionProvider"
ENV = {"ort_version": "1.32.0", "cpu_model": "x", "isa": ["avx2"], "effective_cpus": 2}
HIST = {"MatMul": 3, "Softmax": 1}


def info(placement: dict[str, tuple[str, str]], hist: dict[str, int]) -> SessionInfo:
    return SessionInfo(
        model="attn.onnx",
        providers=(CUDA, CPU),
        optimization="all",
        threads=1,
        spinning=False,
        op_histogram=tuple(sorted(hist.items())),
        placement=tuple((n, op, p) for n, (op, p) in sorted(placement.items())),
    )


def record(candidate: dict[str, tuple[str, str]], hist: dict[str, int] = HIST) -> dict[str, Any]:
    """A measured compare record whose candidate ran with ``candidate``'s placement."""
    reference = read_profile(BASE).placement()
    ratios = (1.0, 1.01, 0.99, 1.0, 1.02, 0.98)
    ref = LatencyResult("t", "c:reference", "run", (1e-3,) * 6, 10, True, info(reference, HIST))
    cand = LatencyResult("t", "c:candidate", "run", ratios, 10, True, info(candidate, hist))
    return Comparison(
        test="test_attn", name="c", api="run", reference=ref, candidate=cand,
        block_ratios=tuple(r * 1e-3 / 1e-3 for r in ratios), ratio=1.0, low=0.98, high=1.02,
        confidence=0.95, measured=True,
    ).to_dict()  # fmt: skip


def structure_of(entry: dict[str, Any], rec: dict[str, Any]) -> Any:
    verdicts = judge_entry(entry, rec, ENV)
    return next(v for v in verdicts if v.metric == "structure")


def test_profiles_give_the_placement_of_every_node() -> None:
    base = read_profile(BASE).placement()
    assert base["attn_softmax"] == ("Softmax", CUDA)
    assert base["Memcpy"] == ("MemcpyFromHost", CUDA)
    assert {p for _, p in base.values()} == {CUDA}
    fallback = read_profile(FALLBACK).placement()
    assert fallback["attn_softmax"] == ("Softmax", CPU)
    assert set(fallback) - set(base) == {"Memcpy_token_4", "Memcpy_token_5"}


def test_fallback_and_new_memcpy_fail_naming_the_nodes() -> None:
    base, fallback = read_profile(BASE).placement(), read_profile(FALLBACK).placement()
    parts, compared, moved = judge_placement({"candidate": base}, {"candidate": fallback})
    assert compared == ["candidate"]
    assert moved == 3
    (message,) = parts
    assert message.startswith("candidate placement changed: ")
    assert f"node 'attn_softmax' (Softmax) fell back to CPU: {CUDA} -> {CPU}" in message
    assert f"new MemcpyToHost node 'Memcpy_token_4' on {CUDA}" in message
    assert f"new MemcpyFromHost node 'Memcpy_token_5' on {CUDA}" in message
    # The op histograms alone may not see it: same op types, same counts.
    hist = {"candidate": HIST}
    verdict = add_placement(
        judge_structure(hist, hist), {"candidate": base}, {"candidate": fallback}
    )
    assert verdict.outcome is Outcome.REGRESSED
    assert verdict.n == 3
    assert "attn_softmax" in verdict.message


def test_provider_change_between_devices_is_named_moved() -> None:
    base = {"mm": ("MatMul", CUDA)}
    now = {"mm": ("MatMul", "TensorrtExecutionProvider")}
    (message,), _, _ = judge_placement({"candidate": base}, {"candidate": now})
    assert "node 'mm' (MatMul) moved: CUDAExecutionProvider -> TensorrtExecutionProvider" in message


def test_unchanged_or_unrecorded_placement_passes() -> None:
    base = read_profile(BASE).placement()
    hist = {"candidate": HIST}
    same = add_placement(
        judge_structure(hist, hist), {"candidate": base}, {"candidate": dict(base)}
    )
    assert same.outcome is Outcome.OK
    assert same.message.endswith(f"; placement unchanged (candidate: 6 on {CUDA})")
    # A baseline taken before placement was recorded: the histogram alone decides.
    old = add_placement(judge_structure(hist, hist), {}, {"candidate": base})
    assert old == judge_structure(hist, hist)
    # Removed nodes (a Memcpy gone) are the histogram's business, not a placement failure.
    fewer = {k: v for k, v in base.items() if k != "Memcpy"}
    assert judge_placement({"c": base}, {"c": fewer})[0] == []


def test_baseline_entry_stores_and_judges_placement(tmp_path: Path) -> None:
    base_record = record(read_profile(BASE).placement())
    entry = entry_from_record(base_record, ENV, updated="2026-01-01")
    assert entry["placements"]["candidate"]["attn_softmax"] == ["Softmax", CUDA]
    assert placements(entry)["reference"]["q_proj"] == ("MatMul", CUDA)
    # Written and read back through the baseline file.
    path = tmp_path / "__ortperf__" / "test_attn.json"
    write_baseline(path, {"test_attn::c": entry})
    stored = dict(load_baseline(path).entries["test_attn::c"])
    assert '"attn_softmax": ["Softmax", "CUDAExecutionProvider"]' in path.read_text()

    unchanged = structure_of(stored, base_record)
    assert unchanged.outcome is Outcome.OK
    assert "placement unchanged" in unchanged.message

    fell_back = structure_of(stored, record(read_profile(FALLBACK).placement()))
    assert fell_back.outcome is Outcome.REGRESSED
    assert fell_back.failed()
    assert "candidate placement changed: node 'attn_softmax' (Softmax) fell back to CPU" in (
        fell_back.message
    )
    assert "new MemcpyToHost node 'Memcpy_token_4'" in fell_back.message


def test_histogram_and_placement_changes_are_reported_together() -> None:
    entry = entry_from_record(record(read_profile(BASE).placement()), ENV)
    moved = record(read_profile(FALLBACK).placement(), {"MatMul": 3, "Softmax": 1, "Add": 1})
    verdict = structure_of(entry, moved)
    assert verdict.outcome is Outcome.REGRESSED
    assert "candidate structure changed: Add 0 -> 1" in verdict.message
    assert "; candidate placement changed: node 'attn_softmax'" in verdict.message
    assert verdict.n == 4


@pytest.mark.parametrize(
    "bad",
    [
        {"candidate": {"mm": "MatMul"}},
        {"candidate": {"mm": ["MatMul"]}},
        {"candidate": {"mm": ["MatMul", 3]}},
        {"candidate": ["mm"]},
        "CUDA",
    ],
)
def test_invalid_placements_in_a_baseline_file_are_named(tmp_path: Path, bad: Any) -> None:
    entry = entry_from_record(record(read_profile(BASE).placement()), ENV)
    entry["placements"] = bad
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"schema": 2, "entries": {"test_attn::c": entry}}))
    with pytest.raises(BaselineError, match=r"b\.json: entry 'test_attn::c': field 'placements'"):
        load_baseline(path)


def test_json_form_round_trips() -> None:
    placement = read_profile(FALLBACK).placement()
    as_json = placement_to_json(placement)
    assert list(as_json) == sorted(as_json)
    assert read_placement(json.loads(json.dumps(as_json))) == placement
    assert read_placement({"n": ["Op"]}) is None
    assert read_placement([["n", "Op", CPU]]) is None


def test_cpu_session_placement_from_onnxruntime() -> None:
    named = oh.make_model(
        oh.make_graph(
            [
                oh.make_node("MatMul", ["X", "W"], ["h"], name="proj"),
                oh.make_node("Relu", ["h"], ["Y"], name="act"),
            ],
            "named",
            [oh.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
            [oh.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])],
            [oh.make_tensor("W", TensorProto.FLOAT, [4, 3], [0.5] * 12)],
        ),
        opset_imports=[oh.make_opsetid("", 17)],
        ir_version=8,
    )
    placement = session_placement(OrtSession.create(named, optimization="disable"))
    assert placement == {n.name: (n.op_type, CPU) for n in named.graph.node}
    # The attention block's nodes have no names: keyed by op type and occurrence.
    session = OrtSession.create(models.attention(), optimization="disable")
    assert {n.name for n in models.attention().graph.node} == {""}
    placement = session_placement(session)
    assert placement == {
        "MatMul#0": ("MatMul", CPU), "MatMul#1": ("MatMul", CPU), "MatMul#2": ("MatMul", CPU),
        "MatMul#3": ("MatMul", CPU), "Softmax#0": ("Softmax", CPU),
        "Transpose#0": ("Transpose", CPU),
    }  # fmt: skip
    # The record carries it; the profile of the same session agrees.
    from pytest_ortperf.recorder.targets import session_info

    info = session_info(session, True).to_dict()
    assert read_placement(info["placement"]) == placement
    assert "placement" not in session_info(session, False).to_dict()


INNER = """
from pytest_ortperf import models


def test_attention(ort_session, ort_feeds, ortperf):
    reference = ort_session(models.attention(), optimization="disable")
    candidate = ort_session(models.attention())
    feeds = ort_feeds(reference, dims={"B": 2})
    ortperf.compare(reference, candidate, feeds, name="attention")
"""
RUN = ("-p", "no:cacheprovider", "--ortperf-store=none", "-o", "ortperf_budget=0.2")


def test_cpu_end_to_end_placement_recorded_unchanged_then_fallen_back(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_block=INNER)
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    path = pytester.path / "__ortperf__" / "test_block.json"
    entry = json.loads(path.read_text())["entries"]["test_attention::attention"]
    stored = entry["placements"]["candidate"]
    assert stored and {p for _, p in stored.values()} == {CPU}

    again = pytester.runpytest(*RUN, "--ortperf", "--ortperf-json=run.json")
    again.assert_outcomes(passed=1)
    assert "placement unchanged (candidate: " in (pytester.path / "run.json").read_text()

    # The same baseline as if recorded on a CUDA run: the candidate's first node now runs on
    # the CPU, against CUDA in the baseline, and fails the structure gate by name.
    name, (op, _) = sorted(stored.items())[0]
    document = json.loads(path.read_text())
    document["entries"]["test_attention::attention"]["placements"]["candidate"][name] = [op, CUDA]
    path.write_text(json.dumps(document))
    fell_back = pytester.runpytest(*RUN, "--ortperf")
    fell_back.assert_outcomes(failed=1)
    fell_back.stdout.fnmatch_lines(
        [f"*FAIL structure: candidate placement changed: node '{name}' ({op}) fell back to CPU*"]
    )


def test_update_lines_name_placement_changes(tmp_path: Path) -> None:
    old = entry_from_record(record(read_profile(BASE).placement()), ENV)
    new = entry_from_record(record(read_profile(FALLBACK).placement()), ENV)
    baseline = Baseline(path=tmp_path / "b.json", entries={"test_attn::c": old})
    plan = plan_update(baseline, {"test_attn::c": new}, {"test_attn"})
    assert plan.changed == ("test_attn::c",)
    (line,) = plan.lines
    assert "candidate placement changed: node 'attn_softmax' (Softmax) fell back to CPU" in line
