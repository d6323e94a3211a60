"""Profiles made from real sessions, comparison of optimization levels, memory, plots."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.profiling.memory import MemoryResult, peak_memory
from pytest_ortperf.profiling.parse import Profile
from pytest_ortperf.profiling.run import profile_session

OPSET = [helper.make_opsetid("", 17)]


def make_model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=OPSET)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def attention_model() -> onnx.ModelProto:
    """softmax(Q @ K^T) @ V with an explicit Transpose: ORT fuses it into FusedMatMul."""
    shape = [1, 2, 8, 16]
    nodes = [
        helper.make_node("Transpose", ["K"], ["Kt"], perm=[0, 1, 3, 2], name="transpose_k"),
        helper.make_node("MatMul", ["Q", "Kt"], ["S"], name="scores"),
        helper.make_node("Softmax", ["S"], ["P"], axis=-1, name="softmax"),
        helper.make_node("MatMul", ["P", "V"], ["O"], name="context"),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "QKV"]
    out = [helper.make_tensor_value_info("O", TensorProto.FLOAT, shape)]
    return make_model(helper.make_graph(nodes, "attention", inputs, out))


def attention_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal((1, 2, 8, 16)).astype(np.float32) for n in "QKV"}


def mixed_dtype_model() -> onnx.ModelProto:
    """An int64 input and a float16 input."""
    nodes = [
        helper.make_node("Mul", ["idx", "idx"], ["sq"], name="square_idx"),
        helper.make_node("Add", ["h", "h"], ["h2"], name="double_h"),
        helper.make_node("Cast", ["sq"], ["sqh"], to=TensorProto.FLOAT16, name="cast"),
        helper.make_node("ReduceSum", ["h2"], ["hs"], keepdims=0, name="sum_h"),
    ]
    inputs = [
        helper.make_tensor_value_info("idx", TensorProto.INT64, [4]),
        helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2, 8]),
    ]
    outs = [
        helper.make_tensor_value_info("sqh", TensorProto.FLOAT16, [4]),
        helper.make_tensor_value_info("hs", TensorProto.FLOAT16, []),
    ]
    return make_model(helper.make_graph(nodes, "mixed", inputs, outs))


def loop_model() -> onnx.ModelProto:
    """A Loop running 3 iterations of a two-node body."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", "X"], ["acc_mid"], name="body_add"),
            helper.make_node("Relu", ["acc_mid"], ["acc_out"], name="body_relu"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2, 3]),
        ],
    )
    nodes = [
        helper.make_node("Neg", ["X"], ["start"], name="neg"),
        helper.make_node("Loop", ["trip", "cond", "start"], ["Y"], body=body, name="the_loop"),
        helper.make_node("Abs", ["Y"], ["Z"], name="abs"),
    ]
    graph = helper.make_graph(
        nodes,
        "loop",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, [2, 3])],
        initializer=[
            helper.make_tensor("trip", TensorProto.INT64, [], [3]),
            helper.make_tensor("cond", TensorProto.BOOL, [], [True]),
        ],
    )
    return make_model(graph)


@pytest.fixture
def clean_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """cwd and the temp root both point at empty folders whose contents we can check."""
    cwd = tmp_path / "cwd"
    tmp = tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return cwd, tmp


def assert_empty(*dirs: Path) -> None:
    for d in dirs:
        assert list(d.iterdir()) == [], f"files left in {d}: {os.listdir(d)}"


def test_profile_session_excludes_warmup_and_leaves_no_file(
    clean_dirs: tuple[Path, Path],
) -> None:
    session = OrtSession.create(attention_model())
    prof = profile_session(session, attention_feeds(), runs=4, warmup=2)
    assert prof.n_runs == 4
    assert sorted(set(prof.nodes["run"])) == [0, 1, 2, 3]
    assert list(prof.runs()["n_nodes"]) == [len(session.op_histogram())] * 4
    assert (prof.runs()["overhead_us"] >= 0).all()
    assert prof.source is None
    assert_empty(*clean_dirs)
    # The measured session itself is not profiling.
    assert session.sess.get_session_options().enable_profiling is False


