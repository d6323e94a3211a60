"""``--ortperf-update-processes``: a baseline taken in several processes.

The merge of the processes' records is checked on constructed records; the update itself
with real sessions in real further pytest processes (a tiny model and a short budget: what
is checked is where the runs went, never how fast they were).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_gating_baseline import ENV, compare_record, latency_record, normalized_record

from pytest_ortperf import scratch
from pytest_ortperf.gating.baseline_entries import entry_from_record
from pytest_ortperf.gating.baseline_judge import ratio_baseline_of
from pytest_ortperf.gating.baseline_schema import BESIDE, BESIDE_RATIOS, entry_problem
from pytest_ortperf.gating.beside import as_compare_entry
from pytest_ortperf.gating.gate import DETECTS
from pytest_ortperf.results import GATED, PROCESSES
from pytest_ortperf.stats import paired_ratio
from pytest_ortperf.update_processes import (
    _forwarded,
    _launcher,
    merge_process_records,
    read_part,
    write_part,
)


def runs_of(payload: dict[str, Any], sizes: list[int]) -> dict[str, Any]:
    """``payload`` as a baseline's record: gated, its blocks split into runs of ``sizes``."""
    return {**payload, "runs": sizes, GATED: True}


def blocks(centre: float, n: int) -> list[float]:
    """``n`` block ratios around ``centre``, a little apart."""
    return [centre * (1.0 + 0.002 * ((i % 5) - 2)) for i in range(n)]


def test_a_compare_gets_every_process_runs_in_order() -> None:
    own = runs_of(compare_record(blocks(0.90, 4) + blocks(0.91, 4)), [4, 4])
    second = runs_of(compare_record(blocks(0.95, 3) + blocks(0.96, 5)), [3, 5])
    third = runs_of(compare_record(blocks(0.99, 6)), [6])
    [merged] = merge_process_records([own], [[second], [third]], 0.01)
    ratios = own["block_ratios"] + second["block_ratios"] + third["block_ratios"]
    assert merged["block_ratios"] == pytest.approx(ratios)
    assert merged["runs"] == [4, 4, 3, 5, 6]
    assert merged[PROCESSES] == [2, 2, 1]
    assert merged["ratio"] == pytest.approx(paired_ratio(ratios, 0.95).ratio)
    assert merged[DETECTS] > 0  # what the pooled runs can see, not this process's alone
    assert len(merged["candidate"]["samples"]) == len(ratios)
    assert merged[GATED] is True

    entry = entry_from_record(merged, ENV)
    assert entry["runs"] == [4, 4, 3, 5, 6]
    assert entry[PROCESSES] == [2, 2, 1]
    assert entry["n"] == len(ratios)
    assert entry_problem(entry) is None


def test_a_normalized_latency_gets_every_process_runs_and_control() -> None:
    own = runs_of(normalized_record(blocks(1e-3, 3) + blocks(1.1e-3, 3)), [3, 3])
    other = runs_of(normalized_record(blocks(1.2e-3, 4)), [4])
    [merged] = merge_process_records([own], [[other]], 0.01)
    assert merged["runs"] == [3, 3, 4]
    assert merged[PROCESSES] == [2, 1]
    assert len(merged["control"]["samples"]) == 10
    assert len(merged["block_ratios"]) == 10


def with_beside(payload: dict[str, Any], ratios: list[float], runs: list[int]) -> dict[str, Any]:
    """``payload`` keeping an A/A ratio baseline of ``ratios`` in ``runs`` (as
    ``--ortperf-update`` keeps one to judge a latency beside the baseline's model)."""
    summary = {"ratio": 1.0, "low": 0.99, "high": 1.01, "confidence": 0.95, "n": len(ratios)}
    return {**payload, BESIDE: {**summary, **({"runs": runs} if len(runs) > 1 else {})},
            BESIDE_RATIOS: ratios}  # fmt: skip


@pytest.mark.parametrize("mode", ["normalized", "absolute"])
def test_the_beside_baseline_gets_every_process_runs(mode: str) -> None:
    def record(centre: float, n: int) -> dict[str, Any]:
        if mode == "normalized":
            return runs_of(normalized_record(blocks(centre, n)), [n])
        return {**latency_record(blocks(centre, n)), GATED: True}

    own = with_beside(record(1e-3, 6), blocks(1.0, 6), [3, 3])
    other = with_beside(record(1.1e-3, 4), blocks(1.02, 4), [4])
    [merged] = merge_process_records([own], [[other]], 0.01)
    ratios = blocks(1.0, 6) + blocks(1.02, 4)
    assert merged[BESIDE_RATIOS] == pytest.approx(ratios)
    assert merged[BESIDE]["runs"] == [3, 3, 4]
    assert merged[BESIDE][PROCESSES] == [2, 1]
    assert merged[BESIDE]["ratio"] == pytest.approx(paired_ratio(ratios, 0.95).ratio)

    entry = entry_from_record(merged, ENV)
    assert entry_problem(entry) is None
    baseline = ratio_baseline_of(as_compare_entry(entry))
    assert baseline is not None and baseline.processes == 2 and baseline.runs == 3
    broken = {**entry, BESIDE: {**entry[BESIDE], PROCESSES: [1, 1]}}
    assert "must count its runs per process" in str(entry_problem(broken))


def test_a_beside_baseline_no_other_process_kept_stays_this_process_alone() -> None:
    own = with_beside(runs_of(normalized_record(blocks(1e-3, 4)), [4]), blocks(1.0, 4), [2, 2])
    other = runs_of(normalized_record(blocks(1e-3, 4)), [4])  # no artifact kept there
    [merged] = merge_process_records([own], [[other]], 0.01)
    assert merged[BESIDE] == own[BESIDE] and merged[BESIDE_RATIOS] == own[BESIDE_RATIOS]


