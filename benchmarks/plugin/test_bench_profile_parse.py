"""Parsing a large ORT profile: ``read_profile`` against row-wise pandas post-processing.

A small CNN (Conv/Relu blocks, MaxPool, Gemm) is profiled for 400 runs, which gives a
profile of the size the design brief describes (~90k events, ~80 MB with ORT 1.32's
``mem_*`` keys). Parsing it end to end (file -> per-node frame -> per-op aggregate) is timed
with ``read_profile`` and with a reference that does what onnx-array-api's
``ort_profile(..., agg=True)`` does after the runs: ``json.load``, one DataFrame row per
event, row-wise ``apply`` to split names and args and number the runs, then ``groupby``.
When onnx-array-api is installed, its real post-processing is timed on the same file too.

Run with ``pytest --ortperf -s benchmarks/plugin/test_bench_profile_parse.py``: the figures
are printed against their targets (``read_profile`` at least 10x faster than the row-wise
reference, 5x than onnx-array-api) and recorded with ``record_property``; they are never
asserted, so a loaded machine cannot fail the test. What is asserted is that the parsers
agree. Without ``--ortperf`` (a smoke run) the profile has 20 runs, the two parsers are
checked to agree and nothing is timed.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_ortperf.profiling.parse import read_profile

RUNS = 400
BLOCKS = 110  # Conv + Relu per block: ~225 nodes per run
TARGET_SPEEDUP = 10.0  # against the row-wise pandas reference
# onnx-array-api's ort_profile does part of its work with plain loops, not apply: a lower
# target (measured ~8-12x on a shared 2-core VM).
TARGET_SPEEDUP_OAA = 5.0


def small_cnn(blocks: int = BLOCKS, channels: int = 4, size: int = 8) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    x = "X"
    for i in range(blocks):
        w, b = f"w{i}", f"b{i}"
        weight = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.2
        inits += [
            numpy_helper.from_array(weight, w),
            numpy_helper.from_array(np.zeros(channels, np.float32), b),
        ]
        nodes.append(
            helper.make_node("Conv", [x, w, b], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}")
        )
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        x = f"r{i}"
    nodes.append(
        helper.make_node("MaxPool", [x], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool")
    )
    nodes.append(helper.make_node("Flatten", ["p"], ["f"], name="flatten"))
    feat = channels * (size // 2) ** 2
    inits += [
        numpy_helper.from_array(rng.standard_normal((feat, 10)).astype(np.float32), "gw"),
        numpy_helper.from_array(np.zeros(10, np.float32), "gb"),
    ]
    nodes.append(helper.make_node("Gemm", ["f", "gw", "gb"], ["Y"], name="fc"))
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def measuring(config: pytest.Config) -> bool:
    """True under ``--ortperf`` (or when the plugin is not loaded)."""
    try:
        return bool(config.getoption("--ortperf") or config.getoption("--ortperf-update"))
    except ValueError:  # options not registered
        return True


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest) -> int:
    return RUNS if measuring(request.config) else 20


@pytest.fixture(scope="module")
def big_profile(tmp_path_factory: pytest.TempPathFactory, runs: int) -> Iterator[Path]:
    """A profile of the small CNN (400 runs under --ortperf), written once per module."""
    folder = tmp_path_factory.mktemp("bigprofile")
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(folder / "cnn")
    # No fusion: every Conv and Relu stays a node, as in an unoptimized reference model.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(
        small_cnn().SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    feeds = {"X": np.ones((1, 4, 8, 8), np.float32)}
    for _ in range(runs):
        sess.run(None, feeds)
    path = Path(sess.end_profiling())
    yield path
    shutil.rmtree(folder, ignore_errors=True)


def reference_parse(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Row-wise pandas, the way onnx-array-api's ort_profile(agg=True) post-processes."""
    with open(path) as f:
        events = json.load(f)
    rows = []
    for event in events:
        row = {k: v for k, v in event.items() if k != "args"}
        for key, value in (event.get("args") or {}).items():
            row[f"args_{key}"] = value
        rows.append(row)
    df = pd.DataFrame(rows)

    def split(row: pd.Series) -> pd.Series:
        name = row["name"]
        for suffix in ("_kernel_time", "_fence_before", "_fence_after"):
            if name.endswith(suffix):
                return pd.Series({"node": name[: -len(suffix)], "event_name": suffix[1:]})
        return pd.Series({"node": name, "event_name": name})

    df[["node", "event_name"]] = df.apply(split, axis=1)
    # Runs numbered by row order, one per model_run event (the way the notebooks do it).
    run = []
    current = 0
    for name in df["name"]:
        run.append(current)
        if name == "model_run":
            current += 1
    df["iteration"] = run
    nodes = df[df["event_name"] == "kernel_time"]
    keys = ["args_op_name", "args_provider"]
    by_op = nodes[[*keys, "dur"]].groupby(keys).agg(["sum", "count"])
    return nodes, by_op


