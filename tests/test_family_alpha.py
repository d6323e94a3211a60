"""Suite level: ``--ortperf-family-alpha`` splits a run-wide alpha over the timing verdicts
the selected tests plan (Bonferroni), and every report states how many verdicts were gated
and the chance of a false alarm anywhere among them. Pure figures, then real pytest runs on
real sessions with scripted samples."""

import dataclasses
import json
import shutil
import subprocess
import sys

import pytest

from pytest_ortperf.gating.suite import Family, planned_verdicts, suite_rate, timing_entries
from pytest_ortperf.results import Outcome, Verdict


def verdict(outcome=Outcome.OK, alpha=0.01, metric="ratio"):
    return Verdict(
        metric=metric, outcome=outcome, baseline=1.0, current=1.0, change=0.0, low=-0.01,
        high=0.01, threshold=0.05, alpha=alpha, p_value=0.5, n=20, message="",
    )  # fmt: skip


def test_the_family_splits_its_alpha_and_never_raises_one():
    family = Family(alpha=0.01, planned=50)
    assert family.share == pytest.approx(0.0002)
    assert family.alpha_of(0.01) == pytest.approx(0.0002)
    assert family.alpha_of(0.0001) == 0.0001  # a stricter marker keeps its own
    assert Family(alpha=0.05, planned=2).alpha_of(0.01) == 0.01  # a small suite keeps 0.01
    assert Family.from_dict(family.to_dict()) == family


def test_planned_verdicts_count_timing_entries_at_least_one_per_test():
    entries = {
        "test_a::x": {"kind": "compare", "test": "test_a"},
        "test_a::y": {"kind": "latency", "test": "test_a"},
        "test_a::mem": {"kind": "memory", "test": "test_a"},  # a tolerance, not a test
        "test_b[1]::x": {"kind": "compare"},  # the test read from the key
        # A compare that kept its candidate's recipe may add the candidate judged beside
        # the baseline's candidate: two verdicts planned.
        "test_c::x": {"kind": "compare", "test": "test_c", "recipe": {"model_sha256": "ab"}},
    }
    by_test = timing_entries(entries)
    assert by_test == {"test_a": 2, "test_b[1]": 1, "test_c": 2}
    assert planned_verdicts([by_test["test_a"], by_test["test_b[1]"], 0]) == 4


def test_a_confirmed_verdict_counts_at_its_procedure_s_alpha():
    # A confirmation judged each of its 4 looks at 0.0025: the procedure behind the
    # verdict alarms at most 4 x 0.0025 of the time, and that is what the suite adds up.
    confirmed = dataclasses.replace(verdict(Outcome.REGRESSED, alpha=0.0025), looks=4)
    assert Verdict.from_dict(confirmed.to_dict()) == confirmed
    assert "looks" not in verdict().to_dict()  # the usual verdict's format is unchanged
    rate = suite_rate([confirmed, verdict()])
    assert rate is not None and rate.bound == pytest.approx(0.02)
    assert rate.text().startswith("2 timing verdicts gated at alpha 0.01 each")


def test_the_suite_rate_is_the_union_bound_under_a_family():
    verdicts = [verdict(alpha=0.0002) for _ in range(50)]
    verdicts += [verdict(Outcome.NEW), verdict(metric="structure"), verdict(Outcome.REGRESSED)]
    rate = suite_rate(verdicts, Family(0.01, 50))
    assert rate is not None and rate.gated == 51
    assert rate.bound == pytest.approx(50 * 0.0002 + 0.01)
    assert "above the family alpha" in rate.text()  # 51 judged, 50 planned
    exact = suite_rate(verdicts[:50], Family(0.01, 50))
    assert exact is not None
    assert exact.bound == pytest.approx(0.01) and exact.independent < exact.bound
    assert exact.text() == (
        "50 timing verdicts gated at alpha 0.0002 each (family alpha 0.01 over 50 planned "
        "verdicts): a false alarm anywhere in this run is 1.0% likely if their noise is "
        "independent, at most 1.0% in any case"
    )
    assert exact.to_dict()["family"] == {"alpha": 0.01, "planned": 50, "per_verdict": 0.0002}
    assert suite_rate([verdict(Outcome.NEW)]) is None


SUITE = """
import numpy as np
import pytest
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine


def _compare(ort_session, ort_feeds, ortperf, name):
    rng = np.random.default_rng(0)
    ref = 1e-4 * np.exp(rng.normal(0, 0.01, 25))
    cand = ref * 0.9 * np.exp(rng.normal(0, 0.01, 25))
    ortperf.engine = ScriptedEngine(interleave=[[ref.tolist(), cand.tolist()]])
    ref = ort_session(models.attention(), optimization="disable")
    cand = ort_session(models.attention())
    ortperf.compare(ref, cand, ort_feeds(ref, dims={"B": 1}), name=name)


def test_one(ort_session, ort_feeds, ortperf):
    _compare(ort_session, ort_feeds, ortperf, "a")


def test_two(ort_session, ort_feeds, ortperf):
    _compare(ort_session, ort_feeds, ortperf, "a")
    _compare(ort_session, ort_feeds, ortperf, "b")


@pytest.mark.ortperf(alpha=0.0001)
def test_marker(ort_session, ort_feeds, ortperf):
    _compare(ort_session, ort_feeds, ortperf, "a")


def test_measures_nothing():
    pass
"""

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none", "--ortperf-budget=0.01")
PLANNED = 4  # test_one 1, test_two 2, test_marker 1; test_measures_nothing none


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """The suite's baseline files, taken once for the module's tests."""
    where = tmp_path_factory.mktemp("family")
    (where / "test_perf.py").write_text(SUITE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *RUN, "--ortperf-update", "-q"],
        cwd=where, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return where / "__ortperf__"


