"""Latency budgets on real sessions, through the plugin: measuring works and the verdict
reaches the test, its message and the reports. Budgets sit orders of magnitude from what
any machine measures for a model of well under a millisecond (a p99 of 1 s, since calls of
preempted rounds count and a busy machine's p99 reaches 10 ms; a median of 50 ms; 0.05 ms),
so no outcome depends on the machine's speed or load; the verdict logic itself is tested
in test_slo.py."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

RUN = ("-p", "no:cacheprovider", "--ortperf", "--ortperf-budget=0.3", "--ortperf-store=none")

PER_CALL = """
import pytest
from pytest_ortperf import models


def test_met(ort_session, ort_feeds, ortperf):
    s = ort_session(models.control(layers=4))
    # preempted calls count: on a busy machine a p99 of 10 ms is real, so 1 s for the p99
    r = ortperf.per_call(s, ort_feeds(s), name="met", slo={"p99": "1 s", "p50": "50 ms"})
    assert [(v.figure, v.outcome) for v in r.slo] == [("p99", "met"), ("p50", "met")]
    # judged on every call, those of preempted rounds too (the record keeps the clean ones)
    assert r.slo[0].n >= max(r.n, 662)


def test_violated(ort_session, ort_feeds, ortperf):
    s = ort_session(models.control(layers=4))
    ortperf.per_call(s, ort_feeds(s), name="too tight", slo={"p99": "0.05 ms"})


@pytest.mark.ortperf(slo={"p99": "1 s"})
def test_marker(ort_session, ort_feeds, ortperf):
    s = ort_session(models.control(layers=4))
    r = ortperf.per_call(s, ort_feeds(s), name="marked")
    assert [v.outcome for v in r.slo] == ["met"]
    assert ortperf.latency(s, ort_feeds(s), name="no budget").slo == ()


def test_latency(ort_session, ort_feeds, ortperf):
    s = ort_session(models.control(layers=4))
    r = ortperf.latency(s, ort_feeds(s), name="median", slo="50 ms")
    assert [v.outcome for v in r.slo] == ["met"], r.slo
    ortperf.latency(s, ort_feeds(s), name="median too tight", slo="0.05 ms")
"""


def test_per_call_and_latency_budgets_on_real_sessions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_budgets=PER_CALL)
    result = pytester.runpytest(
        *RUN, "--ortperf-json=out.json", "--junitxml=junit.xml", "--ortperf-report=report.html",
        "--ortperf-markdown=summary.md", "--ortperf-pr-comment=comment.md",
    )  # fmt: skip
    result.assert_outcomes(passed=2, failed=2)
    # the terminal summary: one row per budget, violated first
    result.stdout.fnmatch_lines(
        [
            "latency budget*figure*verdict*estimate*bounds*budget*headroom*n",
            "*test_budgets.py::test_violated::too tight*p99*violated*50.0 us*-*% *[0-9]",
            "*test_budgets.py::test_met::met*p99*met*[[]*,*]*1.00 s*+*% *[0-9]",
        ]
    )
    junit = (pytester.path / "junit.xml").read_text()
    assert "met: single calls p50" in junit and "; budgets: p99 met (headroom +" in junit
    result.stdout.fnmatch_lines(
        [
            "*'too tight' violated its latency budget*",
            "*VIOLATED p99 of * calls: * (* at 99.8*% confidence); budget 50.0 us: "
            "violated, * calls over the budget*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*'median too tight' violated*", "*VIOLATED median of * blocks: *budget 50.0 us*"]
    )
    doc = json.loads((pytester.path / "out.json").read_text())
    by_name = {r["name"]: r for r in doc["results"]}
    assert [v["outcome"] for v in by_name["met"]["slo"]] == ["met", "met"]
    assert 0 < by_name["met"]["slo"][0]["headroom"] < 1
    assert [v["outcome"] for v in by_name["too tight"]["slo"]] == ["violated"]
    assert "slo" not in by_name["no budget"]
    page = (pytester.path / "report.html").read_text()
    assert '<section id="budgets"><h2>Latency budgets</h2>' in page
    assert "p99 of" in page and "budget 50.0 us: violated" in page
    md = (pytester.path / "summary.md").read_text()
    assert "### Latency budgets" in md and "| violated |" in md
    comment = (pytester.path / "comment.md").read_text()
    assert "Latency budgets: **2 violated, 4 met**" in comment
    assert "| ❌ **violated** | `test_budgets.py::test_violated` | too tight | p99 |" in comment


THROUGHPUT_AND_COLD_START = """
from pytest_ortperf import models


