"""numpy arrays <-> OrtValues, bfloat16 included.

numpy has no bfloat16: feeds of that type are numpy arrays of ``ml_dtypes.bfloat16`` (the
dtype JAX and onnx use; a dependency of onnx itself). ORT's Python API neither takes such
arrays in ``InferenceSession.run`` nor returns them (``OrtValue.numpy()`` raises "No
corresponding Numpy type" for bfloat16), so they cross the boundary as raw 16-bit patterns:
in through ``OrtValue.ortvalue_from_numpy_with_onnx_type(bits, TensorProto.BFLOAT16)``, out by
copying a host OrtValue's bytes (``data_ptr``, ``tensor_size_in_bytes``) and viewing them as
``ml_dtypes.bfloat16``. :func:`run_plain` runs a session on such feeds through an IOBinding
with host outputs; it is ``InferenceSession.run`` for every other model.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

from pytest_ortperf.measuring.feeds import BFLOAT16

BFLOAT16_ONNX = 16
"""``onnx.TensorProto.BFLOAT16``."""

BFLOAT16_TYPE = "tensor(bfloat16)"


def is_bfloat16(dtype: np.dtype[Any]) -> bool:
    return bool(dtype == BFLOAT16)


def has_bfloat16(sess: Any) -> bool:
    """Whether an ``InferenceSession`` has a bfloat16 input or output (``run`` cannot
    take or return those)."""
    return any(v.type == BFLOAT16_TYPE for v in (*sess.get_inputs(), *sess.get_outputs()))


def ort_value(array: np.ndarray[Any, Any], device: str = "cpu", device_id: int = 0) -> ort.OrtValue:
    """An OrtValue of ``array`` on ``device`` (a copy there; on the CPU it shares the
    array's memory, as ``OrtValue.ortvalue_from_numpy`` does). A bfloat16 array goes in as
    its bit pattern, on the host: an IOBinding copies it to the session's device once, when
    it is bound (ORT's Python API creates bfloat16 values from numpy on the host only)."""
    array = np.ascontiguousarray(array)
    if is_bfloat16(array.dtype):
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), BFLOAT16_ONNX)
    return ort.OrtValue.ortvalue_from_numpy(array, device, device_id)


def empty_value(
    shape: Sequence[int], dtype: np.dtype[Any], device: str = "cpu", device_id: int = 0
) -> ort.OrtValue:
    """An uninitialised tensor OrtValue of ``shape`` and ``dtype`` on ``device`` (an
    output buffer to bind)."""
    element: Any = BFLOAT16_ONNX if is_bfloat16(dtype) else dtype
    return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), element, device, device_id)


def to_numpy(value: ort.OrtValue) -> Any:
    """The host OrtValue ``value`` as numpy (bfloat16 as ``ml_dtypes.bfloat16``, copied)."""
    if value.is_tensor() and value.data_type() == BFLOAT16_TYPE:
        if value.device_name().lower() != "cpu":
            raise ValueError(
                f"a bfloat16 OrtValue on {value.device_name()} cannot be read directly; "
                "bind the output to the host (cpu) to read it"
            )
        shape = tuple(value.shape())
        count = math.prod(shape)
        raw = ctypes.string_at(value.data_ptr(), 2 * count) if count else b""
        return np.frombuffer(raw, dtype=np.uint16).reshape(shape).view(BFLOAT16).copy()
    return value.numpy()


def run_plain(sess: Any, feeds: Mapping[str, Any], names: Sequence[str] | None = None) -> list[Any]:
    """``sess.run(names, feeds)`` of an ``InferenceSession``, for bfloat16 models too:
    those run through an IOBinding, inputs as OrtValues, outputs on the host. The
    outputs are numpy arrays (or what ``run`` returns for non-tensors)."""
    if not has_bfloat16(sess):
        return list(sess.run(names, dict(feeds)))
    binding = sess.io_binding()
    keep = []  # the OrtValues must outlive the run
    for name, array in feeds.items():
        value = ort_value(np.asarray(array))
        keep.append(value)
        binding.bind_ortvalue_input(name, value)
    wanted = list(names) if names is not None else [o.name for o in sess.get_outputs()]
    for name in wanted:
        binding.bind_output(name, "cpu")
    sess.run_with_iobinding(binding)
    return [to_numpy(v) for v in binding.get_outputs()]
