"""Baseline files under stress: concurrent updates (a lock), a process killed at every
write point, files an update cannot read (never dropped), directories that cannot be
written (each module on its own), entries of the wrong types, stale temp files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_gating_baseline import ENV, SAMPLES, TEST, latency_record, local_entries

from pytest_ortperf.files import LockTimeout, file_lock, remove_stale_temps
from pytest_ortperf.gating.baseline import (
    SCHEMA_VERSION,
    Baseline,
    BaselineError,
    NewerBaselineError,
    baseline_path,
    load_baseline,
    lock_path,
    plan_baselines,
    update_baseline,
    write_baseline,
)
from pytest_ortperf.gating.baseline_schema import MAX_ENTRY_DEPTH

MODULE = "tests/test_models.py"
BOTH = ["test_models.json", "test_models.samples.json"]  # a baseline and its raw numbers

# --------------------------------------------------------------------------- the lock


def _update(path: Path, test: str, scale: float = 1.0, **kwargs: Any) -> Any:
    """``--ortperf-update -k <test>`` of one latency test of MODULE, as the plugin does it."""
    nodeid = f"{MODULE}::{test}"
    record = {**latency_record([s * scale for s in SAMPLES], test=nodeid), "gated": True}
    return update_baseline(
        path, MODULE, [record], ENV, passed={nodeid}, collected={nodeid}, partial=True, **kwargs
    )


def test_updates_merge_into_the_file_and_leave_no_lock_file(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    first = _update(path, "test_a")
    assert first.notes[1].startswith("  test_a::lat: new")
    # Another run updates test_b, a third test_c: each merges into what is there.
    _update(path, "test_b")
    third = _update(path, "test_c")
    assert sorted(load_baseline(path).entries) == ["test_a::lat", "test_b::lat", "test_c::lat"]
    assert third.failed == () and third.notes[0].endswith("test_models.json updated:")
    # No lock file (nor anything else) is left beside the baseline.
    assert sorted(p.name for p in path.parent.iterdir()) == BOTH


def test_lock_timeout_names_the_file_and_leaves_it_alone(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    _update(path, "test_a")
    before = path.read_bytes()
    with file_lock(lock_path(path), timeout=1):  # another process's update, say
        started = time.monotonic()
        with pytest.raises(LockTimeout) as info:
            _update(path, "test_b", timeout=0.2)
        assert time.monotonic() - started < 5
    message = str(info.value)
    assert str(lock_path(path)) in message and str(path) in message
    assert "gave up waiting for the lock" in message and "after 0.2 s" in message
    assert isinstance(info.value, OSError)  # reported like any file that cannot be written
    assert path.read_bytes() == before
    _update(path, "test_b", timeout=1)  # released: the next one goes through
    assert sorted(load_baseline(path).entries) == ["test_a::lat", "test_b::lat"]
    assert not lock_path(path).exists()


def test_a_module_without_baselines_leaves_no_directory(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    plan = update_baseline(path, MODULE, [], ENV, passed=set(), collected=set(), partial=False)
    assert plan.writes == {} and plan.failed == ()
    assert not path.parent.exists()
    # Removing a file's last entries removes the file, its lock and the directory.
    _update(path, "test_a")
    update_baseline(
        path, MODULE, [], ENV, passed={f"{MODULE}::test_a"}, collected=set(), partial=True
    )
    assert not path.parent.exists()


def _child(tmp_path: Path, name: str, source: str, nodeid: str) -> list[str]:
    """The command of a child process running ``source``, which finds its record of
    ``nodeid`` (and the environment) in ``sys.argv[1]`` (JSON): it imports no more than
    the plugin does at the end of a run."""
    script, spec = tmp_path / f"{name}.py", tmp_path / f"{name}-{nodeid.rsplit(':', 1)[1]}.json"
    script.write_text(source)
    record = {**latency_record(SAMPLES, test=nodeid), "gated": True}
    spec.write_text(json.dumps({"record": record, "environment": ENV}))
    return [sys.executable, str(script), str(spec)]


WORKER = """
import json, sys
from pathlib import Path

from pytest_ortperf.gating.baseline import update_baseline

