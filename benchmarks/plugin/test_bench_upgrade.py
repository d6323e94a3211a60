"""The upgrade gate across processes: A/A noise, the process boundary, real versions.

Run with ``pytest -s benchmarks/plugin/test_bench_upgrade.py`` (``--ortperf`` for the
in-process A/A beside it). Figures are printed against their targets and recorded with
``record_property``, never asserted: a loaded machine cannot fail the benchmark.

- A/A across processes: the same onnxruntime in two fresh workers per repeat, and in the
  same loop today's in-process ``ortperf.compare`` of two sessions. Target: 95% of the
  cross-process ratios within +-2% of 1.
- The process boundary: the same model's block time in a worker vs in this process,
  blocks interleaved (ABBA) with the same ``k``: ratio worker/in-process, target within 1%.
- A/B of two real versions (``ORTPERF_BENCH_A``, default ``onnxruntime==1.31.1``, against
  this environment's onnxruntime) on an attention block, a scikit-learn model through
  skl2onnx and a CNN built with ``onnx.helper``: ratio, interval, verdict, op-type and
  profile differences.

Settings through environment variables (defaults in brackets): ``ORTPERF_BENCH_A``
[onnxruntime==1.31.1], ``ORTPERF_BENCH_REPEATS`` [30], ``ORTPERF_BENCH_BUDGET`` (seconds
per measurement) [1.0], ``ORTPERF_ENV_CACHE`` (where the environment is installed once).
``ORTPERF_BENCH_TINY=1`` checks that everything runs (3 repeats, 0.1 s budgets).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

from pytest_ortperf import models
from pytest_ortperf.measuring.calls import make_call
from pytest_ortperf.measuring.engine import NS, PREEMPTED_BELOW, Engine, EngineConfig
from pytest_ortperf.measuring.feeds import input_specs, make_feeds
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.recorder.remote import measure_ab
from pytest_ortperf.remote.ab import ab
from pytest_ortperf.remote.interleave import order, pin_together, shared_feeds
from pytest_ortperf.remote.sessions import RemoteEnvironment
from pytest_ortperf.remote.venvs import EnvSpec, ensure
from pytest_ortperf.stats import paired_ratio

TINY = os.environ.get("ORTPERF_BENCH_TINY") == "1"
OLD = os.environ.get("ORTPERF_BENCH_A", "onnxruntime==1.31.1")
REPEATS = 3 if TINY else int(os.environ.get("ORTPERF_BENCH_REPEATS", "30"))
BUDGET = 0.1 if TINY else float(os.environ.get("ORTPERF_BENCH_BUDGET", "1.0"))
TARGET_WITHIN = 0.95
TARGET_BOUNDARY = 0.01
IR_VERSION = 8
OPSET = 17
"""The models' IR version and opset: ones that older onnxruntime releases load too (the
onnx installed here writes IR 14, which 1.31 refuses; 1.17 reads IR 9 at most)."""


def _spread(ratios: list[float]) -> tuple[float, float]:
    """Share of ratios within +-2% of 1, and the 95th percentile of |ratio - 1|."""
    deviations = sorted(abs(r - 1.0) for r in ratios)
    within = sum(d <= 0.02 for d in deviations) / len(deviations)
    return within, deviations[max(0, int(0.95 * len(deviations)) - 1)]


def test_aa_across_processes(ortperf: Any, record_property: Any) -> None:
    """A/A of fresh worker pairs, beside the in-process A/A of today's compare."""
    model = models.attention()
    config = EngineConfig(budget_s=BUDGET)
    local_a, local_b = OrtSession.create(model), OrtSession.create(model)
    feeds = make_feeds(input_specs(local_a.sess), dims={"B": 4})
    remote, local, walls = [], [], []
    with RemoteEnvironment(sys.executable) as env:
        for i in range(REPEATS):
            t0 = time.perf_counter()
            with env.session(model) as a, env.session(model) as b:
                result = measure_ab(a, b, feeds, config=config, name=f"aa_{i}")
            walls.append(time.perf_counter() - t0)
            remote.append(result.ratio)
            local.append(ortperf.compare(local_a, local_b, feeds, name=f"local_{i}").ratio)
    r_within, r_p95 = _spread(remote)
    l_within, l_p95 = _spread(local)
    print(
        f"\nA/A across processes: {r_within:.0%} of {REPEATS} ratios within +-2% (target >= "
        f"{TARGET_WITHIN:.0%}), p95 |ratio-1| = {r_p95:.4f}, median wall "
        f"{sorted(walls)[len(walls) // 2]:.2f} s per A/B (2 worker starts included)\n"
        f"A/A in process (ortperf.compare): {l_within:.0%} within +-2%, p95 |ratio-1| = "
        f"{l_p95:.4f}"
        + ("" if ortperf.measured else " (smoke mode: run with --ortperf for real figures)")
    )
    record_property("aa_process_within_2pct", r_within)
    record_property("aa_process_p95", r_p95)
    record_property("aa_inprocess_within_2pct", l_within)
    record_property("aa_inprocess_p95", l_p95)
    assert len(remote) == REPEATS


