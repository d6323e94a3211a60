"""pytest-ortperf: performance regression testing of ONNX models on onnxruntime.

The public API is what ``__all__`` names (README, "Public API"); each name is imported on
first access, so ``import pytest_ortperf`` stays cheap: onnxruntime, pandas and the store's
SQLAlchemy are imported only by what needs them.
"""

from __future__ import annotations

__version__ = "0.1.0"

import importlib
from typing import Any

# name -> module that defines it
_LAZY: dict[str, str] = {
    # records of a measurement and of a verdict
    "LatencyResult": "pytest_ortperf.results",
    "Comparison": "pytest_ortperf.results",
    "MemoryResult": "pytest_ortperf.results",
    "ColdStartResult": "pytest_ortperf.results",
    "PerCallResult": "pytest_ortperf.results",
    "ThroughputResult": "pytest_ortperf.results",
    "ThroughputLevel": "pytest_ortperf.results",
    "SessionInfo": "pytest_ortperf.results",
    "OutputDiff": "pytest_ortperf.results",
    "Verdict": "pytest_ortperf.results",
    "Judgement": "pytest_ortperf.results",
    "Outcome": "pytest_ortperf.results",
    # what the fixtures return
    "OrtSession": "pytest_ortperf.measuring.session",
    "OrtBinding": "pytest_ortperf.measuring.calls",
    "Recorder": "pytest_ortperf.recorder",
    "RemoteEnvironment": "pytest_ortperf.remote.sessions",
    "RemoteSession": "pytest_ortperf.remote.sessions",
    # inputs
    "FeedPool": "pytest_ortperf.measuring.recorded_feeds",
    "load_feeds": "pytest_ortperf.measuring.recorded_feeds",
    # timing, and what tests inject instead
    "Engine": "pytest_ortperf.measuring.engine",
    "EngineConfig": "pytest_ortperf.measuring.engine",
    "TimingEngine": "pytest_ortperf.measuring.engine",
    "ScriptedEngine": "pytest_ortperf.testing",
    "ScriptedLauncher": "pytest_ortperf.testing",
    # profiles and memory
    "read_profile": "pytest_ortperf.profiling.parse",
    "compare_profiles": "pytest_ortperf.profiling.compare",
    "Profile": "pytest_ortperf.profiling.parse",
    "ProfileComparison": "pytest_ortperf.profiling.compare",
    "profile_session": "pytest_ortperf.profiling.run",
    "peak_memory": "pytest_ortperf.profiling.memory",
    # the gate's pure rules
    "judge_ratio": "pytest_ortperf.gating.rules",
    "ratio_baseline": "pytest_ortperf.gating.rules",
    "RatioBaseline": "pytest_ortperf.gating.rules",
    "judge_against_runs": "pytest_ortperf.gating.history",
    "judge_structure": "pytest_ortperf.gating.structure",
    "judge_tail": "pytest_ortperf.gating.tails",
    "judge_memory": "pytest_ortperf.gating.memory_rule",
    # the results store
    "read_results": "pytest_ortperf.store.read",
    "list_runs": "pytest_ortperf.store.read",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