spec = json.loads(Path(sys.argv[1]).read_text())
path, module, record = Path(sys.argv[2]), sys.argv[3], spec["record"]
for line in sys.stdin:
    scale = int(line)
    scaled = {**record, "samples": [s * scale for s in record["samples"]]}
    plan = update_baseline(
        path, module, [scaled], spec["environment"], passed={record["test"]},
        collected={record["test"]}, partial=True, timeout=30,
    )
    print(scale, len(plan.failed), flush=True)
"""


def test_concurrent_updates_of_one_module_lose_no_entry(tmp_path: Path) -> None:
    """4 processes, 20 rounds: in each, every process updates its own test of one module at
    once (the same locked read-merge-write the plugin runs); after each round the file
    holds every process's entry of that round."""
    workers, rounds = 4, 20
    path = baseline_path(tmp_path / "test_models.py")
    tests = [f"test_{i}" for i in range(workers)]
    procs = [
        subprocess.Popen(
            [*_child(tmp_path, "worker", WORKER, f"{MODULE}::{test}"), str(path), MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for test in tests
    ]
    try:
        for scale in range(1, rounds + 1):
            for proc in procs:  # all at once: they contend for the file
                assert proc.stdin is not None
                proc.stdin.write(f"{scale}\n")
                proc.stdin.flush()
            for proc in procs:
                assert proc.stdout is not None
                assert proc.stdout.readline().split() == [str(scale), "0"]
            entries = load_baseline(path).entries
            assert sorted(entries) == [f"{test}::lat" for test in tests], f"round {scale}"
            for test in tests:
                assert entries[f"{test}::lat"]["samples"][0] == pytest.approx(
                    SAMPLES[0] * scale, rel=1e-5
                ), f"round {scale}: {test}"
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in procs:
            proc.wait(timeout=30)
    assert [proc.returncode for proc in procs] == [0] * workers
    assert sorted(p.name for p in path.parent.iterdir()) == BOTH


# --------------------------------------------------------------------------- kill -9


KILLER = """
import json, os, signal, sys, tempfile, fcntl
from pathlib import Path

import pytest_ortperf.gating.baseline as baseline

spec = json.loads(Path(sys.argv[1]).read_text())
path, kill_at, when = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
trace = []


def wrap(owner, name):
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        shown = os.path.basename(str(args[0])) if args and isinstance(args[0], (str, os.PathLike)) else ""
        index = len(trace)
        trace.append(f"{name}({shown})")
        if index == kill_at and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            return real(*args, **kwargs)
        finally:  # after it returned, or raised (rmdir of a directory that is not empty)
            if index == kill_at and when == "after":
                os.kill(os.getpid(), signal.SIGKILL)

    setattr(owner, name, wrapper)


for owner, name in [
    (os, "open"), (fcntl, "flock"), (baseline, "load_baseline"), (tempfile, "mkstemp"),
    (os, "chmod"), (os, "fsync"), (os, "replace"), (os, "unlink"), (os, "close"),
    (os, "rmdir"),
]:
    wrap(owner, name)

record = spec["record"]
baseline.update_baseline(
    path, "tests/test_models.py", [record], spec["environment"], passed={record["test"]},
    collected={record["test"]}, partial=True, timeout=10,
)
print(json.dumps(trace))
"""


def _killed_update(tmp_path: Path, path: Path, kill_at: int, when: str) -> Any:
    command = _child(tmp_path, "killer", KILLER, f"{MODULE}::test_new")
    return subprocess.run(
        [*command, str(path), str(kill_at), when], capture_output=True, text=True, timeout=60
    )


def test_a_kill_at_any_write_point_leaves_old_or_new_and_the_next_update_works(
    tmp_path: Path,
) -> None:
    """SIGKILL before and after every call of the update that touches the file system
    (the lock file's open and flock, reading under the lock, the temp file's creation,
    chmod, write + fsync, the rename, the lock's removal and release; the samples file's
    writes before and after the baseline's): the baseline is then the old file or the new
    one, complete, its raw numbers loading with it, and the next update goes through (the
    kernel released the dead process's lock) and leaves no temp or lock file behind."""
    path = baseline_path(tmp_path / "work" / "test_models.py")
    old_entries = {"test_fused::lat": local_entries()["test_fused::lat"]}

    def fresh() -> bytes:
        for leftover in path.parent.iterdir() if path.parent.exists() else ():
            leftover.unlink()
        write_baseline(path, old_entries)
        return path.read_bytes()

    old = fresh()
    traced = _killed_update(tmp_path, path, -1, "never")
    assert traced.returncode == 0, traced.stderr
    trace = json.loads(traced.stdout)
    new = path.read_bytes()
    assert sorted(load_baseline(path).entries) == ["test_fused::lat", "test_new::lat"]
    expected_points = [
        "flock(",
        "load_baseline(test_models.json)",
        "mkstemp(",
        "chmod(.test_models.json.",
        "fsync(",
        "replace(.test_models.json.",
        "replace(.test_models.samples.json.",  # raw numbers: written before and after
        "unlink(.test_models.json.lock)",
    ]
    for point in expected_points:
        assert any(call.startswith(point) for call in trace), (point, trace)

    problems = []
    for index, call in enumerate(trace):
        for when in ("before", "after"):
            fresh()
            killed = _killed_update(tmp_path, path, index, when)
            where = f"killed {when} {call} (call {index})"
            if killed.returncode != -signal.SIGKILL:
                problems.append(f"{where}: exit {killed.returncode}: {killed.stderr[-500:]}")
                continue
            content = path.read_bytes()
            if content not in (old, new):
                problems.append(f"{where}: neither the old nor the new file: {content[:200]!r}")
                continue
            try:
                load_baseline(path)
                _update(path, "test_next", timeout=5)  # the dead process's lock is gone
            except (BaselineError, OSError) as exc:
                problems.append(f"{where}: {type(exc).__name__}: {exc}")
                continue
            keys = sorted(load_baseline(path).entries)
            wanted = ["test_fused::lat", "test_next::lat"]
            if keys not in (wanted, sorted([*wanted, "test_new::lat"])):
                problems.append(f"{where}: entries {keys}")
            left = sorted(p.name for p in path.parent.iterdir())
            if left != BOTH:
                problems.append(f"{where}: left behind {left}")
    assert problems == []
    assert len(trace) >= len(expected_points)


# --------------------------------------------------------------------------- unreadable files


def test_update_refuses_an_unreadable_file_and_names_it() -> None:
    for error in (
        BaselineError("tests/__ortperf__/test_models.json: entry 'x::y': field 'ratio' ..."),
        NewerBaselineError("tests/__ortperf__/test_models.json: written by a newer ..."),
    ):
        plan = plan_baselines(
            {MODULE: error},
            [{**latency_record(SAMPLES), "gated": True}],
            ENV,
            passed={TEST},
            collected={TEST},
            update=True,
            partial=True,
        )
        assert plan.writes == {}  # nothing replaced, nothing dropped
        assert plan.failed == ("tests/__ortperf__/test_models.json",)
        assert plan.notes == (
            f"baseline tests/__ortperf__/test_models.json NOT updated, left as it was: {error}; "
            f"{error.remedy}, then run --ortperf-update again",
        )
    assert "fix the file or delete it" in BaselineError.remedy
    assert "upgrade pytest-ortperf" in NewerBaselineError.remedy


def damaged(path: Path, damage: str, key: str, field: str, value: Any) -> str:
    """Damage the baseline file at ``path`` one way (``invalid_entry``: ``field`` of entry
    ``key`` set to ``value``; ``newer_schema``; ``merge_conflict``) and return its text."""
    data = json.loads(path.read_text())
    if damage == "invalid_entry":
        data["entries"][key][field] = value
        text = json.dumps(data)
    elif damage == "newer_schema":
        data["schema"] = SCHEMA_VERSION + 1
        data["entries"][key]["new_field"] = {"from": "the future"}
        text = json.dumps(data)
    else:
        text = "<<<<<<< HEAD\n" + path.read_text() + "=======\n{}\n>>>>>>> branch\n"
    path.write_text(text)
    return text


@pytest.mark.parametrize("damage", ["invalid_entry", "newer_schema", "merge_conflict"])
def test_update_of_a_file_it_cannot_read_leaves_it_whole(tmp_path: Path, damage: str) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, local_entries())
    text = damaged(path, damage, "test_fused::cmp", "ratio", "fast")
    plan = _update(path, "test_fused")
    assert plan.writes == {} and len(plan.failed) == 1
    assert path.read_text() == text
    [note] = plan.notes
    assert "NOT updated, left as it was" in note and str(path) in note
    assert ("upgrade" if damage == "newer_schema" else "fix the file or delete it") in note


# --------------------------------------------------------------------------- entry validation


def _with(entry_field: str, value: Any, key: str = "test_fused::lat") -> dict[str, Any]:
    entries = local_entries()
    entries[key] = {**entries[key], entry_field: value}
    return {"schema": 1, "entries": entries}


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("key", "entry_field", "value"),
    [
        ("test_fused::lat", "session", "abc"),
        ("test_fused::lat", "session", {"providers": "CPUExecutionProvider"}),
        ("test_fused::lat", "session", {"threads": {"n": 1}}),
        ("test_fused::cmp", "sessions", "abc"),
        ("test_fused::cmp", "sessions", {"reference": "abc"}),
        ("test_fused::lat", "environment", "abc"),
        ("test_fused::lat", "environment", {"cpu_model": ["x"]}),
        ("test_fused::cmp", "medians", "abc"),
        ("test_fused::cmp", "medians", {"reference": "1 ms"}),
        ("test_fused::cmp", "op_shares", "abc"),
        ("test_fused::cmp", "op_shares", {"candidate": {"MatMul": "0.5"}}),
        ("test_fused::cmp", "confidence", "high"),
        ("test_fused::cmp", "n", "25"),
        ("test_fused::lat", "n", True),
        ("test_fused::lat", "median", -1.0),
        ("test_fused::lat", "calls_per_block", 0),
        ("test_fused::lat", "test", 5),
        ("test_fused::lat", "name", None),
        ("test_fused::lat", "updated", 20260102),
        ("test_fused::lat", "extra", _nested(MAX_ENTRY_DEPTH + 1)),
        ("test_fused::cmp", "op_histograms", _nested(500)),
    ],
)
def test_every_invalid_field_is_a_baseline_error_naming_file_entry_and_field(
    tmp_path: Path, key: str, entry_field: str, value: Any
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_with(entry_field, value, key)))
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert str(info.value).startswith(f"{path}: entry {key!r}: field {entry_field!r} ")


