"""The terminal summary fit to the terminal's width (ids keep their ends; value, change and
interval of each gated metric), and smoke-mode tables of ``rank``/``api_sweep`` marked as
unmeasured. Real pytest runs with scripted samples."""

import json
import re

import pytest

from pytest_ortperf.reports.terminal import MIN_ID, format_table, summary_lines
from pytest_ortperf.results import (
    Judgement,
    LatencyResult,
    Outcome,
    PerCallResult,
    Verdict,
)

LONG = "a_rather_long_parameter_that_makes_the_test_id_wide_" + "x" * 40

SUITE = f"""
import json, pathlib
import pytest
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

SCALE = json.loads(pathlib.Path(__file__).with_name("scale.json").read_text())


@pytest.mark.parametrize("variant", ["{LONG}"])
def test_latency(ort_session, ort_feeds, ortperf, variant):
    samples = [1e-4 * SCALE * (1 + 0.001 * i) for i in range(25)]
    ortperf.engine = ScriptedEngine(measure=[samples])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={{"N": 1}}), name="the_end")
"""

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none", "--color=no")


def _gated_run(pytester: pytest.Pytester, scale: float) -> pytest.RunResult:
    (pytester.path / "scale.json").write_text(json.dumps(scale))
    return pytester.runpytest(*RUN, "--ortperf")


@pytest.fixture
def baselined(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_summary=SUITE)
    (pytester.path / "scale.json").write_text(json.dumps(1.0))
    assert pytester.runpytest(*RUN, "--ortperf-update").ret == 0
    return pytester


