"""Report files: the HTML report, the JSON results (ours and pytest-benchmark's layout), the
Markdown CI summary and ``ortperf report``; from real ``--ortperf`` runs with scripted
samples (the gate's verdicts are deterministic) and from records built in the test."""

from __future__ import annotations

import base64
import importlib.util
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ortperf_store_factories import comparison, latency, save

from pytest_ortperf.cli import main as ortperf_cli
from pytest_ortperf.files import write_atomic
from pytest_ortperf.gating.gate import BASELINE_RUNS, CONFIRM_LOOKS
from pytest_ortperf.reports import charts as report_charts
from pytest_ortperf.reports.html import PLOTS_HINT, ReportInput, build_html
from pytest_ortperf.reports.json import (
    SCHEMA,
    RunInfo,
    benchmark_stats,
    ortperf_json,
    pytest_benchmark_json,
)
from pytest_ortperf.reports.markdown import markdown_summary
from pytest_ortperf.reports.rows import summary_rows
from pytest_ortperf.reports.writer import NO_VERDICTS
from pytest_ortperf.results import Judgement, Outcome, Verdict

HAS_MPL = report_charts.available()
PNG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')

INNER = """
import json, pathlib
import pytest
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

SCRIPT = json.loads(pathlib.Path(__file__).with_name("script.json").read_text())


def test_attention(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(interleave=SCRIPT["compare"])
    ref = ort_session(models.attention(), optimization="disable")
    cand = ort_session(models.attention())
    ortperf.compare(ref, cand, ort_feeds(ref, dims={"B": 1}), name="attention")


def test_latency(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[SCRIPT["latency"]])
    s = ort_session(models.linear_regression())
    feeds = ort_feeds(s, dims={"N": 1})
    ortperf.latency(s, feeds, name="lr")
    ortperf.profile(s, feeds, name="lr", runs=2, warmup=0)


def test_sweep(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(interleave=[SCRIPT["sweep"]])
    s = ort_session(models.linear_regression())
    ortperf.api_sweep(s, ort_feeds(s, dims={"N": 1}))
"""

BASE = 1e-4
RUN = ("-p", "no:cacheprovider", "--ortperf-store=results.sqlite")


def blocks(ratio: float, n: int = 25) -> list[list[float]]:
    ref = [BASE * (1 + 0.002 * (i % 7)) for i in range(n)]
    return [ref, [r * ratio for r in ref]]


def write_script(pytester: pytest.Pytester, ratio: float) -> None:
    script = {
        "compare": [blocks(ratio)],
        "latency": [BASE * (1 + 0.001 * i) for i in range(25)],
        "sweep": [
            [BASE * (1 + 0.3 * k) * (1 + 0.01 * (i % 5)) for i in range(12)] for k in range(6)
        ],
    }
    (pytester.path / "script.json").write_text(json.dumps(script))


@pytest.fixture
def regressed(pytester: pytest.Pytester) -> pytest.Pytester:
    """A suite with a baseline at ratio 0.9, then scripted to measure 0.99 (+10%)."""
    pytester.makepyfile(test_perf=INNER)
    write_script(pytester, 0.9)
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=3)
    write_script(pytester, 0.99)
    return pytester


def images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in PNG.findall(page)]


# ------------------------------------------------------------------------------ real runs


