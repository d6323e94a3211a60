"""Baseline files: format, loading errors, atomic writes, update planning, judging."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_ortperf.gating.baseline import (
    SCHEMA_VERSION,
    Baseline,
    BaselineError,
    baseline_path,
    load_baseline,
    plan_update,
    prune_unused,
    samples_path,
    unused_entries,
    write_baseline,
)
from pytest_ortperf.gating.baseline_entries import ENVIRONMENT_KEYS, entry_from_record
from pytest_ortperf.gating.baseline_judge import judge_entry
from pytest_ortperf.results import Comparison, LatencyResult, Outcome, SessionInfo

TEST = "tests/test_models.py::test_fused"
ENV = {
    "ort_version": "1.32.0",
    "ort_build": "release",
    "cpu_model": "Intel Xeon",
    "isa": ["avx2", "avx512f", "fma"],
    "effective_cpus": 2,
    "logical_cores": 2,
    "fingerprint": "0123456789ab",
    "python_version": "3.11.7",
    "numpy_version": "2.0.0",
    "onnx_version": "1.17.0",
    "memory_bytes": 16 << 30,
}
CONTROL_SECONDS = 1e-4


def session(hist: dict[str, int], threads: int = 1) -> SessionInfo:
    return SessionInfo(
        model="m.onnx",
        providers=("CPUExecutionProvider",),
        optimization="all",
        threads=threads,
        spinning=False,
        op_histogram=tuple(sorted(hist.items())),
    )


def compare_record(
    ratios: list[float], cand_hist: dict[str, int] | None = None, test: str = TEST
) -> dict[str, Any]:
    ref_samples = tuple(1e-3 * (1 + 0.001 * i) for i in range(len(ratios)))
    cand_samples = tuple(r * s for r, s in zip(ratios, ref_samples, strict=True))
    ref = LatencyResult(test, "cmp:reference", "iobinding", ref_samples, 10, True,
                        session({"MatMul": 2, "Transpose": 1}))  # fmt: skip
    cand = LatencyResult(test, "cmp:candidate", "iobinding", cand_samples, 10, True,
                         session(cand_hist or {"FusedMatMul": 1, "MatMul": 1}))  # fmt: skip
    ordered = sorted(ratios)
    return Comparison(
        test=test,
        name="cmp",
        api="iobinding",
        reference=ref,
        candidate=cand,
        block_ratios=tuple(ratios),
        ratio=ordered[len(ordered) // 2],
        low=ordered[0],
        high=ordered[-1],
        confidence=0.95,
        measured=True,
    ).to_dict()


def latency_record(
    samples: list[float],
    threads: int = 1,
    test: str = TEST,
    *,
    control: list[float] | None = None,
) -> dict[str, Any]:
    """An absolute latency record, or a normalized one when ``control`` gives the control
    workload's samples (one per round, measured interleaved with the target)."""
    measured_control = None
    if control is not None:
        measured_control = LatencyResult(
            test, "ortperf-control", "iobinding", tuple(control), 50, True,
            session({"MatMul": 2, "Add": 2, "Relu": 2}, threads),
        )  # fmt: skip
    return LatencyResult(
        test, "lat", "run", tuple(samples), 50, True, session({"Relu": 1}, threads),
        control=measured_control,
    ).to_dict()  # fmt: skip


def normalized_record(
    samples: list[float], threads: int = 1, control_seconds: float = CONTROL_SECONDS
) -> dict[str, Any]:
    """A normalized latency record whose control took ``control_seconds`` in every round."""
    return latency_record(samples, threads, control=[control_seconds] * len(samples))


RATIOS = [0.9123456789 + 0.001 * (i % 5) for i in range(25)]
SAMPLES = [1.23456789e-3 * (1 + 0.002 * (i % 7)) for i in range(30)]


def entries() -> dict[str, dict[str, Any]]:
    cmp = entry_from_record(compare_record(RATIOS), ENV, updated="2026-01-02")
    lat = entry_from_record(latency_record(SAMPLES), ENV, updated="2026-01-02")
    return {f"{TEST}::cmp": cmp, f"{TEST}::lat": lat}


# --------------------------------------------------------------------------- format


def test_baseline_path() -> None:
    assert baseline_path(Path("/r/tests/test_models.py")) == Path(
        "/r/tests/__ortperf__/test_models.json"
    )


