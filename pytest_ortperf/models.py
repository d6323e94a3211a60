"""Small ONNX models built with ``onnx.helper``: the seeds' scenarios, for examples,
benchmarks and tests.

Every builder returns an ``onnx.ModelProto`` with a symbolic batch dim where it makes sense.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as onh

OPSET = 18


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return onh.from_array(array, name)


def linear_regression(features: int = 10, seed: int = 0) -> onnx.ModelProto:
    """``X[N, features] @ coef + intercept`` reshaped to ``[N, 1]`` (seed 002's model)."""
    rng = np.random.default_rng(seed)
    nodes = [
        oh.make_node("MatMul", ["X", "coef"], ["multiplied"]),
        oh.make_node("Add", ["multiplied", "intercept"], ["resh"]),
        oh.make_node("Reshape", ["resh", "shape_tensor"], ["variable"]),
    ]
    graph = oh.make_graph(
        nodes,
        "linear_regression",
        [oh.make_tensor_value_info("X", TensorProto.FLOAT, ["N", features])],
        [oh.make_tensor_value_info("variable", TensorProto.FLOAT, ["N", 1])],
        [
            _init("coef", rng.standard_normal(features).astype(np.float32)),
            _init("intercept", np.array([0.5], dtype=np.float32)),
            _init("shape_tensor", np.array([-1, 1], dtype=np.int64)),
        ],
    )
    return _model(graph)


def attention(
    seq: int = 64,
    dim: int = 32,
    *,
    zero_pad: int = 0,
    fusable: bool = True,
    extra_add: bool = False,
    seed: int = 0,
    dtype: int = TensorProto.FLOAT,
) -> onnx.ModelProto:
    """``softmax((Q Wq) @ (K Wk)^T) @ V`` on ``[B, seq, dim]`` inputs.

    ``dtype`` is the ONNX element type of inputs, weights and outputs (``TensorProto.FLOAT``
    or ``TensorProto.FLOAT16``; the CPU provider runs float16 kernels where it has them and
    inserts Casts around the others).

    With ORT's optimizations the ``Transpose`` + ``MatMul`` fuse into ``FusedMatMul``.
    ``zero_pad`` widens the projections with zero columns: the same outputs and the same
    structure, more work (a slower candidate). ``fusable=False`` also returns the transposed
    keys, which keeps ORT from folding the ``Transpose``. ``extra_add`` appends an ``Add``.
    """
    rng = np.random.default_rng(seed)
    np_dtype = oh.tensor_dtype_to_np_dtype(dtype)
    weights = {}
    for name in ("Wq", "Wk"):
        w = np.zeros((dim, dim + zero_pad), dtype=np.float32)
        w[:, :dim] = rng.standard_normal((dim, dim)).astype(np.float32) / np.sqrt(dim)
        weights[name] = w.astype(np_dtype)
    inner = dim + zero_pad
    nodes = [
        oh.make_node("MatMul", ["Q", "Wq"], ["Qp"]),
        oh.make_node("MatMul", ["K", "Wk"], ["Kp"]),
        oh.make_node("Transpose", ["Kp"], ["Kt"], perm=[0, 2, 1]),
        oh.make_node("MatMul", ["Qp", "Kt"], ["scores"]),
        oh.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        oh.make_node("MatMul", ["probs", "V"], ["Y0" if extra_add else "Y"]),
    ]
    inits = [_init(name, w) for name, w in weights.items()]
    outputs = [oh.make_tensor_value_info("Y", dtype, ["B", seq, dim])]
    if extra_add:
        nodes.append(oh.make_node("Add", ["Y0", "bias"], ["Y"]))
        inits.append(_init("bias", np.full((dim,), 0.25, dtype=np_dtype)))
    if not fusable:
        outputs.append(oh.make_tensor_value_info("Kt", dtype, ["B", inner, seq]))
    graph = oh.make_graph(
        nodes,
        "attention",
        [oh.make_tensor_value_info(n, dtype, ["B", seq, dim]) for n in "QKV"],
        outputs,
        inits,
    )
    return _model(graph)


def gemm_concat(fused: bool, dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """Seed 003: two Gemm then Concat (``fused=False``) or Concat then one Gemm."""
    if fused:
        nodes = [
            oh.make_node("Concat", ["Y", "Z"], ["YZ"], axis=1),
            oh.make_node("Gemm", ["X", "YZ"], ["XYZ"]),
        ]
    else:
        nodes = [
            oh.make_node("Gemm", ["X", "Y"], ["XY"]),
            oh.make_node("Gemm", ["X", "Z"], ["XZ"]),
            oh.make_node("Concat", ["XY", "XZ"], ["XYZ"], axis=1),
        ]
    graph = oh.make_graph(
        nodes,
        "gemm_concat" + ("_fused" if fused else ""),
        [
            oh.make_tensor_value_info(n, dtype, ["M", "K"] if n == "X" else ["K", "N"])
            for n in "XYZ"
        ],
        [oh.make_tensor_value_info("XYZ", dtype, ["M", "N2"])],
    )
    return _model(graph)


def bfloat16_mlp(dim: int = 32, *, extra_add: bool = False, seed: int = 0) -> onnx.ModelProto:
    """A bfloat16 input ``X[B, dim]`` and output ``Y[B, 2 * dim]``: ``Concat(Cast(relu(X W +
    b)), X)``, the arithmetic in float32 between Casts.

    onnxruntime's CPU provider has bfloat16 kernels for Cast and data movement (Concat,
    Transpose, Identity, Flatten) but none for arithmetic (Add, MatMul, Relu: "Could not
    find an implementation", ORT 1.32), so a model with bfloat16 at its interface computes
    in float32 on the CPU; on CUDA, a model could keep bfloat16 throughout. ``extra_add``
    adds one more float32 ``Add`` (a slower candidate with the same interface)."""
    rng = np.random.default_rng(seed)
    weight = (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
    nodes = [
        oh.make_node("Cast", ["X"], ["Xf"], to=TensorProto.FLOAT),
        oh.make_node("MatMul", ["Xf", "W"], ["m"]),
        oh.make_node("Add", ["m", "b"], ["a"]),
    ]
    inits = [_init("W", weight), _init("b", np.full((dim,), 0.125, dtype=np.float32))]
    last = "a"
    if extra_add:
        nodes.append(oh.make_node("Add", ["a", "zero"], ["a2"]))
        inits.append(_init("zero", np.zeros((dim,), dtype=np.float32)))
        last = "a2"
    nodes += [
        oh.make_node("Relu", [last], ["h"]),
        oh.make_node("Cast", ["h"], ["hb"], to=TensorProto.BFLOAT16),
        oh.make_node("Concat", ["hb", "X"], ["Y"], axis=-1),
    ]
    graph = oh.make_graph(
        nodes,
        "bfloat16_mlp",
        [oh.make_tensor_value_info("X", TensorProto.BFLOAT16, ["B", dim])],
        [oh.make_tensor_value_info("Y", TensorProto.BFLOAT16, ["B", 2 * dim])],
        inits,
    )
    return _model(graph)


def kmeans(clusters: int = 8, features: int = 16, seed: int = 0) -> onnx.ModelProto:
    """Seed 001's KMeans graph: squared distances to centroids through ReduceSumSquare,
    Gemm and Add, then ArgMin for the label."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, features)).astype(np.float32)
    nodes = [
        oh.make_node("ReduceSumSquare", ["X", "axes"], ["x2"], keepdims=1),
        oh.make_node("Gemm", ["X", "C"], ["xc"], alpha=-2.0, transB=1),
        oh.make_node("Add", ["x2", "xc"], ["partial"]),
        oh.make_node("Add", ["partial", "c2"], ["dist"]),
        oh.make_node("ArgMin", ["dist"], ["label"], axis=1, keepdims=0),
    ]
    graph = oh.make_graph(
        nodes,
        "kmeans",
        [oh.make_tensor_value_info("X", TensorProto.FLOAT, ["N", features])],
        [
            oh.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
            oh.make_tensor_value_info("dist", TensorProto.FLOAT, ["N", clusters]),
        ],
        [
            _init("C", centers),
            _init("c2", (centers**2).sum(axis=1).astype(np.float32)),
            _init("axes", np.array([1], dtype=np.int64)),
        ],
    )
    return _model(graph)


def _mlp(name: str, batch: int | str, width: int, layers: int, seed: int) -> onnx.ModelProto:
    """``layers`` of MatMul + Add + Relu on ``X[batch, width]`` (``batch`` a size or a
    symbolic dim)."""
    rng = np.random.default_rng(seed)
    nodes = []
    inits = []
    current = "X"
    for i in range(layers):
        weight = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits += [_init(f"W{i}", weight), _init(f"b{i}", np.zeros(width, dtype=np.float32))]
        nodes += [
            oh.make_node("MatMul", [current, f"W{i}"], [f"m{i}"]),
            oh.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            oh.make_node("Relu", [f"a{i}"], [f"h{i}"]),
        ]
        current = f"h{i}"
    graph = oh.make_graph(
        nodes,
        name,
        [oh.make_tensor_value_info("X", TensorProto.FLOAT, [batch, width])],
        [oh.make_tensor_value_info(current, TensorProto.FLOAT, [batch, width])],
        inits,
    )
    return _model(graph)


def control(batch: int = 64, width: int = 256, layers: int = 2, seed: int = 0) -> onnx.ModelProto:
    """The control workload of normalized latencies: a small MLP (``layers`` of MatMul +
    Add + Relu on a fixed ``[batch, width]`` input, about 0.15 ms a call on
    one core). Compute- and cache-bound like most CPU models, so machine-wide slowdowns
    (frequency, a busy neighbour, a slower runner) hit it as they hit the target."""
    return _mlp("ortperf_control", batch, width, layers, seed)


def deep_chain(layers: int = 200, width: int = 16, seed: int = 0) -> onnx.ModelProto:
    """``layers`` of MatMul + Add + Relu on ``X[N, width]``: the more layers, the longer
    session creation takes (graph resolution, optimizers, fusions of each MatMul + Add, one
    kernel per node) while a run stays cheap: a model whose cold start grows with depth."""
    return _mlp("deep_chain", "N", width, layers, seed)


def tiny_add(n: int = 16) -> onnx.ModelProto:
    """``Y = X + X`` on ``X[1, n]``: one kernel and almost no work, so a call costs what
    onnxruntime's call path costs (about 5 us through ``run``, 2 us through IOBinding on
    one core here): the model of known, tiny cost the per-call benchmark checks against."""
    graph = oh.make_graph(
        [oh.make_node("Add", ["X", "X"], ["Y"])],
        "ortperf_tiny_add",
        [oh.make_tensor_value_info("X", TensorProto.FLOAT, [1, n])],
        [oh.make_tensor_value_info("Y", TensorProto.FLOAT, [1, n])],
    )
    return _model(graph)
