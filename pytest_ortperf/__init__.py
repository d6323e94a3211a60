"""pytest-ortperf: performance regression testing of ONNX models on onnxruntime.

Importing this package is cheap: onnxruntime and pandas are imported only by the
functions that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"

import importlib
from typing import Any

# Public names imported on first access, keeping ``import pytest_ortperf`` cheap.
_LAZY: dict[str, str] = {
    "read_profile": "pytest_ortperf.profiling.parse",
    "compare_profiles": "pytest_ortperf.profiling.parse",
    "Profile": "pytest_ortperf.profiling.parse",
    "ProfileComparison": "pytest_ortperf.profiling.parse",
    "profile_session": "pytest_ortperf.profiling.run",
    "peak_memory": "pytest_ortperf.profiling.memory",
    "MemoryResult": "pytest_ortperf.results",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