def test_profile_session_failure_leaves_no_file(clean_dirs: tuple[Path, Path]) -> None:
    bad_feeds = {"Q": np.zeros((1, 2, 8, 16), np.float32)}  # K and V missing
    with pytest.raises(Exception, match=r"K|V|input"):
        profile_session(attention_model(), bad_feeds, runs=2, warmup=1)
    assert_empty(*clean_dirs)


def test_profile_session_accepts_model_bytes_and_path(tmp_path: Path) -> None:
    model = attention_model()
    from_bytes = profile_session(model.SerializeToString(), attention_feeds(), runs=2, warmup=0)
    path = tmp_path / "attention.onnx"
    onnx.save(model, str(path))
    from_path = profile_session(path, attention_feeds(), runs=2, warmup=1)
    assert from_bytes.n_runs == from_path.n_runs == 2
    assert set(from_bytes.nodes["op_type"]) == set(from_path.nodes["op_type"])


def test_profile_int64_and_float16_inputs() -> None:
    feeds = {
        "idx": np.arange(4, dtype=np.int64),
        "h": np.ones((2, 8), dtype=np.float16),
    }
    prof = profile_session(mixed_dtype_model(), feeds, runs=3, warmup=1)
    assert prof.n_runs == 3
    shapes = prof.nodes.drop_duplicates("name").set_index("name")
    assert shapes.loc["square_idx", "inputs"] == "i64[4],i64[4]"
    assert shapes.loc["square_idx", "outputs"] == "i64[4]"
    assert shapes.loc["cast", "outputs"] == "f16[4]"
    # CPU has no float16 Add: ORT inserts Casts around it, the f16 input shows on them.
    casts = prof.nodes[prof.nodes["op_type"] == "Cast"]
    assert "f16[2x8]" in set(casts["inputs"])
    assert "f16[]" in set(casts["outputs"])
    cmp = prof.compare(prof)
    assert set(cmp.nodes["tag"]) == {"="}


def test_loop_subgraph_nodes_are_nested_not_double_counted() -> None:
    session = OrtSession.create(loop_model(), optimization="disable")
    prof = profile_session(session, {"X": np.ones((2, 3), np.float32)}, runs=3, warmup=1)
    nodes = prof.nodes
    top = nodes[nodes["depth"] == 0]
    assert list(top.groupby("run").size()) == [3, 3, 3]
    body = nodes[nodes["depth"] == 1]
    assert set(body["parent"]) == {"the_loop"}
    assert set(body["op_type"]) >= {"Add", "Relu"}
    assert (body.groupby("run")["op_type"].apply(lambda s: (s == "Add").sum()) == 3).all()
    # Self times add up to the top-level kernel time: body time is not counted twice.
    runs = prof.runs()
    assert list(nodes.groupby("run")["self_us"].sum()) == list(runs["kernel_us"])
    assert (nodes["self_us"] >= 0).all()
    by_op = prof.by_op()
    assert by_op["share"].sum() == pytest.approx(1.0)