def ours(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    prof = read_profile(path)
    return prof.nodes, prof.by_op()


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def test_read_profile_vs_rowwise_pandas(
    big_profile: Path,
    runs: int,
    request: pytest.FixtureRequest,
    record_property: Callable[[str, object], None],
) -> None:
    events = json.loads(big_profile.read_text())
    size_mb = big_profile.stat().st_size / 1e6
    prof = read_profile(big_profile)
    assert prof.n_runs == runs
    assert len(prof.nodes) == runs * (2 * BLOCKS + 3)

    # Both sides agree on what they computed.
    ref_nodes, ref_by_op = reference_parse(big_profile)
    assert len(ref_nodes) == len(prof.nodes)
    ours_conv = prof.by_op().set_index("op_type").loc["Conv", "total_us"]
    assert ref_by_op.loc[("Conv", "CPUExecutionProvider"), ("dur", "sum")] == ours_conv
    if not measuring(request.config):
        return

    t_ours = best_of(lambda: ours(big_profile), 3)
    t_ref = best_of(lambda: reference_parse(big_profile), 1)
    ratio = t_ref / t_ours
    figures = {
        "events": len(events),
        "size_mb": round(size_mb, 1),
        "read_profile_s": round(t_ours, 3),
        "rowwise_pandas_s": round(t_ref, 3),
        "speedup": round(ratio, 1),
    }
    for key, value in figures.items():
        record_property(key, value)
    print(f"\nprofile parse: {figures} (target: speedup >= {TARGET_SPEEDUP:g})")


def test_read_profile_vs_onnx_array_api(
    big_profile: Path,
    record_property: Callable[[str, object], None],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    oaa = pytest.importorskip("onnx_array_api.ort.ort_profile")
    if not measuring(request.config):
        pytest.skip("timing only under --ortperf")

    class Replay:
        """Stands in for InferenceSession: its "profile" is a copy of the big file."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def end_profiling(self) -> str:
            copy = tmp_path / "replay.json"
            shutil.copyfile(big_profile, copy)  # ort_profile deletes the file it reads
            return str(copy)

    monkeypatch.setattr(ort, "InferenceSession", Replay)
    feeds = {"X": np.ones((1, 4, 8, 8), np.float32)}

    def theirs() -> Any:
        return oaa.ort_profile(b"", feeds, repeat=0, agg=True)

    start = time.perf_counter()
    agg = theirs()
    t_theirs = time.perf_counter() - start
    t_ours = best_of(lambda: ours(big_profile), 3)
    assert len(agg) > 0
    ratio = t_theirs / t_ours
    figures = {
        "read_profile_s": round(t_ours, 3),
        "onnx_array_api_ort_profile_s": round(t_theirs, 3),
        "speedup": round(ratio, 1),
    }
    for key, value in figures.items():
        record_property(key, value)
    print(
        f"\nprofile parse vs onnx-array-api: {figures} (target: speedup >= {TARGET_SPEEDUP_OAA:g})"
    )
