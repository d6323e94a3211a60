"""The recorder package's shared pieces: the recording, the facade's attributes, the
figure of a record, and throughput's figures (pure: injected windows, no timing)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

import pytest_ortperf
from pytest_ortperf import models
from pytest_ortperf.measuring.engine import Engine, EngineConfig
from pytest_ortperf.measuring.session import OrtSession, SessionSettings
from pytest_ortperf.measuring.throughput import LevelRun, level_figures, thread_counts
from pytest_ortperf.recorder import Recorder
from pytest_ortperf.recorder.recording import Recording
from pytest_ortperf.results import (
    ATTRIBUTION_PROPERTY,
    USER_PROPERTY,
    VERDICTS_PROPERTY,
    Outcome,
    Verdict,
    figure_of,
)
from pytest_ortperf.testing import ScriptedEngine


def test_a_name_is_claimed_once_per_test_with_the_message_of_its_kind() -> None:
    recording = Recording("t", True, [])
    recording.claim("a", gated=True)
    with pytest.raises(ValueError, match=r"give each latency/compare its own name= \(baseline"):
        recording.claim("a", gated=True)
    recording.claim("b", gated=False)
    with pytest.raises(ValueError, match=r"give each measurement its own name=$"):
        recording.claim("b", gated=False)
    with pytest.raises(ValueError, match="'b' is already used"):
        recording.claim("b", gated=True)  # gated and ungated kinds share the namespace


def _verdict(metric: str, message: str) -> Verdict:
    return Verdict(
        metric=metric, outcome=Outcome.REGRESSED, baseline=1.0, current=1.2, change=0.2,
        low=0.1, high=0.3, threshold=0.05, alpha=0.01, p_value=1e-4, n=9, message=message,
    )  # fmt: skip


def test_failures_wait_and_attribution_is_asked_only_for_timing_verdicts() -> None:
    properties: list[tuple[str, object]] = []
    recording = Recording("t", True, properties)
    structure = _verdict("structure", "lost fusion")
    ratio = _verdict("ratio", "slower")
    asked: list[int] = []

    def attribution() -> list[str]:
        asked.append(1)
        return ["  MatMul: 1.0 -> 2.0 us/run"]

    recording.gate_failed("a", [structure], [structure], attribution=attribution)
    assert not asked and not properties
    recording.gate_failed("b", [ratio], [ratio, structure], attribution=attribution)
    assert asked == [1]
    assert properties == [
        (ATTRIBUTION_PROPERTY, {"test": "t", "name": "b", "lines": ["  MatMul: 1.0 -> 2.0 us/run"]})
    ]
    first, second = recording.failures
    assert first.startswith("ortperf: 'a' failed its performance gate")
    assert second.splitlines()[1] == "  FAIL ratio: slower"
    assert second.endswith("\n  MatMul: 1.0 -> 2.0 us/run")
    recording.tail_failed("c", [ratio])
    assert recording.failures[-1] == "ortperf: 'c' failed its tail rule\n  FAIL ratio: slower"
    recording.blind_baseline("too noisy")
    assert recording.failures[-1] == "ortperf: too noisy"


def test_records_reach_user_properties_only_when_measured() -> None:
    session = OrtSession.create(models.linear_regression())
    feeds = {"X": np.ones((1, 10), np.float32)}
    for measured in (False, True):
        properties: list[tuple[str, object]] = []
        rec = Recorder(
            test="t", measured=measured, engine=ScriptedEngine(measure=[[1e-3] * 9]),
            user_properties=properties, latency_mode="absolute",
        )  # fmt: skip
        result = rec.latency(session, feeds, name="lr")
        assert rec.records == [result]
        keys = [k for k, _ in properties]
        assert keys == ([USER_PROPERTY] if measured else [])
        assert VERDICTS_PROPERTY not in keys


def test_attributes_set_on_the_recorder_reach_every_kind() -> None:
    rec = Recorder(test="t", measured=False, engine=Engine(EngineConfig()), user_properties=[])
    engine = Engine(EngineConfig(budget_s=0.5))
    rec.engine = engine
    rec.marker_slo = "5 ms"
    assert rec.context.engine is engine and rec.engine is engine
    assert rec.context.marker_slo == "5 ms"
    assert rec.test == "t" and rec.measured is False and rec.failures == []


def test_the_figure_of_a_record_is_its_ratio_or_its_median() -> None:
    assert figure_of({"kind": "compare", "ratio": 0.9, "median": 2.0}) == 0.9
    assert figure_of({"kind": "latency", "ratio": None, "median": 2e-3}) == 2e-3
    for row in (
        {"kind": "memory", "median": None},
        {"kind": "compare", "ratio": math.nan},
        {"kind": "latency", "median": math.inf},
        {"kind": "latency", "median": "damaged"},
        {},
    ):
        assert figure_of(row) is None, row


def test_throughput_figures_pool_each_levels_windows() -> None:
    runs = {
        1: [LevelRun(1, 2, 0.5, (1_000_000, 3_000_000)), LevelRun(1, 1, 0.25, (2_000_000,))],
        2: [LevelRun(2, 4, 0.0, (1_000_000,) * 4)],
    }
    one, two = level_figures(runs, "throughput 'x'")
    assert (one.concurrency, one.calls, one.seconds) == (1, 3, 0.75)
    assert one.rates == (4.0, 4.0)
    assert one.p50 == pytest.approx(2e-3) and one.mean == pytest.approx(2e-3)
    assert two.rates == ()  # a window of no duration gives no rate
    with pytest.raises(RuntimeError, match=r"throughput 'x': no call finished at 3 threads"):
        level_figures({3: [LevelRun(3, 0, 0.1, ())]}, "throughput 'x'")


def test_thread_counts_follow_options_over_threads() -> None:
    assert thread_counts(SessionSettings.of()) == (1, 1)
    assert thread_counts(SessionSettings.of(threads=4)) == (4, 0)
    options = {"intra_op_num_threads": 3, "inter_op_num_threads": 2}
    assert thread_counts(SessionSettings.of(threads=1, options=options)) == (3, 2)


RECORDER = Path(pytest_ortperf.__file__).parent / "recorder"


def test_the_recorder_reaches_into_no_private_attribute() -> None:
    # Each kind works through the public interface of the context, the recording and the
    # measuring modules: ``x._name`` only on ``self`` (``sys._getframe`` aside).
    wrong = []
    for path in sorted(RECORDER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "sys"))
            ):
                wrong.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert not wrong, wrong


def test_the_facade_delegates_in_a_few_lines() -> None:
    tree = ast.parse((RECORDER / "facade.py").read_text(encoding="utf-8"))
    (recorder,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Recorder"]
    methods = [n for n in recorder.body if isinstance(n, ast.FunctionDef)]
    assert len(methods) >= 10
    for method in methods:
        body = [
            n
            for n in method.body
            if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        assert len(body) <= 6, f"Recorder.{method.name}: {len(body)} statements"
