"""Unit tests of profile parsing and comparison on recorded profile files."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pytest_ortperf.profiling import parse as profile_mod
from pytest_ortperf.profiling import trace as trace_mod
from pytest_ortperf.profiling.frames import format_type_shapes
from pytest_ortperf.profiling.parse import Profile, compare_profiles, read_profile

DATA = Path(__file__).parent / "data" / "profiles"
ORT132 = DATA / "ort132_if.json"  # recorded with ORT 1.32: If with a subgraph, mem_* keys
OLD = DATA / "old_fences.json"  # old format: fences, graph_index/exec_plan_index
CUDA = DATA / "cuda_kernels.json"  # CUDA build: Kernel events beside Node events


def load(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(path.read_text())
    return events


def test_ort132_runs_nodes_and_subgraph() -> None:
    prof = read_profile(ORT132)
    assert prof.n_runs == 3
    nodes = prof.nodes
    assert list(nodes.groupby("run").size()) == [5, 5, 4]  # then-branch twice, else once
    assert set(nodes["name"]) == {"rsum", "gt", "the_if", "then_add", "then_relu", "else_mul"}
    sub = nodes[nodes["depth"] == 1]
    assert set(sub["name"]) == {"then_add", "then_relu", "else_mul"}
    assert set(sub["parent"]) == {"the_if"}
    top = nodes[nodes["depth"] == 0]
    assert set(top["parent"]) == {""}
    # The If's self time excludes its subgraph nodes: nothing is counted twice.
    for run, group in nodes.groupby("run"):
        the_if = group[group["name"] == "the_if"].iloc[0]
        children = group[group["parent"] == "the_if"]["dur_us"].sum()
        assert the_if["self_us"] == the_if["dur_us"] - children, run
        assert group["self_us"].sum() == group[group["depth"] == 0]["dur_us"].sum()
    rsum = nodes[nodes["name"] == "rsum"].iloc[0]
    assert rsum["op_type"] == "ReduceSum"
    assert rsum["provider"] == "CPUExecutionProvider"
    assert rsum["inputs"] == "f32[2x3]"
    assert rsum["outputs"] == "f32[]"
    assert nodes[nodes["name"] == "gt"].iloc[0]["outputs"] == "bool[]"
    assert rsum["node_index"] == 0
    assert rsum["output_size"] == 4  # "4" in the file
    assert prof.has_memory
    assert {"mem_in_use_peak", "mem_arena_held", "mem_bytes_in_use"} <= set(nodes.columns)
    assert pd.api.types.is_numeric_dtype(nodes["mem_in_use_peak"])
    assert prof.memory()["arena_held_max"] == 1048580


def test_runs_wall_kernel_overhead() -> None:
    prof = read_profile(ORT132)
    runs = prof.runs()
    assert list(runs["run"]) == [0, 1, 2]
    assert list(runs["wall_us"]) == [271, 107, 59]  # the model_run durations
    top = prof.nodes[prof.nodes["depth"] == 0].groupby("run")["dur_us"].sum()
    assert list(runs["kernel_us"]) == list(top)
    assert (runs["overhead_us"] == runs["wall_us"] - runs["kernel_us"]).all()
    assert list(runs["n_nodes"]) == [3, 3, 3]


def test_by_op_and_by_node() -> None:
    prof = read_profile(ORT132)
    by_op = prof.by_op()
    assert by_op["share"].sum() == pytest.approx(1.0)
    assert list(by_op["total_us"]) == sorted(by_op["total_us"], reverse=True)
    row = by_op.set_index("op_type").loc["Add"]
    assert row["count_per_run"] == pytest.approx(2 / 3)
    assert row["mean_us"] == pytest.approx(row["total_us"] / 3)
    by_node = prof.by_node()
    assert list(by_node["name"][:3]) == ["rsum", "gt", "the_if"]  # execution order
    assert by_node.set_index("name").loc["the_if", "count_per_run"] == 1.0


def test_old_format_fences_and_string_args() -> None:
    prof = read_profile(OLD)
    assert prof.n_runs == 2
    nodes = prof.nodes
    assert len(nodes) == 6  # fences dropped
    assert not nodes["name"].str.contains("fence").any()
    assert list(nodes["name"][:3]) == ["conv1", "relu1", "gemm"]
    assert list(nodes["node_index"][:3]) == [0, 1, 2]  # from graph_index
    conv = nodes.iloc[0]
    assert conv["inputs"] == "f32[1x3x8x8],f32[4x3x3x3],f32[4]"
    assert conv["activation_size"] == 100
    assert list(nodes[nodes["name"] == "conv1"]["dur_us"]) == [300, 200]
    gemm = nodes[nodes["name"] == "gemm"].iloc[0]
    assert gemm["sub_threads"] == 1  # one of two sub-threads ran a share
    assert gemm["sub_thread_runs"] == 2
    assert not prof.has_memory
    assert prof.memory() == {}
    assert list(prof.runs()["kernel_us"]) == [370, 270]


@pytest.mark.parametrize("path", [ORT132, OLD, CUDA])
def test_shuffled_events_give_the_same_profile(path: Path) -> None:
    events = load(path)
    ordered = read_profile(events)
    for seed in range(3):
        shuffled = list(events)
        random.Random(seed).shuffle(shuffled)
        got = read_profile(shuffled)
        pd.testing.assert_frame_equal(got.nodes, ordered.nodes)
        pd.testing.assert_frame_equal(got.runs(), ordered.runs())
        pd.testing.assert_frame_equal(got.kernels, ordered.kernels)


def test_path_and_list_agree_and_json_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from_path = read_profile(str(ORT132))
    from_list = read_profile(load(ORT132))
    pd.testing.assert_frame_equal(from_path.nodes, from_list.nodes)
    monkeypatch.setattr(trace_mod, "_orjson", None)
    pd.testing.assert_frame_equal(read_profile(ORT132).nodes, from_path.nodes)


def test_cuda_kernel_events_in_their_own_frame() -> None:
    prof = read_profile(CUDA)
    assert prof.n_runs == 2
    assert list(prof.nodes["op_type"][:3]) == ["MemcpyFromHost", "Softmax", "Tanh"]
    assert set(prof.nodes["provider"]) == {"CUDAExecutionProvider"}
    assert prof.nodes.iloc[0]["inputs"] == "f16[2x8]"
    kernels = prof.kernels
    assert len(kernels) == 4
    assert list(kernels["run"]) == [0, 0, 1, 1]
    assert list(kernels["op_type"]) == ["Softmax", "Tanh"] * 2
    assert list(kernels["node"]) == ["sm", "tanh"] * 2
    assert kernels["name"].str.contains("softmax_warp_forward").sum() == 2
    second = prof.select_runs(1)
    assert list(second.kernels["run"]) == [0, 0]
    assert len(second.kernels) == 2


def test_format_type_shapes() -> None:
    assert format_type_shapes([{"int64": [4]}, {"float16": [2, 8]}]) == "i64[4],f16[2x8]"
    assert format_type_shapes([{"float": []}]) == "f32[]"
    assert format_type_shapes('[{"double": [1, 2]}]') == "f64[1x2]"
    assert format_type_shapes([{"uint8": [3]}, {"bool": [1]}]) == "u8[3],bool[1]"
    assert format_type_shapes([{"sometype": [3]}]) == "sometype[3]"
    assert format_type_shapes("") == ""
    assert format_type_shapes(None) == ""


def test_select_runs_and_drop_warmup() -> None:
    prof = read_profile(ORT132)
    tail = prof.drop_warmup(1)
    assert tail.n_runs == 2
    assert sorted(set(tail.nodes["run"])) == [0, 1]
    assert list(tail.runs()["wall_us"]) == [107, 59]
    mid = prof.select_runs(1, 2)
    assert mid.n_runs == 1
    assert set(mid.nodes["name"]) == {"rsum", "gt", "the_if", "then_add", "then_relu"}
    assert prof.n_runs == 3  # the original is untouched


def test_compare_same_profile_is_all_equal() -> None:
    prof = read_profile(OLD)
    cmp = prof.compare(prof)
    assert set(cmp.nodes["tag"]) == {"="}
    assert (cmp.by_op["change"] == "").all()
    assert cmp.changed_ops == {}
    assert cmp.summary_lines()[0] == "op types: same counts"


def test_compare_tags_and_op_summary() -> None:
    base = read_profile(OLD)
    events = [e for e in load(OLD) if not e["name"].startswith("relu1")]
    for e in events:  # the "optimized" model renamed its nodes and made Conv faster
        if e["name"].startswith("conv1"):
            e["name"] = e["name"].replace("conv1", "fused_conv")
            if e["name"].endswith("_kernel_time"):
                e["dur"] = 100
    cmp = compare_profiles(base, read_profile(events))
    tags = dict(zip(cmp.nodes["op_type"], cmp.nodes["tag"], strict=True))
    assert tags == {"Conv": "=", "Relu": "-", "Gemm": "="}
    conv = cmp.nodes[cmp.nodes["op_type"] == "Conv"].iloc[0]
    assert conv["base_name"] == "conv1"
    assert conv["optimized_name"] == "fused_conv"
    assert conv["base_us"] == 250.0
    assert conv["optimized_us"] == 100.0
    relu = cmp.nodes[cmp.nodes["op_type"] == "Relu"].iloc[0]
    assert relu["optimized_name"] == ""
    assert pd.isna(relu["optimized_us"])
    assert cmp.changed_ops == {"Relu": (1.0, 0.0)}
    assert "Relu 1 -> 0" in cmp.summary_lines()[0]
    assert cmp.base_kernel_us == 320.0
    assert cmp.optimized_kernel_us == 150.0


def test_compare_occurrence_index_and_int64_shapes() -> None:
    def events(ops: list[tuple[str, str]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {"cat": "Session", "name": "model_run", "ts": 0, "dur": 100, "pid": 1, "tid": 1}
        ]
        for i, (op, dtype) in enumerate(ops):
            args = {
                "op_name": op,
                "provider": "CPUExecutionProvider",
                "input_type_shape": [{dtype: [4]}],
                "output_type_shape": [{dtype: [4]}],
            }
            out.append(
                {
                    "cat": "Node",
                    "name": f"n{i}_kernel_time",
                    "ts": 1 + 10 * i,
                    "dur": 5,
                    "pid": 1,
                    "tid": 1,
                    "args": args,
                }
            )
        return out

    base = read_profile(events([("Add", "int64"), ("Add", "int64"), ("Add", "int64")]))
    opt = read_profile(events([("Add", "int64"), ("Add", "float16")]))
    cmp = compare_profiles(base, opt)
    rows = {(r.inputs, r.occurrence): r.tag for r in cmp.nodes.itertuples()}
    assert rows == {("i64[4]", 0): "=", ("i64[4]", 1): "-", ("i64[4]", 2): "-", ("f16[4]", 0): "+"}
    assert "Add 3 -> 2" in cmp.summary_lines()[0]


def test_chrome_trace_holds_the_selected_runs(tmp_path: Path) -> None:
    prof = read_profile(ORT132).select_runs(1, 2)
    out = prof.to_chrome_trace(tmp_path / "trace.json")
    events = json.loads(out.read_text())
    assert [e["name"] for e in events if e["name"] == "model_run"] == ["model_run"]
    names = {e["name"] for e in events}
    assert "then_add_kernel_time" in names
    assert "else_mul_kernel_time" not in names  # run 2 only
    assert all({"ph", "ts", "dur", "name", "cat"} <= set(e) for e in events)
    # A profile read from a list keeps the events; both routes write the same trace.
    from_list = read_profile(load(ORT132)).select_runs(1, 2)
    again = from_list.to_chrome_trace(tmp_path / "again.json")
    assert json.loads(again.read_text()) == events


def test_profile_without_runs_or_nodes() -> None:
    empty = read_profile([{"cat": "Session", "name": "model_run", "ts": 5, "dur": 3}])
    assert empty.n_runs == 1
    assert empty.nodes.empty
    assert empty.by_op().empty
    assert list(empty.runs()["kernel_us"]) == [0]
    no_runs = read_profile(load(OLD)[:5])  # truncated before the first model_run event
    assert no_runs.n_runs == 1
    assert list(no_runs.nodes["name"]) == ["conv1"]


def test_bad_input_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match=r"nope\.json"):
        read_profile(missing)
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    with pytest.raises(ValueError, match=r"broken\.json: not a valid JSON"):
        read_profile(broken)
    obj = tmp_path / "obj.json"
    obj.write_text('{"a": 1}')
    with pytest.raises(ValueError, match=r"obj\.json: expected a JSON list of profiling events"):
        read_profile(obj)
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            [
                {"cat": "Session", "name": "model_run", "ts": 0, "dur": 1},
                {"cat": "Node", "name": "x_kernel_time", "ts": 1},
            ]
        )
    )
    with pytest.raises(ValueError, match=r"bad\.json: event 1 lacks dur"):
        read_profile(bad)
    with pytest.raises(ValueError, match="event 0 is not an object"):
        read_profile([3])  # type: ignore[list-item]


def test_trace_event_object_format_is_accepted() -> None:
    prof = read_profile({"traceEvents": load(OLD)})  # type: ignore[arg-type]
    assert prof.n_runs == 2


def test_profile_is_a_plain_holder() -> None:
    prof = read_profile(OLD)
    assert isinstance(prof, Profile)
    assert "runs=2" in repr(prof)
    assert prof.events is None  # a path: events re-read on demand, not kept
    assert read_profile(OLD, keep_events=True).events is not None


def test_lazy_exports_keep_the_package_import_cheap() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pytest_ortperf as p\n"
        "assert 'pandas' not in sys.modules and 'onnxruntime' not in sys.modules\n"
        "assert p.read_profile is __import__('pytest_ortperf.profiling.parse').profiling.parse.read_profile\n"
        "assert p.Profile and p.compare_profiles and p.profile_session\n"
        "assert 'read_profile' in dir(p)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    import pytest_ortperf

    with pytest.raises(AttributeError, match="no_such_name"):
        pytest_ortperf.no_such_name  # noqa: B018


def test_kernel_events_keep_launch_dimensions_and_stream() -> None:
    prof = read_profile(DATA / "cuda_placement_fallback.json")
    kernels = prof.kernels
    assert list(kernels.columns) == [
        "run", "name", "op_type", "node", "dur_us", "ts_us", "stream", "grid", "block",
    ]  # fmt: skip
    gemm = kernels[kernels["node"] == "q_proj"].iloc[0]
    assert (gemm["grid"], gemm["block"], gemm["stream"]) == ("1x1x4", "128x1x1", 13)
    copy = kernels[kernels["node"] == "Memcpy_token_4"].iloc[0]
    assert (copy["name"], copy["grid"]) == ("MemcpyDeviceToHost", "-1x-1x-1")
    assert set(kernels["run"]) == {0, 1}
    assert "attn_softmax" not in set(kernels["node"])  # ran on the CPU: no GPU kernel
    # Kernel events without launch args (older builds) still parse.
    events = load(CUDA)
    for e in events:
        if e["cat"] == "Kernel":
            e["args"] = {"op_name": e["args"]["op_name"]}
    bare = read_profile(events).kernels
    assert set(bare["grid"]) == {""}
    assert bare["node"].eq("").all()


def test_placement_of_nodes_subgraphs_included() -> None:
    assert read_profile(ORT132).placement() == {
        "rsum": ("ReduceSum", "CPUExecutionProvider"),
        "gt": ("Greater", "CPUExecutionProvider"),
        "the_if": ("If", "CPUExecutionProvider"),
        "then_add": ("Add", "CPUExecutionProvider"),
        "then_relu": ("Relu", "CPUExecutionProvider"),
        "else_mul": ("Mul", "CPUExecutionProvider"),
    }
    assert read_profile([]).placement() == {}


def test_detail_columns_parse_on_demand_from_the_file_bytes(tmp_path: Path) -> None:
    copy = tmp_path / "p.json"
    copy.write_bytes(ORT132.read_bytes())
    prof = read_profile(copy)
    by_op = prof.by_op()
    assert prof.events is None
    copy.unlink()  # profile_session removes its file right after reading it
    nodes = prof.nodes  # the shapes, sizes and mem_* columns come now
    pd.testing.assert_frame_equal(nodes, read_profile(load(ORT132)).nodes)
    assert list(nodes.columns[: len(profile_mod.NODE_COLUMNS)]) == list(profile_mod.NODE_COLUMNS)
    pd.testing.assert_frame_equal(prof.by_op(), by_op)
    assert prof.nodes is nodes  # parsed once


class _Counting:
    """Counts the calls of a decoder while still calling it."""

    def __init__(self, fn: Any) -> None:
        self.fn, self.calls = fn, 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.fn(*args)

    def decode(self, *args: Any) -> Any:  # as a msgspec Decoder
        self.calls += 1
        return self.fn.decode(*args)


def test_all_columns_cost_one_parse_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("msgspec")
    copy = tmp_path / "p.json"
    copy.write_bytes(ORT132.read_bytes())
    generic = _Counting(trace_mod._loads)
    typed = _Counting(trace_mod._DECODER)
    monkeypatch.setattr(trace_mod, "_loads", generic)
    monkeypatch.setattr(trace_mod, "_DECODER", typed)
    prof = read_profile(copy)
    prof.by_op()
    nodes = prof.nodes
    prof.by_op()
    assert (typed.calls, generic.calls) == (1, 0)  # one schema decode, no second parse
    monkeypatch.undo()
    pd.testing.assert_frame_equal(nodes, read_profile(load(ORT132)).nodes)


def test_dynamic_shapes_are_formatted_per_row() -> None:
    events = load(ORT132)
    for i, e in enumerate(
        e for e in events if e["cat"] == "Node" and e["name"] == "rsum_kernel_time"
    ):
        e["args"]["input_type_shape"] = [{"float": [i + 1, 3]}]
    nodes = read_profile(events).nodes
    assert list(nodes[nodes["name"] == "rsum"]["inputs"]) == ["f32[1x3]", "f32[2x3]", "f32[3x3]"]
    assert set(nodes[nodes["name"] == "gt"]["inputs"]) == {"f32[],f32[]"}


def test_args_the_schema_lacks_take_the_generic_parse(tmp_path: Path) -> None:
    pytest.importorskip("msgspec")
    events = load(ORT132)
    for e in events:
        if e["cat"] == "Node":
            e["args"]["mem_new_figure"] = "7"  # a key a newer ORT might add
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(events))
    assert trace_mod.scan_typed(path.read_bytes()) is None
    nodes = read_profile(path).nodes
    assert set(nodes["mem_new_figure"]) == {7}
    pd.testing.assert_frame_equal(nodes, read_profile(events).nodes)


def test_args_missing_in_some_events_of_a_file(tmp_path: Path) -> None:
    """The schema decode of a file (numbers as ints, None where missing) gives the frame
    the generic parse of its events gives."""
    events = load(ORT132)
    for e in events:
        if e["cat"] == "Node" and e["name"].startswith("then_add"):
            del e["args"]["mem_arena_held"], e["args"]["node_index"]
    path = tmp_path / "holes.json"
    path.write_text(json.dumps(events))
    nodes = read_profile(path).nodes
    pd.testing.assert_frame_equal(nodes, read_profile(events).nodes)
    add = nodes[nodes["name"] == "then_add"]
    assert add["mem_arena_held"].isna().all() and add["node_index"].isna().all()
    assert nodes[nodes["name"] == "rsum"]["mem_arena_held"].notna().all()


def test_args_missing_in_some_events() -> None:
    events = load(ORT132)
    dropped = 0
    for e in events:
        if e["cat"] == "Node" and e["name"].startswith("then_add"):
            del e["args"]["mem_arena_held"]
            del e["args"]["input_type_shape"]
            dropped += 1
    assert dropped == 2
    nodes = read_profile(events).nodes
    add = nodes[nodes["name"] == "then_add"]
    assert add["mem_arena_held"].isna().all()
    assert set(add["inputs"]) == {""}
    assert nodes[nodes["name"] == "rsum"]["mem_arena_held"].notna().all()


@pytest.mark.parametrize("path", [ORT132, OLD, CUDA, DATA / "cuda_placement_fallback.json"])
def test_schema_decoding_and_generic_parse_agree(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert trace_mod.scan_typed(path.read_bytes()) is not None  # the file fits the schema
    typed = read_profile(path)
    monkeypatch.setattr(profile_mod, "scan_typed", lambda raw: None)  # as a file that does not fit
    generic = read_profile(path)
    pd.testing.assert_frame_equal(typed.by_op(), generic.by_op())
    pd.testing.assert_frame_equal(typed.nodes, generic.nodes)
    pd.testing.assert_frame_equal(typed.kernels, generic.kernels)
    pd.testing.assert_frame_equal(typed.runs(), generic.runs())


def test_files_the_schema_does_not_fit_take_the_generic_parse(tmp_path: Path) -> None:
    events = load(ORT132)
    expected = read_profile(events)
    odd = tmp_path / "odd.json"  # a fractional timestamp, a number where ORT writes a string
    changed = [dict(e) for e in events]
    changed[0]["ts"] = changed[0]["ts"] + 0.5
    changed[-1] = {**changed[-1], "args": {**changed[-1]["args"], "stream": 3}}
    odd.write_text(json.dumps(changed))
    assert trace_mod.scan_typed(odd.read_bytes()) is None
    pd.testing.assert_frame_equal(read_profile(odd).nodes, expected.nodes)
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"traceEvents": events}))
    pd.testing.assert_frame_equal(read_profile(wrapped).nodes, expected.nodes)
    kept = read_profile(ORT132, keep_events=True)  # events wanted: the generic parse
    assert kept.events is not None and len(kept.events) == len(events)


def test_fences_with_full_args_are_dropped() -> None:
    events = load(ORT132)
    fenced = []
    for e in events:
        fenced.append(e)
        if e["cat"] == "Node":
            base = e["name"].removesuffix("_kernel_time")
            for suffix in ("_fence_before", "_fence_after"):
                fenced.append({**e, "name": base + suffix, "dur": 0})
    pd.testing.assert_frame_equal(read_profile(fenced).nodes, read_profile(events).nodes)
