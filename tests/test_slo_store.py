"""Latency budgets in the results store (real SQLite): verdicts survive the round trip as
plain JSON, and the history of a budget's quantile shows in ``ortperf changes``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ortperf_store_factories import ENV, latency

from pytest_ortperf.gating.history_changes import BUDGET_KIND, history_changes
from pytest_ortperf.gating.slo import Budget, judge
from pytest_ortperf.results import PerCallResult, Record
from pytest_ortperf.store.read import load_records
from pytest_ortperf.store.write import save_run

T0 = 1_700_000_000.0
TEST = "tests/test_m.py::test_tail"


def per_call(p99_ms: float) -> PerCallResult:
    """1000 calls of 1 ms, 15 of them at ``p99_ms`` (the p99): judged against 20 ms."""
    calls = tuple([1e-3] * 985 + [p99_ms * 1e-3] * 15)
    verdict = judge(calls, Budget("p99", 0.99, 0.02), 0.01)
    return PerCallResult(
        test=TEST, name="tail", api="run", calls=calls, timer_cost=0.0, calls_per_round=100,
        blocks=(1e-3,) * 10, calls_per_block=100, measured=True, slo=(verdict,),
    )  # fmt: skip


def save(path: Path, i: int, records: list[Record]) -> int:
    return save_run(
        path,
        started=T0 + 60 * i,
        finished=T0 + 60 * i + 5,
        command_line="pytest --ortperf",
        git={"commit": f"c{i:03d}" + "f" * 36, "branch": "main", "dirty": False},
        environment=ENV,
        records=records,
    )


def test_verdicts_round_trip_as_plain_json(tmp_path: Path) -> None:
    violated = judge([1e-3] * 50, Budget("p99", 0.99, 5e-5), 0.01)  # too few for an upper bound
    assert violated.outcome == "violated"
    lat = dataclasses.replace(latency(TEST.replace("tail", "lat")), slo=(violated,))
    tail = per_call(5.0)
    json.dumps([lat.to_dict(), tail.to_dict()], allow_nan=False)  # no NaN, no Infinity
    path = tmp_path / "results.sqlite"
    run_id = save(path, 0, [lat, tail])
    loaded = {r.name: r for r in load_records(path, run_id)}
    assert [v.message for v in loaded[lat.name].slo] == [violated.message]  # type: ignore[union-attr]
    assert loaded["tail"].slo == tail.slo  # type: ignore[union-attr]


def test_a_budget_being_eaten_shows_in_changes(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    for i, p99 in enumerate([5.0] * 8 + [6.0] * 8):  # p99 20% up from the 9th run
        save(path, i, [per_call(p99)])
    found = [c for c in history_changes(str(path)) if c.kind == BUDGET_KIND]
    assert [(c.name, c.change.run_id) for c in found] == [("tail [p99 budget]", 9)]
    assert found[0].change.change > 0.15