@pytest.fixture
def suite(pytester, baselines):
    pytester.makepyfile(test_perf=SUITE)
    shutil.copytree(baselines, pytester.path / "__ortperf__")
    return pytester


def alphas(pytester, path="out.json"):
    doc = json.loads((pytester.path / path).read_text())
    found = {
        f"{r['test'].split('::')[-1]}::{r['name']}": v["alpha"]
        for r in doc["results"]
        for v in r["verdicts"]
        if v["metric"] == "ratio"
    }
    return doc, found


def expected_alphas(share):
    return {
        "test_one::a": pytest.approx(share),
        "test_two::a": pytest.approx(share),
        "test_two::b": pytest.approx(share),
        "test_marker::a": 0.0001,  # stricter than its share: kept
    }


def test_family_alpha_splits_over_the_planned_verdicts_in_every_report(suite):
    result = suite.runpytest(
        *RUN, "--ortperf", "--ortperf-family-alpha=1%", "--ortperf-json=out.json",
        "--ortperf-markdown=out.md", "--ortperf-report=out.html",
    )  # fmt: skip
    share = 0.01 / PLANNED
    doc, found = alphas(suite)
    assert found == expected_alphas(share)
    assert doc["settings"]["family_alpha"] == 0.01
    assert doc["suite"]["gated"] == PLANNED
    assert doc["suite"]["family"] == {"alpha": 0.01, "planned": PLANNED, "per_verdict": share}
    assert doc["suite"]["false_alarm_bound"] == pytest.approx(3 * share + 0.0001)
    line = (
        "4 timing verdicts gated at alpha 0.0025 or less each (family alpha 0.01 over 4 "
        "planned verdicts): a false alarm anywhere in this run is 0.8% likely if their "
        "noise is independent, at most 0.8% in any case"
    )
    assert line in " ".join(result.outlines)
    assert line in (suite.path / "out.md").read_text().replace("\\", "")
    assert line in (suite.path / "out.html").read_text()
    # -k leaves test_two out: the count is the selected tests' (1 + 1)
    suite.runpytest(*RUN, "--ortperf", "--ortperf-family-alpha=0.01", "-k", "not two",
                    "--ortperf-json=k.json")  # fmt: skip
    doc, found = alphas(suite, "k.json")
    assert doc["suite"]["family"]["planned"] == 2
    assert found["test_one::a"] == pytest.approx(0.005)


def test_without_the_option_the_reports_state_the_per_verdict_rate(suite):
    result = suite.runpytest(*RUN, "--ortperf", "--ortperf-json=out.json")
    doc, found = alphas(suite)
    assert found == {**expected_alphas(0.01), "test_marker::a": 0.0001}
    assert doc["suite"]["family"] is None and doc["settings"]["family_alpha"] is None
    assert doc["suite"]["false_alarm_bound"] == pytest.approx(0.0301)
    result.stdout.fnmatch_lines(["4 timing verdicts gated at alpha 0.01 or less each: *"])
    assert "(--ortperf-family-alpha bounds it)" in " ".join(result.outlines)


def test_under_xdist_every_worker_splits_over_the_whole_run(suite):
    result = suite.runpytest_subprocess(
        *RUN, "-n", "2", "--ortperf", "--ortperf-json=out.json", "--ortperf-family-alpha=0.01"
    )
    doc, found = alphas(suite)
    assert found == expected_alphas(0.01 / PLANNED)
    assert doc["suite"]["family"]["planned"] == PLANNED  # the controller got it
    assert "(family alpha 0.01 over 4 planned verdicts)" in " ".join(result.outlines)


def test_family_alpha_from_the_ini_and_with_history_baselines(pytester):
    pytester.makepyfile(test_perf=SUITE)
    pytester.makeini("[pytest]\nortperf_family_alpha = 0.02\nortperf_baseline = history\n")
    # No store yet: every verdict is new; one planned verdict per measuring test.
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--ortperf-budget=0.02", "--ortperf", "-k", "one",
        "--ortperf-store=sqlite.db", "--ortperf-json=out.json",
    )  # fmt: skip
    doc = json.loads((pytester.path / "out.json").read_text())
    assert doc["settings"]["family_alpha"] == 0.02
    assert doc["suite"] is None  # nothing gated yet
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0.5", "*--ortperf-family-alpha must be below 0.5, got *0.5*"),
        ("lots", "*--ortperf-family-alpha must be a fraction*"),
        ("0", "*--ortperf-family-alpha must be positive*"),
    ],
)
def test_a_bad_family_alpha_is_a_usage_error(pytester, value, message):
    pytester.makepyfile(test_perf=SUITE)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--ortperf", f"--ortperf-family-alpha={value}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_share_below_the_smallest_alpha_is_a_usage_error(suite):
    result = suite.runpytest(*RUN, "--ortperf", "--ortperf-family-alpha=2e-6")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--ortperf-family-alpha (or ini ortperf_family_alpha) 2e-06 over 4 planned timing "
         "verdicts is 5e-07 each, below the smallest alpha 1e-06 *: raise it to at least "
         "4e-06 or select fewer tests (-k, -m)"]
    )  # fmt: skip
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_family_share_shows_in_the_verdicts_confidence():
    from pytest_ortperf.units import format_confidence

    assert format_confidence(1 - 2 * 0.01) == "98% CI"
    assert format_confidence(1 - 2 * 0.0002) == "99.96% CI"  # never rounded up to 100%
    assert format_confidence(1 - 2 * 1e-6) == "99.9998% CI"