def test_report_json_and_markdown_of_a_failing_run(
    regressed: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = regressed.path / "step_summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = regressed.runpytest(
        *RUN,
        "--ortperf",
        "--ortperf-report=out/report.html",  # a missing directory is created
        "--ortperf-json=out/results.json",
    )
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(
        [
            "*HTML report written to *out/report.html",
            "*JSON results (ortperf) written to *out/results.json",
            "*Markdown summary appended to *step_summary.md",
        ]
    )
    # A regression is confirmed by a second measurement, pooled with the first.
    result.stdout.fnmatch_lines(
        [
            "*(the verdict of a second measurement on fresh session pairs, pooled with the "
            "first where they confirm it; the first alone read ratio +10.0% [[]*] -> regressed)"
        ]
    )
    page = (regressed.path / "out" / "report.html").read_text().replace("<wbr>", "")
    assert page.startswith("<!DOCTYPE html>") and "<script>" in page and "<style>" in page
    assert "http://" not in page and "https://" not in page  # nothing fetched
    # The outcomes table: the regressed ratio is the first row.
    outcomes = page.split('class="sortable outcomes"')[1].split("</table>")[0]
    first_row = outcomes.split("<tbody>")[1].split("</tr>")[0]
    assert "regressed" in first_row and "attention" in first_row and "ratio" in first_row
    assert "+10.0%" in first_row
    for text in ("Comparisons", "Latency distributions", "Run-API sweeps", "Profiles by op type"):
        assert text in page
    assert "iobinding" in page and "run_with_ort_values" in page  # the sweep's APIs
    assert "History" in page and "0.900 → 0.990" in page  # two stored runs of the ratio
    assert "MatMul" in page  # the per-op table of the profile
    if HAS_MPL:
        pngs = images(page)
        assert len(pngs) >= 5 and all(p.startswith(b"\x89PNG") for p in pngs)
        assert PLOTS_HINT not in page
    else:
        assert PLOTS_HINT in page

    doc = json.loads((regressed.path / "out" / "results.json").read_text())
    check_ortperf_schema(doc)
    assert doc["counts"]["regressed"] == 1 and doc["exit_status"] == 1
    attention = next(r for r in doc["results"] if r["name"] == "attention")
    ratio = next(v for v in attention["verdicts"] if v["metric"] == "ratio")
    assert ratio["outcome"] == "regressed" and ratio["change"] == pytest.approx(0.1)
    assert doc["run_id"] == 2 and any(p["name"] == "lr" for p in doc["profiles"])

    text = summary.read_text()
    assert text.startswith("# earlier step\n## pytest-ortperf")  # appended, not replaced
    failing = text.split("### Regressed or inconclusive")[1]
    assert failing.lstrip().startswith("- **regressed** `test_perf.py::test_attention::attention`")
    # The baseline took BASELINE_RUNS runs of 25 blocks (--ortperf-update).
    taken = f"({BASELINE_RUNS} runs, {25 * BASELINE_RUNS} blocks)"
    assert f"ratio 0.990 vs baseline 0.900 {taken}: +10.0% [" in failing
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert "regressed" in table[1] and "`test_perf.py::test_sweep`" in text


def test_pytest_benchmark_layout_from_a_run(regressed: pytest.Pytester) -> None:
    result = regressed.runpytest(
        *RUN, "--ortperf", "--ortperf-json=bench.json", "--ortperf-json-format=pytest-benchmark"
    )
    result.stdout.fnmatch_lines(["*JSON results (pytest-benchmark) written to *bench.json"])
    doc = json.loads((regressed.path / "bench.json").read_text())
    check_pytest_benchmark_layout(doc)
    names = [b["name"] for b in doc["benchmarks"]]
    assert "test_attention::attention:candidate" in names and "test_sweep::api:run" in names
    assert len(names) == len(set(names)) == 2 + 1 + 6


def test_ini_keys_and_unwritable_paths(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=INNER)
    write_script(pytester, 0.9)
    (pytester.path / "afile").write_text("not a directory")
    pytester.makeini(
        "[pytest]\nortperf_report = afile/report.html\nortperf_json = data/r.json\n"
        "ortperf_json_format = pytest-benchmark\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf-store=none", "--ortperf")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*HTML report NOT written to *afile/report.html: *",
            "*JSON results (pytest-benchmark) written to *data/r.json",
        ]
    )
    bad = pytester.runpytest("--ortperf-store=none", "-o", "ortperf_json_format=csv")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*ortperf_json_format must be one of ortperf, pytest-benchmark*"])