def test_compare_disable_vs_all_shows_fusion() -> None:
    model, feeds = attention_model(), attention_feeds()
    base = profile_session(OrtSession.create(model, optimization="disable"), feeds, runs=3)
    opt = profile_session(OrtSession.create(model, optimization="all"), feeds, runs=3)
    cmp = base.compare(opt)
    # Execution order, the fused node placed where the nodes it replaced ran.
    assert list(zip(cmp.nodes["tag"], cmp.nodes["op_type"], strict=True)) == [
        ("-", "Transpose"),
        ("-", "MatMul"),
        ("+", "FusedMatMul"),
        ("=", "Softmax"),
        ("=", "MatMul"),
    ]
    tags = cmp.nodes.groupby("op_type")["tag"].apply(lambda s: "".join(sorted(set(s))))
    assert tags["Transpose"] == "-"
    assert tags["FusedMatMul"] == "+"
    assert tags["Softmax"] == "="
    # The second MatMul (softmax @ V) keeps its shapes; the first one was fused away.
    matmul = cmp.nodes[cmp.nodes["op_type"] == "MatMul"]
    assert sorted(matmul["tag"]) == ["-", "="]
    changed = cmp.changed_ops
    assert changed["Transpose"] == (1.0, 0.0)
    assert changed["FusedMatMul"] == (0.0, 1.0)
    assert changed["MatMul"] == (2.0, 1.0)
    assert "Softmax" not in changed
    first = cmp.summary_lines()[0]
    assert "Transpose 1 -> 0" in first
    assert "FusedMatMul 0 -> 1" in first
    both = cmp.nodes[cmp.nodes["tag"] == "="]
    assert both["base_us"].notna().all()
    assert both["optimized_us"].notna().all()


def test_chrome_trace_of_a_session_profile(tmp_path: Path) -> None:
    import json

    prof = profile_session(attention_model(), attention_feeds(), runs=2, warmup=2)
    out = prof.to_chrome_trace(tmp_path / "trace.json")
    events = json.loads(out.read_text())
    assert sum(e["name"] == "model_run" for e in events) == 2  # warm-up runs left out
    assert sum(e.get("cat") == "Node" for e in events) == len(prof.nodes)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_peak_memory_sees_an_allocation() -> None:
    size = 64 * 1024 * 1024

    def allocate() -> None:
        block = np.ones(size, dtype=np.uint8)  # touched pages: resident
        block.sum()

    prof = profile_session(attention_model(), attention_feeds(), runs=1, warmup=0)
    result = peak_memory(allocate, runs=3, profile=prof)
    assert isinstance(result, MemoryResult)
    assert len(result.peak_bytes) == 3
    assert result.method in {"vmhwm", "sampling"}
    assert result.baseline_bytes > 0
    assert max(result.growth_bytes) >= size // 2
    assert result.max_peak_bytes >= result.baseline_bytes
    assert "in_use_peak_max" in result.arena  # ORT >= 1.32 writes mem_* keys


def test_peak_memory_sampling_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_ortperf.profiling import memory as profiler

    if not Path("/proc/self/status").exists():
        pytest.skip("needs Linux /proc")
    monkeypatch.setattr(profiler, "_can_use_hwm", lambda: False)
    size = 64 * 1024 * 1024

    def allocate() -> None:
        block = np.ones(size, dtype=np.uint8)
        import time

        time.sleep(0.05)  # long enough for the sampler to see it
        block.sum()

    result = peak_memory(allocate, runs=2)
    assert result.method == "sampling"
    assert result.arena == {}
    assert max(result.growth_bytes) >= size // 2


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from pytest_ortperf.profiling.plots import plot_by_op, plot_compare, plot_timeline

    model, feeds = attention_model(), attention_feeds()
    base = profile_session(OrtSession.create(model, optimization="disable"), feeds, runs=2)
    opt = profile_session(OrtSession.create(model, optimization="all"), feeds, runs=2)
    loop = profile_session(loop_model(), {"X": np.ones((2, 3), np.float32)}, runs=1)
    figures = {
        "by_op": plot_by_op(base),
        "compare": plot_compare(base.compare(opt)),
        "timeline": plot_timeline(loop, run=0),
    }
    for name, fig in figures.items():
        out = tmp_path / f"{name}.png"
        fig.savefig(out)
        assert _is_png(out), name
    with pytest.raises(ValueError, match="out of range"):
        plot_timeline(base, run=5)


def test_plots_without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from pytest_ortperf.profiling.plots import plot_by_op

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    prof = Profile.__new__(Profile)  # never reached: the import fails first
    with pytest.raises(ImportError, match=r"pip install pytest-ortperf\[plots\]"):
        plot_by_op(prof)