def test_entry_from_record_contents() -> None:
    e = entries()
    cmp, lat = e[f"{TEST}::cmp"], e[f"{TEST}::lat"]
    assert cmp["kind"] == "compare" and cmp["n"] == 25
    assert cmp["block_ratios"][0] == 0.912346  # 6 significant digits
    assert cmp["op_histograms"] == {
        "candidate": {"FusedMatMul": 1, "MatMul": 1},
        "reference": {"MatMul": 2, "Transpose": 1},
    }
    assert cmp["sessions"]["candidate"] == {
        "model": "m.onnx",
        "providers": ["CPUExecutionProvider"],
        "optimization": "all",
        "threads": 1,
        "spinning": False,
    }
    # Every fingerprint key of ENVIRONMENT_KEYS, ISA flags as one string; nothing else
    # (memory_bytes is not a fingerprint key).
    assert cmp["environment"] == {
        "ort_version": "1.32.0",
        "ort_build": "release",
        "cpu_model": "Intel Xeon",
        "isa": "avx2 avx512f fma",
        "effective_cpus": 2,
        "logical_cores": 2,
        "python_version": "3.11.7",
        "numpy_version": "2.0.0",
        "onnx_version": "1.17.0",
        "fingerprint": "0123456789ab",
    }
    assert set(cmp["environment"]) == set(ENVIRONMENT_KEYS)
    assert "runs" not in cmp  # one run: no run sizes
    assert set(cmp["medians"]) == {"reference", "candidate"}
    assert lat["kind"] == "latency" and lat["n"] == 30 and lat["calls_per_block"] == 50
    assert lat["samples"][0] == 0.00123457 and lat["updated"] == "2026-01-02"
    assert lat["session"]["threads"] == 1
    assert lat["mode"] == "absolute"
    assert "block_ratios" not in lat and "control" not in lat
    # A normalized latency keeps its target/control block ratios and the control's median.
    norm = entry_from_record(normalized_record(SAMPLES), ENV, updated="2026-01-02")
    assert norm["mode"] == "normalized" and norm["n"] == 30
    assert norm["control"] == {"model": "ortperf-control", "median": CONTROL_SECONDS}
    assert norm["block_ratios"][0] == pytest.approx(SAMPLES[0] / CONTROL_SECONDS, rel=1e-5)
    assert len(norm["block_ratios"]) == 30 and "runs" not in norm
    # Several runs (what --ortperf-update takes): their block counts are kept.
    several = entry_from_record(
        {**compare_record(RATIOS), "runs": [10, 15]}, ENV, updated="2026-01-02"
    )
    assert several["runs"] == [10, 15]


def test_entry_from_record_rejects_smoke_and_unknown() -> None:
    smoke = {**latency_record(SAMPLES), "measured": False}
    with pytest.raises(ValueError, match="smoke"):
        entry_from_record(smoke, ENV)
    with pytest.raises(ValueError, match="kind"):
        entry_from_record({"kind": "api"}, ENV)


def test_round_trip_and_stable_bytes(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, entries())
    first = path.read_bytes()
    assert first.endswith(b"}\n")
    loaded = load_baseline(path)
    assert loaded.schema == SCHEMA_VERSION and loaded.path == path
    assert dict(loaded.entries) == entries()
    samples = samples_path(path)
    raw = samples.read_bytes()
    write_baseline(path, loaded.entries)
    assert path.read_bytes() == first
    assert samples.read_bytes() == raw
    doc = json.loads(first)
    assert list(doc) == ["entries", "schema"]
    text = first.decode()
    # keys sorted; indent 2; raw numbers in the samples file, named by their digest
    assert "block_ratios" not in text and "samples" not in text
    assert text.index('"kind"') < text.index('"name"') < text.index('"ratio"')
    assert '\n  "schema": 3\n' in text
    assert '"raw": "' in text
    assert '"block_ratios": [\n' in raw.decode()  # wrapped, RAW_PER_LINE numbers a line
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    assert oct(samples.stat().st_mode & 0o777) == oct(0o644)


def test_missing_file_is_empty(tmp_path: Path) -> None:
    b = load_baseline(tmp_path / "__ortperf__" / "nothing.json")
    assert b.entries == {} and b.schema == SCHEMA_VERSION


def test_corrupt_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{\n  "schema": 1,\n  "entries": {,}\n}\n')
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert f"{path}:3:" in str(info.value) and "invalid JSON" in str(info.value)
    path.write_text('{\n<<<<<<< HEAD\n  "schema": 1\n=======\n>>>>>>> x\n}\n')
    with pytest.raises(BaselineError, match="merge conflict"):
        load_baseline(path)