def _summary(result: pytest.RunResult) -> list[str]:
    """The lines of the ``ortperf`` section, less its notes."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "= ortperf =" in line) + 1
    end = next((i for i, line in enumerate(lines) if i > start and line.startswith("=")), None)
    return [line for line in lines[start:end] if not line.startswith("ortperf: ")]


@pytest.mark.parametrize("columns", [80, 200])
def test_the_summary_fits_the_terminal(
    baselined: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = _gated_run(baselined, 1.0)
    result.assert_outcomes(passed=1)
    lines = _summary(result)
    assert lines and max(len(line) for line in lines) <= columns
    text = "\n".join(lines)
    # the gated metric with its value, change and interval, its confidence in the header
    header = next(line for line in lines if "outcome" in line)
    assert "value" in header and "change" in header and "98% CI" in header
    gated = lines[lines.index(next(x for x in lines if x.startswith("gated metric"))) :]
    shown = re.compile(r"\d+ us vs \d+ us +[+-]\d+\.\d% +\[[+-]\d+\.\d%, [+-]\d+\.\d%\]$")
    assert any(shown.search(line) for line in gated), text
    full_id = f"test_summary.py::test_latency[{LONG}]::the_end"
    if columns == 200:
        assert full_id in text and "..." not in text
    else:
        # too narrow for the id beside its cells: the id keeps its end (or stands whole)
        ids = [line.split()[0] for line in lines if "::the_end" in line]
        assert len(ids) == 2 and all(i.endswith("]::the_end") for i in ids), text
        assert all(i.startswith("...") and full_id.endswith(i[3:]) for i in ids), text


def test_a_wide_terminal_shortens_nothing_and_a_narrow_one_keeps_id_ends() -> None:
    rows = [(f"tests/test_models.py::test_resnet[{p}]::latency", "1.00 ms") for p in "ab"]
    assert format_table(("id", "median"), rows, width=200)[2].startswith("tests/")
    narrow = format_table(("id", "median"), rows, width=40)
    assert max(len(line) for line in narrow) <= 40
    # cut only as much as needed, from the left: the distinguishing ends stay
    assert narrow[2].startswith("...") and narrow[2].split()[0].endswith("[a]::latency")
    assert narrow[3].split()[0].endswith("[b]::latency")
    assert len(narrow[2]) == 40


def test_a_terminal_too_narrow_for_an_id_beside_its_cells_stacks_rows() -> None:
    rows = [("tests/test_models.py::test_resnet[a]::latency", "2.00 ms vs 1.00 ms", "+100%")]
    lines = format_table(("gated metric", "value", "change"), rows, width=MIN_ID + 10)
    assert max(len(line) for line in lines) <= MIN_ID + 10
    assert lines[0] == "gated metric"
    assert lines[3].endswith("[a]::latency") and lines[4].startswith("    2.00 ms vs 1.00 ms")


GATED = ("gated metric", "metric", "outcome", "value", "change", "CI")
WIDE_ROWS = [
    ("tests/test_models.py::test_ocr_det[cpu]::latency", "latency p99", "inconclusive",
     "16.1 ms vs 15.8 ms", "+2.2%", "[-74.8%, +120.3%] 98%"),
    ("t.py::test_b::lat", "memory.arena_peak", "improved", "1.23 MB vs 1.30 MB", "-5.4%",
     "[-6.0%, -4.9%] 95%"),
]  # fmt: skip


@pytest.mark.parametrize("width", [80, 60, 40])
@pytest.mark.parametrize("ids", ["long", "short"])
def test_value_change_and_interval_stay_whole_in_a_ci_log(width: int, ids: str) -> None:
    """80 columns (a CI log), and narrower: every cell but the id whole, wrapped onto a
    line of its own where the row does not fit, never cut."""
    rows = WIDE_ROWS if ids == "long" else [("t.py::x::lat", *WIDE_ROWS[0][1:])]
    lines = format_table(GATED, rows, width=width)
    assert max(len(line) for line in lines) <= width, lines
    text = "\n".join(lines)
    assert all("..." not in line for line in lines if not line.startswith("...")), lines
    for row in rows:
        for cell in row[1:]:
            assert cell in text, (cell, lines)
        assert row[0] in text or any(
            line.startswith("...") and row[0].endswith(line[3:]) for line in lines
        )
    for header in GATED:
        assert header in text


def _verdict(metric: str, outcome: Outcome) -> Verdict:
    return Verdict(
        metric=metric, outcome=outcome, baseline=1.0, current=0.8, change=-0.2, low=-0.25,
        high=-0.15, threshold=0.1, alpha=0.01, p_value=None, n=20, message="faster",
    )  # fmt: skip


def _latency(name: str) -> LatencyResult:
    return LatencyResult("t.py::test_a", name, "run", (1e-3,) * 10, 10, True)


def _per_call(name: str) -> PerCallResult:
    return PerCallResult(
        test="t.py::test_a", name=name, api="run", calls=(1e-3,) * 10, timer_cost=0.0,
        calls_per_round=10, blocks=(1e-3,), calls_per_block=10, measured=True,
    )  # fmt: skip


def test_the_update_hint_names_only_what_an_update_records() -> None:
    """A tail verdict (per_call against a reference in the same run) is never baselined:
    no "--ortperf-update records them" for it; a latency's improvement or a new one is."""
    tail = [_per_call("tail")]
    tail_verdicts = [Judgement("t.py::test_a", "tail", (_verdict("p99", Outcome.IMPROVED),))]
    lines = summary_lines(tail, tail_verdicts, width=200)
    assert any("p99" in line and "improved" in line for line in lines)
    assert not any("--ortperf-update" in line for line in lines), lines
    both = summary_lines(
        [*tail, _latency("lat"), _latency("fresh")],
        [
            *tail_verdicts,
            Judgement("t.py::test_a", "lat", (_verdict("median", Outcome.IMPROVED),)),
            Judgement("t.py::test_a", "fresh", (_verdict("median", Outcome.NEW),)),
        ],
        width=200,
    )
    assert (
        "1 improved, 1 without baseline: pytest --ortperf --ortperf-update records them" in both
    ), both