def test_smoke_mode_writes_no_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_smoke="""
        from pytest_ortperf import models

        def test_lr(ort_session, ort_feeds, ortperf):
            s = ort_session(models.linear_regression())
            ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf-report=r.html")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "r.html").exists()


# ------------------------------------------------------------------------------ pure builders


def _records() -> list[Any]:
    return [
        latency("tests/test_m.py::test_lat"),
        comparison("tests/test_m.py::test_cmp", ratio=0.96),
        comparison("tests/test_m.py::test_ok", name="fine"),
    ]


VERDICT = Judgement.from_dict(
    {
        "test": "tests/test_m.py::test_cmp",
        "name": "fused",
        "verdicts": [
            {
                "metric": "ratio",
                "outcome": "regressed",
                "baseline": 0.8,
                "current": 0.96,
                "change": 0.2,
                "low": 0.18,
                "high": 0.22,
                "threshold": 0.05,
                "alpha": 0.01,
                "p_value": 1e-6,
                "n": 10,
                "message": "ratio 0.960 vs baseline 0.800: +20.0% -> regressed",
            },
            {
                "metric": "structure",
                "outcome": "ok",
                "baseline": 3.0,
                "current": 3.0,
                "change": 0.0,
                "low": 0.0,
                "high": 0.0,
                "threshold": 0.0,
                "alpha": 0.0,
                "p_value": None,
                "n": 0,
                "message": "structure unchanged",
            },
        ],
    }
)


def test_summary_rows_put_failures_first() -> None:
    rows = summary_rows(_records(), [VERDICT])
    assert [r.outcome for r in rows] == [
        Outcome.REGRESSED,
        Outcome.OK,
        Outcome.RECORDED,
        Outcome.RECORDED,
    ]
    assert rows[0].change == "+20.0% [+18.0%, +22.0%]" and rows[0].value == "0.960 vs 0.800"


def test_html_without_matplotlib_has_tables_and_the_hint() -> None:
    page = build_html(ReportInput(_records(), [VERDICT]), charts_enabled=False)
    page = page.replace("<wbr>", "")  # break opportunities in long ids
    assert PLOTS_HINT in page and "<img" not in page
    assert "tests/test_m.py::test_cmp::fused" in page and "<table" in page
    assert "1 metric(s) failed the gate (regressed)" in page


@pytest.mark.skipif(not HAS_MPL, reason="matplotlib not installed")
def test_html_charts_are_embedded_pngs() -> None:
    page = build_html(ReportInput(_records(), [VERDICT], threshold=0.05))
    pngs = images(page)
    assert len(pngs) >= 3 and all(p.startswith(b"\x89PNG\r\n\x1a\n") for p in pngs)


def test_markdown_escapes_pipes_and_says_when_nothing_was_measured() -> None:
    text = markdown_summary([latency("t.py::test_a|b")])
    assert "`t.py::test_a\\|b`" in text
    assert "nothing measured" in markdown_summary([])


def check_ortperf_schema(doc: dict[str, Any]) -> None:
    """Our schema, checked key by key (jsonschema is not a dependency)."""
    assert doc["schema"] == SCHEMA == "pytest-ortperf/1"
    assert doc["generator"]["name"] == "pytest-ortperf"
    for key in ("started", "finished"):
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", doc[key])
    assert set(doc["git"]) >= {"commit", "branch", "dirty"}
    assert isinstance(doc["environment"], dict) and isinstance(doc["notes"], list)
    assert set(doc["settings"]) == {
        "budget_s",
        "threshold",
        "alpha",
        "strict",
        "family_alpha",
        "update",
        "baseline",
    }
    assert all(isinstance(n, int) for n in doc["counts"].values())
    suite = doc["suite"]
    assert suite is None or set(suite) == {
        "gated", "alpha_max", "alpha_min", "false_alarm_if_independent",
        "false_alarm_bound", "family", "measuring_s",
    }  # fmt: skip
    if suite is not None:  # the gated verdicts' own times, added up
        timed = [
            v["seconds"] for r in doc["results"] for v in r["verdicts"]
            if v["metric"] != "structure" and v["outcome"] not in ("new", "not_comparable")
        ]  # fmt: skip
        assert suite["measuring_s"] == pytest.approx(sum(timed)) and timed
    for result in doc["results"]:
        assert result["id"] == f"{result['test']}::{result['name']}"
        assert result["kind"] in ("latency", "compare", "memory")
        assert isinstance(result["measured"], bool) and isinstance(result["api"], str)
        arms = [result]
        if result["kind"] == "compare":
            assert result["low"] <= result["ratio"] <= result["high"]
            assert len(result["block_ratios"]) == len(result["candidate"]["samples"])
            arms = [result["reference"], result["candidate"]]
        if result["kind"] != "memory":
            for arm in arms:
                assert set(arm["summary"]) == {
                    "n",
                    "median",
                    "mean",
                    "std",
                    "min",
                    "max",
                    "p90",
                    "p99",
                    "iqr",
                }
                assert arm["summary"]["n"] == len(arm["samples"]) > 0
        for verdict in result["verdicts"]:
            # A confirmed verdict also says how many looks its confirmation took at alpha;
            # one the gate measured for, the time it took and its session pairs.
            assert verdict.get("looks", 1) in (1, CONFIRM_LOOKS)
            measured = verdict["metric"] != "structure"
            assert ("seconds" in verdict and "pairs" in verdict) == measured, verdict
            if measured:
                assert verdict["seconds"] > 0 and verdict["pairs"] >= 1
            assert set(verdict) - {"looks", "seconds", "pairs"} == {
                "metric",
                "outcome",
                "baseline",
                "current",
                "change",
                "low",
                "high",
                "threshold",
                "alpha",
                "p_value",
                "n",
                "message",
            }
    for profile in doc["profiles"]:
        assert {"op_type", "total_us", "count", "share"} <= set(profile["by_op"][0])


def test_ortperf_json_is_strict_json() -> None:
    run = RunInfo(started=0.0, finished=1.0, settings={"budget_s": 1.0})
    nan = float("nan")
    verdict = Verdict("latency", Outcome.NEW, nan, 1e-3, nan, nan, nan, 0.05, 0.01, nan, 20, "")
    doc = ortperf_json(
        run,
        [latency("t.py::test_x")],
        [Judgement("t.py::test_x", "latency", (verdict,))],
        {("t.py::test_x", "latency"): [{"op_type": "Add", "total_us": 1.0}]},
    )
    back = json.loads(json.dumps(doc, allow_nan=False))
    assert back["results"][0]["verdicts"][0]["p_value"] is None  # NaN -> null
    assert back["results"][0]["summary"]["n"] == 20 and back["counts"] == {"new": 1}


STATS_KEYS = {
    "min",
    "max",
    "mean",
    "stddev",
    "rounds",
    "median",
    "iqr",
    "q1",
    "q3",
    "iqr_outliers",
    "stddev_outliers",
    "outliers",
    "ld15iqr",
    "hd15iqr",
    "ops",
    "total",
    "iterations",
    "data",
}


def check_pytest_benchmark_layout(doc: dict[str, Any]) -> None:
    assert set(doc) >= {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert set(doc["commit_info"]) >= {"id", "dirty", "branch"}
    assert {"node", "processor", "machine", "python_version", "system"} <= set(doc["machine_info"])
    for bench in doc["benchmarks"]:
        assert set(bench) >= {"group", "name", "fullname", "params", "param", "stats", "options"}
        assert set(bench["stats"]) == STATS_KEYS
        stats = bench["stats"]
        assert stats["min"] <= stats["q1"] <= stats["median"] <= stats["q3"] <= stats["max"]
        assert stats["rounds"] == len(stats["data"])


def test_benchmark_stats_by_hand() -> None:
    stats = benchmark_stats([1.0, 2.0, 3.0, 4.0, 100.0], calls_per_block=10)
    assert stats["median"] == 3.0 and stats["q1"] == 2.0 and stats["q3"] == 4.0
    assert stats["iqr"] == 2.0 and stats["iqr_outliers"] == 1 and stats["hd15iqr"] == 4.0
    assert stats["ld15iqr"] == 1.0 and stats["stddev_outliers"] == 1
    assert stats["outliers"] == "1;1" and stats["iterations"] == 10
    assert stats["ops"] == pytest.approx(1 / 22) and stats["total"] == 110.0
    assert math.isclose(stats["stddev"], statistics.stdev([1.0, 2.0, 3.0, 4.0, 100.0]))


def _bench_file(tmp_path: Path) -> Path:
    run = RunInfo(
        started=1_700_000_000.0,
        finished=1_700_000_005.0,
        git={"commit": "abc", "branch": "main", "dirty": False},
        settings={"budget_s": 1.0},
    )
    doc = pytest_benchmark_json(run, _records())
    check_pytest_benchmark_layout(doc)
    path = tmp_path / "0001_ortperf.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.skipif(
    importlib.util.find_spec("pytest_benchmark") is None, reason="pytest-benchmark not installed"
)
def test_pytest_benchmark_reads_our_file(tmp_path: Path) -> None:
    """pytest-benchmark's own loader and its `compare` command take our file unchanged."""
    from pytest_benchmark.logger import Logger
    from pytest_benchmark.storage.file import FileStorage

    path = _bench_file(tmp_path)
    storage = FileStorage(str(tmp_path), default_machine_id="m", logger=Logger(Logger.QUIET))
    loaded = list(storage.load_benchmarks(str(path)))
    assert len(loaded) == 5 and loaded[0]["fullname"] == "tests/test_m.py::test_lat::latency"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(path), "--group-by=group"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # A comparison's arms are benchmarks of their own, named "<measurement>:<arm>".
    assert "test_cmp::fused:candidate" in proc.stdout and "Median" in proc.stdout


