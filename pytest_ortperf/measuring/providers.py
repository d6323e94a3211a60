"""Facts about onnxruntime's execution providers, as plain data (no onnxruntime import).

Which package brings a provider (for skip reasons), which device its tensors live on (for
IOBinding), and how long its first runs may take (for warm-up bounds).
"""

from __future__ import annotations

from collections.abc import Iterable

PROVIDER_PACKAGES: dict[str, str] = {
    "CUDAExecutionProvider": "onnxruntime-gpu",
    "TensorrtExecutionProvider": "onnxruntime-gpu (with TensorRT installed)",
    "DmlExecutionProvider": "onnxruntime-directml (Windows)",
    "OpenVINOExecutionProvider": "onnxruntime-openvino",
    "QNNExecutionProvider": "onnxruntime-qnn",
    "CoreMLExecutionProvider": "onnxruntime (macOS builds include it)",
    "MIGraphXExecutionProvider": "onnxruntime-migraphx (ROCm)",
    "CANNExecutionProvider": "onnxruntime-cann",
    "VitisAIExecutionProvider": "onnxruntime-vitisai",
    "DnnlExecutionProvider": "an onnxruntime build with --use_dnnl (no PyPI wheel)",
    "XnnpackExecutionProvider": "an onnxruntime build with --use_xnnpack (no PyPI wheel)",
    "WebGpuExecutionProvider": "onnxruntime-webgpu",
    "AzureExecutionProvider": "onnxruntime (included)",
    "CPUExecutionProvider": "onnxruntime (included)",
}
"""Provider -> the package (or build) that provides it, as a skip reason names it."""

PROVIDER_DEVICES: dict[str, str] = {
    "CUDAExecutionProvider": "cuda",
    "TensorrtExecutionProvider": "cuda",
    "DmlExecutionProvider": "dml",
    "CANNExecutionProvider": "cann",
}
"""Provider -> the IOBinding device type of its tensors. Other providers take host memory
in ORT's Python API (``cpu``)."""

DEVICES: tuple[str, ...] = ("cpu", "cuda", "dml", "cann")
"""The device types :class:`~pytest_ortperf.measuring.calls.OrtBinding` accepts."""

WARMUP_BOUND_S: dict[str, float] = {
    "CPUExecutionProvider": 0.1,
    "CUDAExecutionProvider": 2.0,
    "DmlExecutionProvider": 2.0,
    "CANNExecutionProvider": 2.0,
    "MIGraphXExecutionProvider": 10.0,
    "OpenVINOExecutionProvider": 10.0,
    "TensorrtExecutionProvider": 60.0,
}
"""Provider -> the longest warm-up of one target, in seconds. The first runs of a GPU
session search cuDNN algorithms and grow arenas; TensorRT builds its engines on the first
run (tens of seconds for a large model unless its engine cache is on). Providers not listed
get :data:`DEFAULT_WARMUP_BOUND_S`."""

DEFAULT_WARMUP_BOUND_S = 2.0


def install_hint(provider: str) -> str:
    """``"provided by onnxruntime-gpu"`` or a generic hint for a provider not listed."""
    package = PROVIDER_PACKAGES.get(provider)
    if package is None:
        return "provided by a build of onnxruntime that includes it"
    return f"provided by {package}"


def device_for(providers: Iterable[str]) -> str:
    """The device an IOBinding of a session with these providers (in priority order)
    should hold its tensors on: that of the first provider with a device, else ``cpu``."""
    for provider in providers:
        if provider in PROVIDER_DEVICES:
            return PROVIDER_DEVICES[provider]
    return "cpu"


def providers_for_device(device: str) -> tuple[str, ...]:
    """The providers whose tensors live on ``device`` (empty for ``cpu``: any provider)."""
    return tuple(p for p, d in PROVIDER_DEVICES.items() if d == device)


def warmup_bound(providers: Iterable[str]) -> float:
    """The warm-up bound of a target running on these providers: the largest of theirs."""
    bounds = [WARMUP_BOUND_S.get(p, DEFAULT_WARMUP_BOUND_S) for p in providers]
    return max(bounds, default=WARMUP_BOUND_S["CPUExecutionProvider"])
