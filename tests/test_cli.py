"""The ``ortperf`` command on a real SQLite store, with records built from injected samples."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from ortperf_store_factories import (
    ENV,
    OTHER_ENV,
    comparison,
    latency,
    measured_comparison,
    memory,
    noisy,
    save,
    tight,
)

from pytest_ortperf.cli import main
from pytest_ortperf.results import Record
from pytest_ortperf.store.read import read_results

T0 = 1_700_000_000.0


@pytest.fixture(autouse=True)
def _terminal_of_100_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The width the CLI falls back to when stdout is no terminal (tables must fit it)."""
    monkeypatch.setenv("COLUMNS", "100")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Two runs: B's comparison ratio is 20% worse than A's, its latency unchanged (and
    not judged: one run against one other)."""
    path = tmp_path / "results.sqlite"
    save(path, [latency("tests/test_m.py::test_lat"), comparison("tests/test_m.py::test_cmp")])
    save(
        path,
        [latency("tests/test_m.py::test_lat"), comparison("tests/test_m.py::test_cmp", ratio=0.96)],
        started=T0 + 60,
    )
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("history", "runs", "compare", "export", "prune"):
        assert command in out
    code, _, err = run(capsys)
    assert code == 2
    assert "COMMAND" in err
    code, _, err = run(capsys, "compare", "1")
    assert code == 2
    code, out, _ = run(capsys, "compare", "--help")
    assert code == 0
    assert "--threshold" in out
    assert "--alpha" in out
    assert "--store" in out


def test_runs(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "runs", "--store", str(db))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["run", "started", "took", "commit"]
    assert lines[2].split()[0] == "1"
    assert lines[3].split()[0] == "2"
    assert "01234567" in out
    assert "Test CPU 3000" in out


def test_history(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "history", "test_cmp", "--store", str(db))
    assert code == 0, err
    assert "tests/test_m.py::test_cmp  [fused]" in out
    assert "test_lat" not in out
    assert "0.800 [0.792, 0.808]" in out
    assert "+20.0%" in out
    code, out, _ = run(capsys, "history", "--store", str(db), "--name", "latency", "--last", "1")
    assert code == 0
    assert "test_lat" in out
    assert "1.00 ms" in out
    assert "+0.0%" not in out  # one run shown: no change column value


def test_history_store_from_environment(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORTPERF_STORE", str(db))
    code, out, _ = run(capsys, "history")
    assert code == 0
    assert "test_cmp" in out


def two_runs(tmp_path: Path, first: list[Record], second: list[Record]) -> Path:
    """A store holding run 1 with ``first`` and run 2 with ``second``."""
    path = tmp_path / "r.sqlite"
    save(path, first)
    save(path, second, started=T0 + 1)
    return path


GATED = ("regressed", "inconclusive", "unstable", "improved", "ok")
"""The verdicts of a judged row."""


def assert_not_gated(out: str, text: str, change: str) -> None:
    """The row of ``text`` (a latency) moved by ``change`` and was reported, not judged:
    one earlier run is no unit of replication for an absolute latency (1 of the 5 earlier
    runs the gate needs), so ``compare`` never judges latencies between two runs."""
    line = line_of(out, text)
    assert change in line
    assert not line.endswith(GATED), line
    assert re.search(r"[%\]] +- +\S", line), line  # no p-value: no test was made


def line_of(out: str, text: str) -> str:
    return next(line for line in out.splitlines() if text in line)


def test_compare_regression(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compare", "1", "2", "--store", str(db))
    assert code == 1, err
    cmp_line = line_of(out, "test_cmp")
    # Every block ratio moved by exactly +20%: the interval is the between-run spread a
    # baseline of one run is assumed to have (1%), not the blocks' (none).
    assert "+20.0% [+16.1%, +24.1%]" in cmp_line
    assert cmp_line.endswith("regressed")
    assert_not_gated(out, "test_lat", "+0.0%")  # A/A, but one run each: not judged
    assert "run 2 vs run 1: 1 regressed, 1 not gated" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_compare_within_threshold(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, "compare", "1", "2", "--threshold", "0.25", "--store", str(db))
    assert code == 0
    code, _, _ = run(
        capsys, "compare", "latest~1", "latest", "--threshold", "25%", "--store", str(db)
    )
    assert code == 0
    code, out, _ = run(capsys, "compare", "2", "1", "--store", str(db))  # B faster than A
    assert code == 0
    assert line_of(out, "test_cmp").endswith("improved")


def test_compare_clear_regression_with_tight_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = two_runs(
        tmp_path,
        [measured_comparison("t::c", tight(1.0, 20)), latency("t::l", median=1e-3)],
        [measured_comparison("t::c", tight(1.2, 20)), latency("t::l", median=1.2e-3)],
    )
    code, out, err = run(capsys, "compare", "1", "2", "--store", str(path))
    assert code == 1, err
    cmp_line = line_of(out, "t::c::fused")
    assert "+20.0% [+15.9%, +24.2%]" in cmp_line and cmp_line.endswith("regressed")
    p_value = float(cmp_line.split()[-2])
    assert p_value < 0.01
    # +20% on tight samples, but a latency of one run against one other is not judged.
    assert_not_gated(out, "t::l::latency", "+20.0%")
    assert "1 regressed, 1 not gated" in out


def test_compare_noisy_change_is_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """+10% on very noisy blocks: beyond the 5% threshold, but not significant. The old rule
    (stored ratio of run B over run A's above 1 + threshold) called this a regression."""
    path = two_runs(
        tmp_path,
        [measured_comparison("t::c", noisy(1.0, 20)), latency("t::l", samples=noisy(1e-3, 20))],
        [measured_comparison("t::c", noisy(1.1, 20)), latency("t::l", samples=noisy(1.1e-3, 20))],
    )
    frame = read_results(path)
    ratio_a, ratio_b = frame[frame["kind"] == "compare"]["ratio"]
    median_a, median_b = frame[frame["kind"] == "latency"]["median"]
    assert ratio_b / ratio_a - 1 > 0.05  # the old median rule: REGRESSED, exit 1
    assert median_b / median_a - 1 > 0.05
    code, out, err = run(capsys, "compare", "1", "2", "--store", str(path))
    assert code == 0, err
    cmp_line = line_of(out, "t::c::fused")
    assert "+10.0% [" in cmp_line and cmp_line.endswith("inconclusive")
    assert_not_gated(out, "t::l::latency", "+10.0%")
    assert "1 inconclusive" in out
    assert "regressed" not in out
    # A one-sided alpha of 25% is enough for this p-value (about 0.1): regressed.
    code, out, _ = run(capsys, "compare", "1", "2", "--alpha", "25%", "--store", str(path))
    assert code == 1
    assert line_of(out, "t::c::fused").endswith("regressed")
    assert_not_gated(out, "t::l::latency", "+10.0%")  # not judged at any alpha


def test_compare_a_a_is_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.sqlite"
    records: list[Record] = [measured_comparison("t::c", tight(0.8, 20)), latency("t::l")]
    save(path, records)
    save(path, records, started=T0 + 1)
    code, out, err = run(capsys, "compare", "1", "2", "--store", str(path))
    assert code == 0, err
    assert line_of(out, "t::c::fused").endswith("ok")
    assert_not_gated(out, "t::l::latency", "+0.0%")  # the very same samples, one run each
    assert "run 2 vs run 1: 1 ok, 1 not gated" in out


def test_compare_recomputes_block_ratios_from_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows without ``block_ratios`` in ``extra`` (older stores) are judged on the ratios of
    their stored samples."""
    path = two_runs(
        tmp_path,
        [measured_comparison("t::c", tight(1.0, 20))],
        [measured_comparison("t::c", tight(1.2, 20))],
    )
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE measurements SET extra = json_remove(extra, '$.block_ratios')")
        )
    engine.dispose()
    assert "block_ratios" not in read_results(path)["extra"][1]
    code, out, _ = run(capsys, "compare", "1", "2", "--store", str(path))
    assert code == 1
    assert "+20.0% [+15.9%, +24.2%]" in line_of(out, "t::c::fused")


def test_compare_latency_other_machine_not_gated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.sqlite"
    save(path, [latency("t::a", median=1e-3)])
    save(path, [latency("t::a", median=2e-3)], started=T0 + 1, env=OTHER_ENV)
    save(path, [latency("t::a", median=2e-3)], started=T0 + 2)
    save(path, [latency("t::a", median=2e-3)], started=T0 + 3, env={**ENV, "ort_version": "9"})
    code, out, _ = run(capsys, "compare", "1", "2", "--store", str(path))
    assert code == 0
    assert "+100.0%  -  not gated: other machine" in out
    # Same machine and settings: still only one earlier run, so +100% is reported, not
    # judged (`ortperf history` shows the runs; the gate wants 5 earlier ones).
    code, out, _ = run(capsys, "compare", "1", "3", "--store", str(path))
    assert code == 0
    assert_not_gated(out, "t::a", "+100.0%")
    assert "1 not gated" in out and "regressed" not in out
    code, out, _ = run(capsys, "compare", "1", "4", "--store", str(path))
    assert code == 0
    assert "not gated: ort_version differs" in out
    assert "1 not gated" in out


def test_compare_memory_is_not_gated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = two_runs(tmp_path, [memory("t::m")], [memory("t::m")])
    code, out, err = run(capsys, "compare", "1", "2", "--store", str(path))
    assert code == 0, err
    assert line_of(out, "t::m::memory").endswith("not gated: memory")


def test_compare_empty_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = two_runs(tmp_path, [], [])
    code, out, _ = run(capsys, "compare", "1", "2", "--store", str(path))
    assert code == 0
    assert "runs 1 and 2 hold no measurements" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--threshold", "abc"], "argument --threshold: must be a fraction such as 0.05 or 5%"),
        (["--threshold=-5%"], "argument --threshold: must be a non-negative fraction"),
        (["--threshold", "nan"], "argument --threshold: must be a non-negative fraction"),
        (["--threshold", "5"], "argument --threshold: 5 means 500%; write 5% or 0.05"),
        (["--threshold", "1001%"], "argument --threshold: must be at most 1000%, got '1001%'"),
        (["--alpha", "0.5"], "argument --alpha: must be below 0.5, got '0.5'"),
        (["--alpha", "0"], "argument --alpha: must be positive, got '0'"),
        (["--alpha", "1e-9"], "argument --alpha: must be at least 1e-06, got '1e-9'"),
        (["--alpha=-1%"], "argument --alpha: must be a non-negative fraction"),
        (["--alpha", "often"], "argument --alpha: must be a fraction such as"),
    ],
)
def test_compare_bad_fraction(
    db: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "compare", "1", "2", *argv, "--store", str(db))
    assert code == 2
    assert out == ""
    assert message in err
    assert err.strip().splitlines()[-1].startswith("ortperf compare: error: ")


def test_compare_new_and_missing(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save(db, [latency("tests/test_m.py::test_new")], started=T0 + 120)
    code, out, _ = run(capsys, "compare", "1", "3", "--store", str(db))
    assert code == 0
    assert "only in run 1" in out
    assert "only in run 3" in out


@pytest.mark.parametrize("bad", ["99", "latest~5", "someday"])
def test_compare_bad_run(db: Path, capsys: pytest.CaptureFixture[str], bad: str) -> None:
    code, out, err = run(capsys, "compare", "1", bad, "--store", str(db))
    assert code == 2
    assert out == ""
    assert err.startswith("ortperf: error: ")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


@pytest.mark.parametrize("command", [["runs"], ["history"], ["compare", "1", "2"], ["export"]])
def test_missing_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    missing = tmp_path / "none-here.sqlite"
    code, _, err = run(capsys, *command, "--store", str(missing))
    assert code == 2
    assert str(missing) in err
    assert len(err.strip().splitlines()) == 1
    assert not missing.exists()


def test_corrupt_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"garbage" * 1000)
    code, _, err = run(capsys, "runs", "--store", str(bad))
    assert code == 2
    assert str(bad) in err
    assert "not a readable SQLite database" in err


def test_default_store_in_cwd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORTPERF_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    save(tmp_path / ".ortperf" / "results.sqlite", [latency("t::a")])
    code, out, _ = run(capsys, "runs")
    assert code == 0
    assert "Test CPU 3000" in out


def test_export_csv(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out.csv"
    code, _, err = run(capsys, "export", "--format", "csv", "-o", str(target), "--store", str(db))
    assert code == 0
    assert "wrote 4 measurements" in err
    frame = pd.read_csv(target)
    assert list(frame["run_id"]) == [1, 1, 2, 2]
    assert json.loads(frame["session"][0])["threads"] == 1
    code, out, _ = run(capsys, "export", "--store", str(db), "--test", "test_cmp")
    assert code == 0
    assert out.splitlines()[0].startswith("run_id,started,")
    assert len(out.splitlines()) == 3


def test_export_json(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out.json"
    code, _, _ = run(
        capsys, "export", "--format", "json", "--samples", "-o", str(target), "--store", str(db)
    )
    assert code == 0
    rows = json.loads(target.read_text())
    assert [r["test"] for r in rows] == [
        "tests/test_m.py::test_lat",
        "tests/test_m.py::test_cmp",
    ] * 2
    assert rows[1]["ratio"] == 0.8
    assert rows[0]["ratio"] is None
    assert len(rows[0]["samples"]) == 20
    assert rows[0]["started"].startswith("2023-11-14T22:13:20")


def test_export_parquet(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out.parquet"
    code, _, err = run(
        capsys, "export", "--format", "parquet", "-o", str(target), "--store", str(db)
    )
    if importlib.util.find_spec("pyarrow") is None:
        assert code == 2
        assert "pip install pyarrow" in err
    else:
        assert code == 0
        assert len(pd.read_parquet(target)) == 4
    code, _, err = run(capsys, "export", "--format", "parquet", "--store", str(db))
    assert code == 2


def test_export_unwritable(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "no" / "such" / "dir.csv"
    code, _, err = run(capsys, "export", "-o", str(target), "--store", str(db))
    assert code == 2
    assert str(target) in err


def test_prune(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save(db, [latency("t::x")], started=T0 + 500)
    code, out, _ = run(capsys, "prune", "--keep", "1", "--store", str(db))
    assert code == 0
    assert "removed 2 runs (4 measurements)" in out
    code, out, _ = run(capsys, "runs", "--store", str(db))
    assert len(out.splitlines()) == 3
    code, _, err = run(capsys, "prune", "--keep", "-1", "--store", str(db))
    assert code == 2
    assert "argument --keep: must be from 0 to 100000, got '-1'" in err


def test_profile_a_model_outside_pytest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx

    from pytest_ortperf import models

    monkeypatch.chdir(tmp_path)
    onnx.save(models.attention(), str(tmp_path / "att.onnx"))
    trace = tmp_path / "trace.json"
    code = main(["profile", "att.onnx", "--dim", "B=2", "--runs", "3", "--trace", str(trace)])
    assert code == 0
    out = capsys.readouterr().out
    assert "FusedMatMul" in out and "per run: wall" in out
    assert trace.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["att.onnx", "trace.json"]
    assert main(["profile", "att.onnx"]) == 2
    assert "--dim NAME=SIZE" in capsys.readouterr().err
    assert main(["profile", "att.onnx", "--dim", "B"]) == 2


def test_profile_input_errors_exit_2_not_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx

    from pytest_ortperf import models

    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.onnx").write_bytes(b"not a model")
    assert main(["profile", "garbage.onnx"]) == 2
    assert "could not load model garbage.onnx" in capsys.readouterr().err
    assert main(["profile", "missing.onnx"]) == 2
    assert "not found" in capsys.readouterr().err
    onnx.save(models.attention(), str(tmp_path / "att.onnx"))
    assert main(["profile", "att.onnx", "--dim", "B=1", "--runs", "0"]) == 2
    err = capsys.readouterr().err
    assert "argument --runs: must be from 1 to 10000, got '0'" in err and "Traceback" not in err