def test_valid_optional_fields_and_unknown_ones_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    doc = _with("op_shares", {"candidate": {"MatMul": 0.5}, "reference": {}}, "test_fused::cmp")
    doc["entries"]["test_fused::lat"]["session"] = None
    doc["entries"]["test_fused::lat"]["something_new"] = {"a": [1, {"b": None}]}
    path.write_text(json.dumps(doc))
    assert load_baseline(path).entries["test_fused::lat"]["something_new"] == {
        "a": [1, {"b": None}]
    }


@pytest.mark.parametrize("where", ["file", "entry"])
def test_json_nested_100k_deep_is_a_file_error(tmp_path: Path, where: str) -> None:
    path = tmp_path / "t.json"
    deep = "[" * 100_000 + "]" * 100_000
    if where == "file":
        path.write_text(deep)
    else:
        path.write_text(json.dumps(_with("extra", 0)).replace('"extra": 0', f'"extra": {deep}'))
    with pytest.raises(BaselineError, match="nested too deeply") as info:
        load_baseline(path)
    assert str(info.value).startswith(f"{path}: ")


def test_a_number_python_will_not_convert_is_a_file_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"schema": 1, "entries": {"x": {"n": ' + "9" * 5000 + "}}}")
    with pytest.raises(BaselineError, match="invalid JSON") as info:
        load_baseline(path)
    assert str(info.value).startswith(f"{path}: ")


# --------------------------------------------------------------------------- leftovers


def test_stale_temp_files_are_removed_on_the_next_update(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    _update(path, "test_a")
    directory = path.parent
    hour_ago = time.time() - 3600
    names = {
        ".test_models.json.abcd1234.tmp": "fresh, of this file: its writer is dead",
        ".test_other.json.abcd_xyz.tmp": "fresh, of another file: maybe being written",
        ".test_gone.json.zz9_zz9z.tmp": "an hour old: stale",
        ".gitignore": "not ours",
        "notes.tmp": "not ours",
    }
    for name in names:
        (directory / name).write_text("x")
    os.utime(directory / ".test_gone.json.zz9_zz9z.tmp", (hour_ago, hour_ago))
    _update(path, "test_b")
    assert sorted(p.name for p in directory.iterdir()) == [
        ".gitignore",
        ".test_other.json.abcd_xyz.tmp",
        "notes.tmp",
        "test_models.json",
        "test_models.samples.json",
    ]
    # Once old enough, another file's temp goes too (with the default age: 10 minutes).
    os.utime(directory / ".test_other.json.abcd_xyz.tmp", (hour_ago, hour_ago))
    assert remove_stale_temps(directory) == [directory / ".test_other.json.abcd_xyz.tmp"]


def test_unused_entries_note_is_summarized() -> None:
    entry = local_entries()["test_fused::lat"]
    many = {
        f"test_gone_{i:05d}::lat": {**entry, "test": f"test_gone_{i:05d}"} for i in range(17_000)
    }
    plan = plan_baselines(
        {MODULE: Baseline(baseline_path(Path(MODULE)), 1, many)},
        [],
        ENV,
        passed=set(),
        collected={TEST},
        update=False,
        partial=False,
    )
    [note] = plan.notes
    assert note == (
        "17000 unused baseline entries in tests/__ortperf__/test_models.json (tests that no "
        "longer exist; --ortperf-update prunes them): test_gone_00000::lat, "
        "test_gone_00001::lat, test_gone_00002::lat, test_gone_00003::lat, "
        "test_gone_00004::lat, ... and 16995 more"
    )


# --------------------------------------------------------------------------- through pytest

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none")

LATENCY_TEST = """
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine


def {name}(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[[1e-4 * (1 + 0.001 * i) for i in range(25)]])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={{"N": 1}}), name="lr")
"""


@pytest.mark.parametrize("damage", ["invalid_entry", "newer_schema", "merge_conflict"])
def test_plugin_update_refuses_a_file_it_cannot_read(
    pytester: pytest.Pytester, damage: str
) -> None:
    pytester.makepyfile(
        test_perf=LATENCY_TEST.format(name="test_a") + LATENCY_TEST.format(name="test_b")
    )
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=2)
    path = pytester.path / "__ortperf__" / "test_perf.json"
    text = damaged(path, damage, "test_b::lr", "session", "abc")
    result = pytester.runpytest(*RUN, "--ortperf-update", "-k", "test_a")
    assert path.read_text() == text
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*ortperf: baseline __ortperf__/test_perf.json NOT updated, left as it was: *"
            + ("upgrade pytest-ortperf*" if damage == "newer_schema" else "fix the file or*"),
            "*ortperf: baselines NOT written: BaselineError: 1 file left as it was (see above): "
            "__ortperf__/test_perf.json",
        ]
    )


