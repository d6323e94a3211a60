"""The real custom-op library the tests register: onnxruntime-extensions (the test
extra), and a model that needs it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh


def inverse_model() -> onnx.ModelProto:
    """Y = Inverse(X), a 3x3 float matrix: ``ai.onnx.contrib``'s op."""
    model = oh.make_model(
        oh.make_graph(
            [oh.make_node("Inverse", ["X"], ["Y"], domain="ai.onnx.contrib")],
            "inverse",
            [oh.make_tensor_value_info("X", TensorProto.FLOAT, [3, 3])],
            [oh.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 3])],
        ),
        opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("ai.onnx.contrib", 1)],
    )
    model.ir_version = 9
    return model


def extensions_library() -> str:
    """The library's path; skips the test where onnxruntime-extensions is missing.

    Found without importing the package: a pytester test drops the modules it imported,
    and importing onnxruntime-extensions again registers its Python ops with the library
    a second time, after which ORT refuses it (``Conflicting with a registered kernel``)."""
    spec = importlib.util.find_spec("onnxruntime_extensions")
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    found = [p for folder in folders for p in sorted(Path(folder).glob("_extensions_pydll*"))]
    if not found:
        pytest.skip("pip install onnxruntime-extensions (the test extra)")
    return str(found[0])