def test_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema": SCHEMA_VERSION + 1, "entries": {}}))
    with pytest.raises(BaselineError, match=r"newer pytest-ortperf \(schema 4 > 3\); upgrade"):
        load_baseline(path)
    path.write_text(json.dumps({"entries": {}}))
    with pytest.raises(BaselineError, match="schema"):
        load_baseline(path)


def test_schema_1_files_are_still_read(tmp_path: Path) -> None:
    """A file written before schema 2 (no ``runs``, ``mode`` or control) is read as it is,
    and its compare entry is judged as a baseline of one run."""
    path = tmp_path / "t.json"
    old = {k: v for k, v in entries()[f"{TEST}::cmp"].items() if k != "runs"}
    old["environment"] = {k: ENV[k] for k in ("ort_version", "cpu_model", "logical_cores")}
    path.write_text(json.dumps({"schema": 1, "entries": {f"{TEST}::cmp": old}}))
    loaded = load_baseline(path)
    assert loaded.schema == 1 and dict(loaded.entries) == {f"{TEST}::cmp": old}
    [_, ratio] = judge_entry(loaded.entries[f"{TEST}::cmp"], compare_record(RATIOS), ENV)
    assert ratio.outcome is Outcome.OK and "(25 blocks)" in ratio.message


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kind", "speed", "field 'kind'"),
        ("ratio", "fast", "field 'ratio' must be a positive number"),
        ("block_ratios", [], "field 'block_ratios' must be a non-empty list"),
        ("op_histograms", {"candidate": {"Relu": "1"}}, "field 'op_histograms'"),
    ],
)
def test_invalid_entry_names_key_and_field(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    path = tmp_path / "t.json"
    e = entries()
    e[f"{TEST}::cmp"][field] = value
    path.write_text(json.dumps({"schema": 1, "entries": e}))
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert str(path) in str(info.value)
    assert f"'{TEST}::cmp'" in str(info.value) and message in str(info.value)


def test_non_finite_numbers_are_refused(tmp_path: Path) -> None:
    e = entries()
    e[f"{TEST}::cmp"]["low"] = float("inf")
    with pytest.raises(ValueError, match="non-finite"):
        write_baseline(tmp_path / "t.json", e)


# --------------------------------------------------------------------------- atomic writes


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_failed_serialization_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, entries())
    before = path.read_bytes()

    real_dumps = json.dumps
    calls = []

    def boom(*args: Any, **kwargs: Any) -> str:
        calls.append(1)
        if len(calls) > 10:  # fail midway through the document
            raise RuntimeError("serialization failed")
        return real_dumps(*args, **kwargs)

    monkeypatch.setattr(json, "dumps", boom)
    with pytest.raises(RuntimeError):
        write_baseline(path, {"x::y": entries()[f"{TEST}::lat"]})
    assert path.read_bytes() == before
    assert _leftovers(path.parent) == []


@pytest.mark.parametrize("target", ["fsync", "replace"])
def test_failed_write_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, entries())
    before = path.read_bytes()

    def boom(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, target, boom)
    with pytest.raises(OSError, match="disk full"):
        write_baseline(path, {"x::y": entries()[f"{TEST}::lat"]})
    assert path.read_bytes() == before
    assert _leftovers(path.parent) == []


def test_empty_entries_remove_the_file(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, entries())
    write_baseline(path, {})
    assert not path.exists() and not path.parent.exists()
    write_baseline(path, {})  # nothing there: no error


def test_existing_mode_kept(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, entries())
    os.chmod(path, 0o664)
    write_baseline(path, entries())
    assert path.stat().st_mode & 0o777 == 0o664


# --------------------------------------------------------------------------- update planning


def test_plan_update_add_change_remove() -> None:
    old = Baseline(Path("b.json"), entries=entries())
    other_test = "tests/test_models.py::test_other"
    other = entry_from_record(latency_record(SAMPLES, test=other_test), ENV, updated="2026-01-02")
    old = Baseline(Path("b.json"), entries={**old.entries, f"{other_test}::lat": other})
    new_cmp = entry_from_record(
        compare_record([0.95] * 25, cand_hist={"MatMul": 2, "Transpose": 1}),
        ENV,
        updated="2026-02-03",
    )
    fresh = entry_from_record(
        compare_record([1.1] * 25, test="tests/test_models.py::test_new"), ENV
    )
    recorded = {f"{TEST}::cmp": new_cmp, "tests/test_models.py::test_new::cmp": fresh}
    plan = plan_update(old, recorded, ran_tests={TEST, "tests/test_models.py::test_new"})
    assert plan.added == ("tests/test_models.py::test_new::cmp",)
    assert plan.changed == (f"{TEST}::cmp",)
    assert plan.removed == (f"{TEST}::lat",)  # test ran, no longer records "lat"
    assert f"{other_test}::lat" in plan.entries  # test did not run: kept
    assert plan.modified
    assert list(plan.entries) == sorted(plan.entries)
    assert plan.lines == (
        f"{TEST}::cmp: ratio 0.914 -> 0.950; candidate lost fusion: FusedMatMul 1 -> 0, "
        "MatMul 1 -> 2, Transpose 0 -> 1",
        "tests/test_models.py::test_new::cmp: new, ratio 1.100",
        f"{TEST}::lat: removed (no longer measured)",
    )