def test_plugin_writes_every_module_it_can_and_names_each_failure(
    pytester: pytest.Pytester,
) -> None:
    for name in ("a", "b", "c"):
        pytester.mkpydir(name).joinpath("__init__.py").unlink()
        (pytester.path / name / f"test_{name}.py").write_text(
            LATENCY_TEST.format(name=f"test_{name}")
        )
    for name in ("a", "c"):  # a file where the directory should be: it cannot be written
        (pytester.path / name / "__ortperf__").write_text("not a directory")
    result = pytester.runpytest(*RUN, "--ortperf-update")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (pytester.path / "b" / "__ortperf__" / "test_b.json").exists()
    out = result.stdout.str()
    for name in ("a", "c"):
        assert f"ortperf: baseline {name}/__ortperf__/test_{name}.json NOT updated: " in out
    result.stdout.fnmatch_lines(
        [
            "*ortperf: baseline b/__ortperf__/test_b.json updated:*",
            "*ortperf: baselines NOT written: BaselineError: 2 files left as they were (see "
            "above): a/__ortperf__/test_a.json, c/__ortperf__/test_c.json",
        ]
    )


def test_plugin_names_the_file_when_the_lock_times_out(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_ortperf.gating.baseline as baseline

    monkeypatch.setattr(baseline, "LOCK_TIMEOUT_S", 0.2)
    pytester.makepyfile(test_perf=LATENCY_TEST.format(name="test_a"))
    path = pytester.path / "__ortperf__" / "test_perf.json"
    with file_lock(lock_path(path), timeout=1):  # another run's update
        result = pytester.runpytest(*RUN, "--ortperf-update")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*ortperf: baseline __ortperf__/test_perf.json NOT updated: LockTimeout: "
            f"{lock_path(path)}: gave up waiting for the lock on {path} after 0.2 s*"
        ]
    )
    assert not path.exists() and not lock_path(path).exists()