def test_throughput(ort_session, ort_feeds, ortperf):
    s = ort_session(models.control(layers=4))
    r = ortperf.throughput(s, ort_feeds(s), concurrency=[1, 2], seconds=0.3, name="tp",
                           slo={1: "1/s", 2: "1e9/s"})
    assert [(v.figure, v.outcome) for v in r.slo] == [
        ("1 threads median", "met"), ("2 threads median", "violated")]


def test_cold_start(ortperf):
    r = ortperf.cold_start(models.tiny_add(), {"X": __import__("numpy").ones((1, 16), "f")},
                           name="cold", shape_feeds=False,
                           slo={"create": "60 s", "first_run": "1 us"})
    assert [(v.figure, v.outcome) for v in r.slo] == [
        ("create median", "met"), ("first_run median", "violated")]
    assert r.launches >= 11
"""


def test_throughput_and_cold_start_budgets_on_real_sessions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_budgets=THROUGHPUT_AND_COLD_START)
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*'tp' violated its latency budget*",
            "*VIOLATED 2 threads median of 11 windows: *budget 1e+09/s: violated, "
            "11 windows below the budget*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*VIOLATED first_run median of * launches: *budget 1.00 us: violated*"]
    )


BAD = """
import pytest
from pytest_ortperf import models


def test_bad_unit(ort_session, ort_feeds, ortperf):
    s = ort_session(models.tiny_add())
    ortperf.per_call(s, ort_feeds(s), slo={"p99": "20 parsecs"})


def test_negative(ort_session, ort_feeds, ortperf):
    s = ort_session(models.tiny_add())
    ortperf.throughput(s, ort_feeds(s), concurrency=[1], slo={1: "-5/s"})


def test_missing_level(ort_session, ort_feeds, ortperf):
    s = ort_session(models.tiny_add())
    ortperf.throughput(s, ort_feeds(s), concurrency=[1, 2], slo={4: "5/s"})


@pytest.mark.ortperf(slo={"create": "fast"})
def test_bad_marker():
    pass
"""


@pytest.mark.parametrize("mode", [(), RUN])
def test_bad_budgets_are_clear_errors_naming_test_and_key(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    pytester.makepyfile(test_bad=BAD)
    result = pytester.runpytest(*mode)
    result.assert_outcomes(failed=3, errors=1)  # a bad marker errors at setup
    out = result.stdout.str()
    for message in (
        "test_bad.py::test_bad_unit: ortperf.per_call(slo=...)['p99']: the budget must be a "
        "quantity such as 20 ms or 2 s (units: s, ms, us, ns, µs), got '20 parsecs'",
        "test_bad.py::test_negative: ortperf.throughput(slo=...)[1]: the budget must not be "
        "negative, got '-5/s'",
        "test_bad.py::test_missing_level: ortperf.throughput(slo=...): a budget for 4 threads, "
        "which this measurement does not take (it takes 1 threads, 2 threads)",
        "test_bad.py::test_bad_marker: @pytest.mark.ortperf(slo=...)['create']: the budget "
        "must be a quantity such as 20 ms or 2 s",
    ):
        assert message in out
    assert "INTERNALERROR" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str() and "slo.py:" not in result.stdout.str()