def test_plan_update_same_values_only_new_date() -> None:
    old = Baseline(Path("b.json"), entries=entries())
    again = {k: {**v, "updated": "2030-01-01"} for k, v in entries().items()}
    plan = plan_update(old, again, ran_tests={TEST})
    assert not plan.modified and plan.lines == ()
    assert plan.entries[f"{TEST}::cmp"]["updated"] == "2030-01-01"


def test_prune_and_unused() -> None:
    gone = "tests/test_models.py::test_gone[param::x]"
    e = entries()
    e[f"{gone}::lat"] = {**e[f"{TEST}::lat"], "test": gone}
    b = Baseline(Path("b.json"), entries=e)
    assert unused_entries(b, {TEST}) == [f"{gone}::lat"]
    assert unused_entries(b, {TEST, gone}) == []
    plan = prune_unused(b, {TEST})
    assert plan.removed == (f"{gone}::lat",)
    assert set(plan.entries) == set(entries())
    assert plan.lines == (f"{gone}::lat: removed (test no longer exists)",)
    assert not prune_unused(b, {TEST, gone}).modified


# --------------------------------------------------------------------------- judging entries


def test_judge_entry_compare() -> None:
    entry = entries()[f"{TEST}::cmp"]
    same = judge_entry(entry, compare_record(RATIOS), ENV)
    assert [v.metric for v in same] == ["structure", "ratio"]
    assert [v.outcome for v in same] == [Outcome.OK, Outcome.OK]
    slower = judge_entry(
        entry, compare_record([r * 1.12 for r in RATIOS], cand_hist={"MatMul": 3}), ENV
    )
    assert [v.outcome for v in slower] == [Outcome.REGRESSED, Outcome.REGRESSED]
    fresh = judge_entry(None, compare_record(RATIOS), ENV)
    assert [v.outcome for v in fresh] == [Outcome.NEW, Outcome.NEW]


def test_judge_entry_latency() -> None:
    """A normalized latency is judged on its target/control ratios against the entry's."""
    entry = entry_from_record(normalized_record(SAMPLES), ENV, updated="2026-01-02")
    [same] = judge_entry(entry, normalized_record(SAMPLES), ENV)
    assert same.outcome is Outcome.OK
    [slow] = judge_entry(entry, normalized_record([s * 1.2 for s in SAMPLES]), ENV)
    assert slow.outcome is Outcome.REGRESSED and slow.metric == "latency"
    assert "normalized by its control" in slow.message
    # A machine-wide slowdown hits target and control alike: the ratio is unchanged.
    [busy] = judge_entry(
        entry,
        normalized_record([s * 1.2 for s in SAMPLES], control_seconds=CONTROL_SECONDS * 1.2),
        ENV,
    )
    assert busy.outcome is Outcome.OK
    [elsewhere] = judge_entry(entry, normalized_record(SAMPLES), {**ENV, "cpu_model": "EPYC"})
    assert elsewhere.outcome is Outcome.NOT_COMPARABLE and "cpu_model" in elsewhere.message
    [threads] = judge_entry(entry, normalized_record(SAMPLES, threads=2), ENV)
    assert threads.outcome is Outcome.NOT_COMPARABLE and "threads" in threads.message
    [fresh] = judge_entry(None, normalized_record(SAMPLES), ENV)
    assert fresh.outcome is Outcome.NEW
    # An entry taken before normalized latencies (absolute) has no ratio to judge against.
    [old] = judge_entry(entries()[f"{TEST}::lat"], normalized_record(SAMPLES), ENV)
    assert old.outcome is Outcome.NEW and "no control measurement" in old.message


