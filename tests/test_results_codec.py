"""Records rebuilt from their dict form (``from_dict``, msgspec underneath): every kind
through JSON text, what a null stands for, and errors that name the record and the field."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_ortperf.gating.baseline import BaselineError, load_baseline
from pytest_ortperf.gating.baseline_schema import MAX_ENTRY_DEPTH
from pytest_ortperf.results import (
    ColdStartResult,
    Comparison,
    Judgement,
    LatencyResult,
    MemoryResult,
    Outcome,
    OutputDiff,
    PerCallResult,
    SessionInfo,
    SloVerdict,
    ThroughputLevel,
    ThroughputResult,
    Verdict,
    record_from_dict,
)

SESSION = SessionInfo(
    "m.onnx", ("CPUExecutionProvider",), "all", 1, False, (("Add", 2),), (("n", "Add", "CPU"),)
)
SLO = SloVerdict(
    "p99", "met", 0.01, False, 0.002, 0.0019, math.nan, 200, "calls", 0, 0, 0, 0.99, "any", "m"
)
SAMPLES = (0.0011, 0.0010, 0.0012, 0.0013)


def _latency(**changes: Any) -> LatencyResult:
    fields: dict[str, Any] = {"test": "t.py::t", "name": "lat", "api": "run"}
    fields.update(samples=SAMPLES, calls_per_block=10, measured=True, session=SESSION)
    return LatencyResult(**{**fields, **changes})


def _records() -> list[Any]:
    control = _latency(name="control", session=None)
    level = ThroughputLevel(2, 400, 1.0, (400.0, 398.0), 0.004, 0.005, 0.006, 0.0045)
    return [
        _latency(slo=(SLO,)),
        _latency(control=control, runs=(2, 2), preempted=1),
        Comparison(
            "t.py::t",
            "cmp",
            "run",
            _latency(),
            _latency(),
            (1.0,) * 4,
            1.0,
            0.9,
            1.1,
            0.98,
            True,
            (OutputDiff("y", 1e-6, 1e-5),),
            (2, 2),
        ),
        PerCallResult(
            "t.py::t",
            "tail",
            "run",
            SAMPLES * 5,
            1e-7,
            5,
            SAMPLES,
            10,
            True,
            SESSION,
            reference=PerCallResult("t.py::t", "ref", "run", SAMPLES, 0.0, 2, SAMPLES, 10, True),
        ),
        ThroughputResult("t.py::t", "tp", "run", (level,), "shared", 1, 1, False, 2, True),
        MemoryResult((10, 20), 5, "vmhwm", {"in_use_peak_max": 7}, "t.py::t", "mem"),
        ColdStartResult("t.py::t", "cold", SAMPLES, SAMPLES, imports=SAMPLES, session=SESSION),
    ]


@pytest.mark.parametrize("record", _records(), ids=lambda r: r.name)
def test_every_kind_survives_json_text(record: Any) -> None:
    data = json.loads(json.dumps(record.to_dict()))
    again = record_from_dict(data)
    assert again.to_dict().keys() == record.to_dict().keys()
    assert json.dumps(again.to_dict()) == json.dumps(record.to_dict())


def test_a_judgement_survives_json_text_with_nan_as_null() -> None:
    verdict = Verdict("ratio", Outcome.NEW, math.nan, 1.0, math.nan, math.nan, math.nan, 0.05,
                      0.01, None, 4, "new")  # fmt: skip
    data = json.loads(json.dumps(Judgement("t", "n", (verdict,)).to_dict()).replace("NaN", "null"))
    [again] = Judgement.from_dict(data).verdicts
    assert math.isnan(again.baseline) and math.isnan(again.change) and again.current == 1.0
    assert again.outcome is Outcome.NEW and again.p_value is None


def test_a_null_stands_for_the_default_and_derived_keys_are_recomputed() -> None:
    data = _latency().to_dict()
    data.update(preempted=None, runs=None, slo=None, control={}, session=None)
    data["summary"] = {"median": "not read"}  # derived: recomputed from the samples
    data["measured"] = 1  # as an SQL integer column gives it
    again = LatencyResult.from_dict(data)
    assert (again.preempted, again.runs, again.slo, again.control) == (0, (), (), None)
    assert again.session is None and again.measured is True
    assert again.median == pytest.approx(0.00115)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"samples": ["fast"]},
            r"invalid LatencyResult: Expected `float`, got `str` - at `\$\.samples\[0\]`",
        ),
        ({"calls_per_block": "many"}, r"invalid LatencyResult: .* - at `\$\.calls_per_block`"),
        ({"session": {"model": 1}}, r"invalid LatencyResult: session: KeyError\('providers'\)"),
        ({"samples": None}, r"invalid LatencyResult: .*`\$\.samples`"),
    ],
)
def test_a_mangled_field_is_a_value_error_naming_record_and_field(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        record_from_dict({**_latency().to_dict(), **change})


def test_a_missing_field_and_a_mangled_arm_are_named() -> None:
    data = _latency().to_dict()
    del data["samples"]
    with pytest.raises(
        ValueError, match="invalid LatencyResult: Object missing required field `samples`"
    ):
        record_from_dict(data)
    cmp = _records()[2].to_dict()
    cmp["reference"]["samples"] = [1.0, "x"]
    with pytest.raises(
        ValueError, match=r"invalid Comparison: reference: invalid LatencyResult: .*samples\[1\]"
    ):
        record_from_dict(cmp)


def _nested(depth: int) -> Any:
    value: Any = 1.0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("entry_field", ["ratio", "environment", "medians", "test"])
def test_a_deep_value_in_a_typed_field_is_named_not_shown(tmp_path: Path, entry_field: str) -> None:
    """Fields the schema types are not walked for their depth on the way in; a bad one is
    still reported as nested too deeply (never a RecursionError from showing it)."""
    entry = {"kind": "compare", "ratio": 1.0, "low": 0.9, "high": 1.1, "block_ratios": [1.0]}
    entry[entry_field] = _nested(900)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema": 1, "entries": {"t::c": entry}}))
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert str(info.value) == (
        f"{path}: entry 't::c': field {entry_field!r} is nested more than "
        f"{MAX_ENTRY_DEPTH} levels deep"
    )