# ------------------------------------------------------------------------------ ortperf report


def test_cli_report_from_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "results.sqlite"
    save(db, _records())
    save(db, _records(), started=1_700_000_060.0)
    out = tmp_path / "nested" / "report.html"
    assert ortperf_cli(["report", "--store", str(db), "-o", str(out), "--last", "5"]) == 0
    assert "wrote the report of run 2" in capsys.readouterr().err
    page = out.read_text().replace("<wbr>", "")
    assert NO_VERDICTS in page and "pytest-ortperf report: run 2" in page
    assert "tests/test_m.py::test_cmp::fused" in page and "History" in page
    assert ortperf_cli(["report", "--store", str(db), "--run", "7", "-o", str(out)]) == 2
    assert "no run with id 7" in capsys.readouterr().err


def test_write_atomic_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.html"
    write_atomic(target, "one")
    write_atomic(target, "two")
    assert target.read_text() == "two" and [p.name for p in target.parent.iterdir()] == ["b.html"]


# ------------------------------------------------------------------------------ browser


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(build_html(ReportInput(_records(), [VERDICT], threshold=0.05)))
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,1600",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000


def test_junit_properties_are_one_readable_line_per_record() -> None:
    from pytest_ortperf.reports.terminal import compact_property
    from pytest_ortperf.results import USER_PROPERTY, MemoryResult

    cmp = comparison("t.py::test_c", ratio=0.9).to_dict()
    assert compact_property(USER_PROPERTY, cmp) == "fused: ratio 0.900 [0.891, 0.909] via run"
    mem = MemoryResult((3 * 2**20,), 2**20, "vmhwm", test="t.py::test_m", name="peak").to_dict()
    assert compact_property(USER_PROPERTY, mem) == "peak: peak 3.0 MiB (vmhwm) via call"
    assert compact_property("other", {"a": 1}) == {"a": 1}