def test_what_is_not_merged_stays_this_process_alone() -> None:
    absolute = {**latency_record([1e-3, 1.1e-3]), GATED: True}
    compare = runs_of(compare_record([0.9, 0.91]), [1, 1])
    elsewhere = runs_of(compare_record([0.8, 0.81], test="tests/test_x.py::test_other"), [1, 1])
    merged = merge_process_records(
        [absolute, compare], [[{**latency_record([5e-3]), GATED: True}, elsewhere]], 0.01
    )
    # An absolute latency keeps its own samples; a compare no other process recorded
    # (its test failed there) keeps its own runs and says nothing about processes.
    assert merged[0]["samples"] == absolute["samples"]
    assert merged[1]["block_ratios"] == compare["block_ratios"]
    assert PROCESSES not in merged[0] and PROCESSES not in merged[1]


def test_an_entry_whose_processes_do_not_add_up_is_refused() -> None:
    own = runs_of(compare_record([0.90, 0.91, 0.92, 0.93]), [2, 2])
    entry = {**entry_from_record(own, ENV), PROCESSES: [1, 2]}
    assert "field 'processes' must be counts of runs per process" in str(entry_problem(entry))


def test_a_part_file_round_trips_and_a_foreign_one_is_refused(tmp_path: Path) -> None:
    record = runs_of(compare_record([0.9, 0.91]), [1, 1])
    write_part(tmp_path / "part.json", [record])
    assert read_part(tmp_path / "part.json") == [record]
    (tmp_path / "other.json").write_text('{"entries": {}}')
    with pytest.raises(ValueError, match="not a part file"):
        read_part(tmp_path / "other.json")


def test_a_further_process_gets_no_basetemp_or_debugger_of_this_one() -> None:
    args = ["-q", "--basetemp", "/tmp/b", "--pdb", "--basetemp=/tmp/c", "--trace", "-k", "x"]
    assert _forwarded(args) == ["-q", "-k", "x"]
    # Started from Python code (this test's own command line does not end with these):
    assert _launcher(["--ortperf-update", "--no-such-arg"])[1:] == ["-m", "pytest"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ortperf-update", "--ortperf-update-processes", "0"], "from 1 to 10, got '0'"),
        (["--ortperf-update", "--ortperf-update-processes=11"], "from 1 to 10, got '11'"),
        (["--ortperf-update", "--ortperf-update-processes=two"], "whole number of processes"),
        (["--ortperf", "--ortperf-update-processes=2"], "pass it with --ortperf-update"),
    ],
)
def test_a_bad_process_count_is_a_usage_error(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--ortperf-update-processes*{message}*"])


TINY = """
import os
import pytest
from pytest_ortperf import models


@pytest.mark.ortperf(budget=0.05)
def test_tiny(ort_session, ort_feeds, ortperf, request):
    if request.config.getoption("ortperf_update_part") and os.environ.get("TINY_CRASH"):
        os._exit(3)  # a further process that dies
    reference = ort_session(models.tiny_add(), optimization="disable")
    candidate = ort_session(models.tiny_add())
    ortperf.compare(reference, candidate, ort_feeds(reference), name="add")
"""
RUN = ("-p", "no:cacheprovider", "--ortperf-store=none")


def _update_dirs() -> set[Path]:
    return {p for p in scratch.root().glob("run-*/update-*")}


def test_an_update_in_two_processes_keeps_both_processes_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tiny=TINY)
    before = _update_dirs()
    result = pytester.runpytest(*RUN, "--ortperf-update", "--ortperf-update-processes", "2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*taking the baselines again in process 2 of 2*",
            "*baselines taken in 2 processes (the further ones took * s)",
        ]
    )
    entry = json.loads((pytester.path / "__ortperf__" / "test_tiny.json").read_text())["entries"][
        "test_tiny::add"
    ]
    processes = entry[PROCESSES]
    assert len(processes) == 2 and all(n >= 2 for n in processes)
    assert sum(processes) == len(entry["runs"])
    # The candidate's A/A baseline (to judge it beside the baseline's) pools both too.
    beside = entry[BESIDE]
    assert len(beside[PROCESSES]) == 2 and sum(beside[PROCESSES]) == len(beside["runs"])
    assert _update_dirs() == before  # the parts and logs are gone

    # A later check reads the two-process baseline like any other.
    checked = pytester.runpytest(*RUN, "--ortperf")
    checked.assert_outcomes(passed=1)


def test_a_further_process_that_dies_leaves_the_baseline_as_it_was(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_tiny=TINY)
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    files = sorted((pytester.path / "__ortperf__").iterdir())
    before = {p.name: p.read_bytes() for p in files}

    monkeypatch.setenv("TINY_CRASH", "1")
    result = pytester.runpytest(*RUN, "--ortperf-update", "--ortperf-update-processes=2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*baselines NOT written: UpdateProcessError: process 2 of 2 (`*`) exited with status 3*"]
    )
    after = {p.name: p.read_bytes() for p in sorted((pytester.path / "__ortperf__").iterdir())}
    assert after == before


def test_an_interrupted_update_starts_no_further_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tiny=TINY + "\n\ndef test_stop():\n    raise KeyboardInterrupt\n")
    # In a process of its own: an inline run would carry the interrupt into this session.
    result = pytester.runpytest_subprocess(*RUN, "--ortperf-update", "--ortperf-update-processes=3")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "taking the baselines again" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*interrupted: baselines taken in this process only*"])
    entry = json.loads((pytester.path / "__ortperf__" / "test_tiny.json").read_text())["entries"][
        "test_tiny::add"
    ]
    assert PROCESSES not in entry