def test_judge_entry_absolute_latency_against_earlier_runs() -> None:
    """An absolute latency is judged against earlier runs' medians, never against the
    blocks of the one run stored in the entry: without 5 earlier runs it is not gated."""
    entry = entries()[f"{TEST}::lat"]
    current = sorted(SAMPLES)[len(SAMPLES) // 2]
    [alone] = judge_entry(entry, latency_record([s * 1.2 for s in SAMPLES]), ENV)
    assert alone.outcome is Outcome.NOT_COMPARABLE
    assert "not gated: 0 of 5 earlier runs" in alone.message
    [four] = judge_entry(entry, latency_record(SAMPLES), ENV, earlier_medians=[current] * 4)
    assert four.outcome is Outcome.NOT_COMPARABLE and "not gated: 4 of 5" in four.message
    earlier = [current * (1 + 0.002 * (i % 3 - 1)) for i in range(8)]
    [same] = judge_entry(entry, latency_record(SAMPLES), ENV, earlier_medians=earlier)
    assert same.outcome is Outcome.OK
    [slow] = judge_entry(
        entry, latency_record([s * 1.2 for s in SAMPLES]), ENV, earlier_medians=earlier
    )
    assert slow.outcome is Outcome.REGRESSED and "8 runs" in slow.message
    [fresh] = judge_entry(None, latency_record(SAMPLES), ENV, earlier_medians=earlier)
    assert fresh.outcome is Outcome.OK  # no entry needed: the history is the baseline


# --------------------------------------------------------------------------- planning a run


def local_entries() -> dict[str, dict[str, Any]]:
    """Entries as ``--ortperf-update`` writes them: keyed and tagged by the test's id
    inside its module."""
    from pytest_ortperf.gating.baseline_entries import entry_key, local_record

    out = {}
    for record in (compare_record(RATIOS), latency_record(SAMPLES)):
        entry = entry_from_record(local_record(record), ENV, updated="2026-01-02")
        out[entry_key(entry["test"], entry["name"])] = entry
    return out


def test_plan_baselines_reports_unused_without_update() -> None:
    from pytest_ortperf.gating.baseline import plan_baselines

    module = TEST.split("::")[0]
    loaded = Baseline(baseline_path(Path(module)), SCHEMA_VERSION, local_entries())
    plan = plan_baselines(
        {module: loaded},
        [],
        ENV,
        passed=set(),
        collected={f"{module}::test_other"},
        update=False,
        partial=False,
    )
    assert plan.writes == {}
    assert plan.notes == (
        "2 unused baseline entries in tests/__ortperf__/test_models.json (tests that no longer "
        "exist; --ortperf-update prunes them): test_fused::cmp, test_fused::lat",
    )
    # The same run with test_fused collected: nothing unused, nothing to say.
    plan = plan_baselines(
        {module: loaded}, [], ENV, passed=set(), collected={TEST}, update=False, partial=False
    )
    assert plan.writes == {} and plan.notes == ()


def test_plan_baselines_update_writes_the_tests_that_ran() -> None:
    from pytest_ortperf.gating.baseline import plan_baselines

    module = "tests/test_models.py"
    old = {"test_fused::lat": local_entries()["test_fused::lat"]}
    records = [{**compare_record(RATIOS), "gated": True}]
    plan = plan_baselines(
        {module: Baseline(Path("x.json"), SCHEMA_VERSION, old)},
        records,
        ENV,
        passed={TEST},
        collected={TEST},
        update=True,
        partial=False,
    )
    written = plan.writes[module]
    assert list(written) == ["test_fused::cmp"]  # lat is no longer measured by the test
    assert written["test_fused::cmp"]["ratio"] == pytest.approx(sorted(RATIOS)[12], rel=1e-5)
    assert plan.notes[0] == "baseline tests/__ortperf__/test_models.json updated:"
    assert "  test_fused::lat: removed (no longer measured)" in plan.notes


def test_plan_baselines_partial_update_keeps_other_tests_and_unreadable_files_only_noted() -> None:
    from pytest_ortperf.gating.baseline import plan_baselines

    module = "tests/test_models.py"
    broken = BaselineError("tests/__ortperf__/test_models.json:1:1: invalid JSON")
    plan = plan_baselines(
        {module: broken}, [], ENV, passed=set(), collected={TEST}, update=False, partial=True
    )
    assert plan.writes == {} and plan.notes == (f"baseline NOT read: {broken}",)
    kept = {"test_other::lat": {**local_entries()["test_fused::lat"], "test": "test_other"}}
    plan = plan_baselines(
        {module: Baseline(Path("x.json"), SCHEMA_VERSION, kept)},
        [{**compare_record(RATIOS), "gated": True}],
        ENV,
        passed={TEST},
        collected={TEST},
        update=True,
        partial=True,  # -k: test_other was deselected, it still exists
    )
    assert sorted(plan.writes[module]) == ["test_fused::cmp", "test_other::lat"]