def test_cells_stay_escaped_when_shortened() -> None:
    rows = [("t.py::test_x::" + "\x1b[2J" * 10 + "end", "1")]
    lines = format_table(("id", "n"), rows, width=30)
    assert "\x1b" not in "".join(lines) and lines[2].split()[0].endswith("\\x1b[2Jend")


TABLES = """
import pytest
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine


def test_tables(ort_session, ort_feeds, ortperf):
    s = ort_session(models.linear_regression())
    t = ort_session(models.linear_regression(), optimization="disable")
    feeds = ort_feeds(s, dims={"N": 1})
    if ortperf.measured:
        ortperf.engine = ScriptedEngine(interleave=[[[1e-4] * 25, [2e-4] * 25]])
    ranked = ortperf.rank({"opt": s, "plain": t}, feeds)
    print("RANK", list(ranked["measured"]), ranked.attrs["measured"])
    if not ortperf.measured:
        swept = ortperf.api_sweep(s, feeds)
        print("SWEEP", set(swept["measured"]), swept.attrs["measured"], len(swept))
"""


def test_smoke_tables_are_marked_unmeasured(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tables=TABLES)
    smoke = pytester.runpytest("-p", "no:cacheprovider", "-s")
    smoke.assert_outcomes(passed=1)
    smoke.stdout.fnmatch_lines(["*RANK [[]False, False[]] False", "SWEEP {False} False *"])
    measured = pytester.runpytest(*RUN, "-s", "--ortperf")
    measured.assert_outcomes(passed=1)
    measured.stdout.fnmatch_lines(["*RANK [[]True, True[]] True"])


def test_the_suite_level_false_alarm_line_counts_only_tested_verdicts() -> None:
    import dataclasses

    from pytest_ortperf.reports.terminal import suite_rate_lines

    def judged(name: str, *verdicts: Verdict) -> Judgement:
        return Judgement("t.py::t", name, verdicts)

    ok = _verdict("ratio", Outcome.OK)
    gated = [
        *(judged(f"m{i}", ok) for i in range(49)),
        judged("m49", _verdict("structure", Outcome.OK), _verdict("latency", Outcome.REGRESSED)),
        judged("new", _verdict("ratio", Outcome.NEW)),  # nothing tested yet
        judged("other", _verdict("latency", Outcome.NOT_COMPARABLE)),
    ]
    # 50 verdicts at alpha 0.01: 1 - 0.99**50 = 39.5% if independent, 50% by the union bound
    assert suite_rate_lines(gated, 300) == [
        "50 timing verdicts gated at alpha 0.01 each: a false alarm anywhere in this run is "
        "39.5% likely if their noise is independent, at most 50.0% in any case "
        "(--ortperf-family-alpha bounds it)"
    ]
    assert suite_rate_lines([judged("s", _verdict("structure", Outcome.OK))]) == []
    one = suite_rate_lines([judged("a", ok)], 200)
    assert one == [
        "1 timing verdict gated at alpha 0.01: a false alarm in this run is at most 1.0% likely"
    ]
    two = [judged("a", ok), judged("b", dataclasses.replace(ok, alpha=0.005))]
    assert suite_rate_lines(two, 300)[0].startswith(
        "2 timing verdicts gated at alpha 0.01 or less each: "
    )
    narrow = suite_rate_lines(gated, 60)
    assert max(map(len, narrow)) <= 60 and " ".join(narrow) == suite_rate_lines(gated, 300)[0]
    # The time the gate measured for them, where the verdicts say it: new ones not counted.
    timed = [
        judged("a", dataclasses.replace(ok, seconds=0.75, pairs=3)),
        judged("b", dataclasses.replace(ok, seconds=2.5, pairs=7)),
        judged("new", dataclasses.replace(_verdict("ratio", Outcome.NEW), seconds=1.0)),
    ]
    assert suite_rate_lines(timed, 300)[0].endswith(
        "at most 2.0% in any case (--ortperf-family-alpha bounds it); measured in 3.2 s in all"
    )