def _boundary_pairs(remote: Any, call: Any, k: int) -> tuple[list[tuple[float, float]], int]:
    """Clean (not preempted) block pairs (worker, in-process) of ``k`` calls, ABBA."""
    pairs: list[tuple[float, float]] = []
    start = time.perf_counter()
    rounds = 0
    while time.perf_counter() - start < 2 * BUDGET or len(pairs) < 10:
        times = [0.0, 0.0]
        clean = True
        for arm in order(rounds, 2):
            if arm == 0:
                ns, cpu_ns = remote.block(k)
            else:
                c0 = time.thread_time_ns()
                t0 = time.perf_counter_ns()
                for _ in range(k):
                    call()
                ns = time.perf_counter_ns() - t0
                cpu_ns = time.thread_time_ns() - c0
            times[arm] = ns * NS / k
            clean = clean and cpu_ns >= PREEMPTED_BELOW * ns
        rounds += 1
        if clean:
            pairs.append((times[0], times[1]))
    return pairs, rounds


def test_process_boundary(record_property: Any) -> None:
    """The same model's blocks in a worker and in this process, interleaved, same k."""
    model = models.attention()
    local = OrtSession.create(model)
    feeds = make_feeds(input_specs(local.sess), dims={"B": 4})
    call = make_call(local, feeds, "iobinding")[0]
    engine = Engine(EngineConfig(budget_s=BUDGET))
    k = engine.calibrate(call)
    mask = os.sched_getaffinity(0)
    with (
        RemoteEnvironment(sys.executable) as env,
        env.session(model) as remote,
        shared_feeds([remote], feeds, "iobinding"),
    ):
        # the worker and this thread on the same CPU, as the workers of an A/B are
        cpu = pin_together([remote])
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        try:
            remote.warm_up(engine.config)
            pairs, rounds = _boundary_pairs(remote, call, k)
        finally:
            os.sched_setaffinity(0, mask)
    estimate = paired_ratio([w / p for w, p in pairs], 0.95)
    print(
        f"\nprocess boundary: worker / in-process = {estimate.ratio:.4f} "
        f"[{estimate.low:.4f}, {estimate.high:.4f}] over {len(pairs)} clean block pairs "
        f"of {k} calls ({rounds} rounds), target within +-{TARGET_BOUNDARY:.0%}"
    )
    record_property("boundary_ratio", estimate.ratio)
    assert pairs


def _sklearn_model() -> onnx.ModelProto:
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_classification(n_samples=400, n_features=20, random_state=0)
    forest = RandomForestClassifier(n_estimators=50, max_depth=8, random_state=0).fit(X, y)
    model = skl2onnx.to_onnx(
        forest, X[:1].astype(np.float32), options={"zipmap": False},
        target_opset={"": OPSET, "ai.onnx.ml": 3},
    )  # fmt: skip
    model.ir_version = min(model.ir_version, IR_VERSION)
    return model


def _cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)

    def init(name: str, *shape: int) -> onnx.TensorProto:
        data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        return onnx.numpy_helper.from_array(data, name)

    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        oh.make_node("Relu", ["c1"], ["r1"]),
        oh.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        oh.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        oh.make_node("BatchNormalization", ["c2", "s", "bias", "mean", "var"], ["n2"]),
        oh.make_node("Relu", ["n2"], ["r2"]),
        oh.make_node("GlobalAveragePool", ["r2"], ["g"]),
        oh.make_node("Flatten", ["g"], ["f"]),
        oh.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = [
        init("w1", 16, 3, 3, 3), init("b1", 16), init("w2", 32, 16, 3, 3), init("b2", 32),
        init("wf", 10, 32), init("bf", 10),
        onnx.numpy_helper.from_array(np.ones(32, np.float32), "s"),
        onnx.numpy_helper.from_array(np.zeros(32, np.float32), "bias"),
        onnx.numpy_helper.from_array(np.zeros(32, np.float32), "mean"),
        onnx.numpy_helper.from_array(np.ones(32, np.float32), "var"),
    ]  # fmt: skip
    graph = oh.make_graph(
        nodes, "cnn",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        inits,
    )  # fmt: skip
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)], ir_version=IR_VERSION)


MODELS: dict[str, tuple[Any, dict[str, Any]]] = {
    "attention": (models.attention, {"dims": {"B": 4}}),
    "sklearn_forest": (_sklearn_model, {"shapes": {"X": (16, 20)}}),
    "cnn": (_cnn, {"dims": {"N": 1}}),
}


@pytest.fixture(scope="module")
def old_env() -> Any:
    return ensure(EnvSpec.parse(OLD))


@pytest.mark.parametrize("name", list(MODELS))
def test_ab_real_versions(name: str, old_env: Any, record_property: Any) -> None:
    build, inputs = MODELS[name]
    result = ab(build(), old_env, sys.executable, **inputs, budget_s=2 * BUDGET,
                profile_runs=3 if TINY else 20)  # fmt: skip
    print(f"\n{name}: {OLD} (A) vs this environment (B)")
    for line in result.lines():
        print(f"  {line}")
    record_property(f"{name}_ratio", result.comparison.ratio)
    record_property(f"{name}_interval", [result.comparison.low, result.comparison.high])
    record_property(f"{name}_structure", list(result.structure))
    assert result.versions[0] != result.versions[1] or sys.executable == OLD
