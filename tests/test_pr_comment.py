"""The pull-request comment (``--ortperf-pr-comment``): pure formatting of constructed
verdicts, and real ``--ortperf`` runs on a real model with scripted samples (the gate's
verdicts are deterministic) that write one quiet comment and one listing a regression."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
from ortperf_store_factories import ENV, comparison, latency

from pytest_ortperf.machine import machine_fingerprint
from pytest_ortperf.reports.json import RunInfo
from pytest_ortperf.reports.pr_comment import (
    MAX_CELL,
    MAX_CHARS,
    MAX_ROWS,
    machine_class,
    op_moves,
    pr_comment,
)
from pytest_ortperf.reports.writer import ReportFiles, RunResults, write_reports
from pytest_ortperf.results import Judgement, Outcome, Verdict
from pytest_ortperf.text import machine_label

MACHINE = "Test CPU 3000, 4 CPUs [0123456789ab]"
CELL = re.compile(r"(?<!\\)\|")
"""A table cell boundary: a pipe no backslash escapes."""


def verdict(outcome: Outcome, change: float = 0.0, metric: str = "ratio", msg: str = "") -> Verdict:
    return Verdict(
        metric, outcome, 0.9, 0.9 * (1 + change), change, change - 0.01, change + 0.01,
        0.05, 0.01, 0.001, 250, msg or f"{metric} {outcome}",
    )  # fmt: skip


def structure(outcome: Outcome, msg: str) -> Verdict:
    return Verdict("structure", outcome, 8.0, 9.0, 0.125, 0.125, 0.125, 0.0, 0.0, None, 2, msg)


def judged(test: str, name: str, *verdicts: Verdict) -> Judgement:
    return Judgement(test, name, tuple(verdicts))


def cells(row: str) -> list[str]:
    """The cells of a table row (the outer pipes dropped)."""
    parts = CELL.split(row)
    assert parts[0] == "" and parts[-1] == "", row
    return [p.strip() for p in parts[1:-1]]


def table(text: str) -> list[list[str]]:
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [cells(row) for row in rows[2:]]  # header and separator left out


# ------------------------------------------------------------------------------ formatting


def test_all_well_is_one_line_with_the_threshold_and_machine_class() -> None:
    records = [comparison("t.py::test_a"), latency("t.py::test_b", "lr"), comparison("t.py::c")]
    judgements = [
        judged("t.py::test_a", "fused", verdict(Outcome.OK, 0.01), structure(Outcome.OK, "same")),
        judged("t.py::test_b", "lr", verdict(Outcome.OK, -0.02, "latency")),
        judged("t.py::c", "fused", verdict(Outcome.INCONCLUSIVE, 0.04)),
    ]
    text = pr_comment(records, judgements, machine=MACHINE, threshold=0.05)
    assert text == (
        "ortperf: 3 measurements, no regression (threshold 5%) on Test CPU 3000, 4 CPUs "
        "\\[0123456789ab\\]; 1 inconclusive\n"
    )
    # Nothing gated (an update run): still one line.
    assert pr_comment(records, [], machine="m", threshold=0.05) == (
        "ortperf: 3 measurements, none gated on m\n"
    )


def test_regressions_and_improvements_are_listed_with_every_column() -> None:
    records = [
        latency("t.py::test_lr", "lr"),
        comparison("t.py::test_att", "attention"),
        comparison("t.py::test_fast", "gemm"),
        comparison("t.py::test_ok", "same"),
    ]
    lost = "candidate lost fusion: FusedMatMul 1 -> 0, MatMul 1 -> 2"
    judgements = [
        judged("t.py::test_lr", "lr", verdict(Outcome.OK, 0.0, "latency")),
        judged(
            "t.py::test_att",
            "attention",
            verdict(Outcome.REGRESSED, 0.10),
            structure(Outcome.REGRESSED, lost),
        ),
        judged("t.py::test_fast", "gemm", verdict(Outcome.IMPROVED, -0.2)),
        judged("t.py::test_ok", "same", verdict(Outcome.NEW, math.nan)),
    ]
    moved = [
        "  op types whose share of kernel time moved most, baseline -> now:",
        "    candidate MatMul: 40.0% -> 70.0%",
        "    candidate FusedMatMul: 30.0% -> 0.0%",
    ]
    text = pr_comment(
        records, judgements, machine=MACHINE, threshold=0.05,
        attributions={("t.py::test_att", "attention"): moved},
    )  # fmt: skip
    lines = text.splitlines()
    assert lines[0] == (
        "ortperf: **2 regressed**, 1 improved of 4 measurements (threshold 5%) on Test CPU "
        "3000, 4 CPUs \\[0123456789ab\\]; 1 new"
    )
    assert cells(lines[2]) == [
        "outcome", "test", "measurement", "metric", "change", "interval", "machine class",
        "op types that moved",
    ]  # fmt: skip
    rows = table(text)
    assert len(rows) == 3  # the ok and the new (not strict) are not listed
    ratio, struct, improved = rows
    assert ratio[1:6] == [
        "`t.py::test_att`",
        "attention",
        "ratio",
        "+10.0%",
        "\\[+9.0%, +11.0%\\] 98% CI",  # brackets escaped: never a link
    ]
    assert "regressed" in ratio[0] and ratio[6] == "Test CPU 3000, 4 CPUs \\[0123456789ab\\]"
    assert ratio[7] == "`candidate MatMul: 40.0% -> 70.0%`; `candidate FusedMatMul: 30.0% -> 0.0%`"
    assert struct[3:6] == ["structure", "9 vs 8 nodes", "-"]
    assert struct[7] == f"`{lost}`"
    assert "improved" in improved[0] and improved[4] == "-20.0%" and improved[7] == "-"
    assert lines[-1] == "Improvements can become the baseline: `pytest --ortperf --ortperf-update`."


def test_strict_runs_list_what_fails_them_and_long_lists_are_cut() -> None:
    records = [comparison(f"t.py::test_{i}", "m") for i in range(MAX_ROWS + 5)]
    judgements = [
        judged(f"t.py::test_{i}", "m", verdict(Outcome.INCONCLUSIVE, 0.04))
        for i in range(MAX_ROWS + 5)
    ]
    quiet = pr_comment(records, judgements, machine="m", threshold=0.05)
    assert quiet.count("\n") == 1 and f"{MAX_ROWS + 5} inconclusive" in quiet
    strict = pr_comment(records, judgements, machine="m", threshold=0.05, strict=True)
    assert len(table(strict)) == MAX_ROWS
    assert strict.splitlines()[-1] == "5 more not listed here: see the CI log."


def test_the_comment_stays_under_githubs_size_limit_and_says_what_was_cut() -> None:
    """30 long names made 93.5 KB (issue 24, item 16); GitHub takes 65,536 characters."""
    tests = [f"t.py::test_{i}[{'<|x|>' * 800}]" for i in range(MAX_ROWS)]
    records = [comparison(t, "m" * 3000) for t in tests]
    judgements = [judged(t, "m" * 3000, verdict(Outcome.REGRESSED, 0.2)) for t in tests]
    moves = {(t, "m" * 3000): [f"  Op{k} {'|' * 500}: 1% -> 9%" for k in range(6)] for t in tests}
    text = pr_comment(
        records, judgements, machine="CPU " * 1000, threshold=0.05, attributions=moves
    )
    assert len(text) <= MAX_CHARS
    rows = table(text)
    assert 0 < len(rows) < MAX_ROWS and all(len(row) == 8 for row in rows)
    assert text.splitlines()[-1] == (
        f"{MAX_ROWS - len(rows)} more not listed here (a comment holds at most {MAX_CHARS}"
        " characters): see the CI log."
    )
    assert text.startswith(f"ortperf: **{MAX_ROWS} regressed** of {MAX_ROWS} measurements")
    # long texts cut (an escaped character takes 2: `|` as `\|`), op-type moves each
    assert all(len(cell) <= 2 * MAX_CELL + 6 for row in rows for cell in row[:7])
    assert len(rows[0][7]) <= 6 * (2 * MAX_CELL + 6)
    assert rows[0][1].endswith("…`")


def test_hostile_test_ids_names_op_types_and_cpu_model_stay_in_their_cell() -> None:
    test = "t.py::test_x[a|b`c``<script>alert(1)</script>\nnew line|]"
    name = "n|`<img src=x onerror=alert(1)>`\r\n# heading"
    op = "Evil|Op<script>`x`\n"
    records = [comparison(test, name)]
    judgements = [judged(test, name, verdict(Outcome.REGRESSED, 0.1))]
    text = pr_comment(
        records, judgements, machine="CPU | <b>x</b>\n[1]", threshold=0.05,
        attributions={(test, name): [f"    candidate {op}: 1.0% -> 9.0%"]},
    )  # fmt: skip
    lines = text.splitlines()
    assert len(lines) == 5  # headline, blank, header, separator, one row: no newline got in
    row = table(text)[0]
    assert len(row) == 8  # no pipe of the inputs split a cell
    # Code spans fenced by more backticks than they hold (HTML in a code span is text),
    # control characters shown as escapes, pipes escaped for the table.
    assert row[1] == "```t.py::test_x[a\\|b`c``<script>alert(1)</script>\\nnew line\\|]```"
    assert row[7] == "``candidate Evil\\|Op<script>`x`\\n: 1.0% -> 9.0%``"
    # Text: every character that could start Markdown or HTML backslash-escaped.
    assert row[2] == "n\\|\\`\\<img src=x onerror=alert(1)\\>\\`\\\\r\\\\n\\# heading"
    machine = "CPU \\| \\<b\\>x\\</b\\>\\\\n\\[1\\]"
    assert row[6] == machine and lines[0].endswith(f" on {machine}")


def test_op_moves_and_machine_class() -> None:
    assert op_moves(structure(Outcome.OK, "structure unchanged")) == []
    assert op_moves(verdict(Outcome.REGRESSED, 0.1), ["  where the time goes:", "", "  a: b"]) == [
        "a: b"
    ]
    assert machine_class(ENV) == machine_label(machine_fingerprint(ENV), "Test CPU 3000", 4)
    assert machine_class({"fingerprint": "abc"}) == "unknown CPU [abc]"


def test_written_atomically_and_a_bad_path_is_a_note(tmp_path: Path) -> None:
    run = RunInfo(started=0.0, finished=1.0, environment={**ENV, "fingerprint": "f00"})
    results = RunResults(run=run, records=[latency("t.py::t")], threshold=0.05)
    target = tmp_path / "out" / "comment.md"
    assert write_reports(ReportFiles(pr_comment=target), results) == [
        f"PR comment written to {target}"
    ]
    assert (
        target.read_text()
        == "ortperf: 1 measurement, none gated on Test CPU 3000, 4 CPUs \\[f00\\]\n"
    )
    (tmp_path / "afile").write_text("not a directory")
    for bad in (tmp_path / "afile" / "c.md", tmp_path / "out"):
        lines = write_reports(ReportFiles(pr_comment=bad), results)
        assert len(lines) == 1 and lines[0].startswith(f"PR comment NOT written to {bad}: ")
    assert sorted(os.listdir(tmp_path / "out")) == ["comment.md"]  # no temp file left


# ------------------------------------------------------------------------------ real runs

INNER = """
import json, pathlib
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

SCRIPT = json.loads(pathlib.Path(__file__).with_name("script.json").read_text())


def test_attention(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(interleave=[SCRIPT["blocks"]])
    ref = ort_session(models.attention(), optimization="disable")
    cand = ort_session(models.attention(zero_pad=SCRIPT["pad"]))
    ortperf.compare(ref, cand, ort_feeds(ref, dims={"B": 1}), name="attention")
"""

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none")
BASE = 1e-4


def script(pytester: pytest.Pytester, ratio: float, pad: int = 0) -> None:
    """Scripted blocks of the ratio ``ratio``; ``pad`` widens the candidate's projections
    (same outputs and structure, more MatMul work: its op-type shares move for real)."""
    ref = [BASE * (1 + 0.002 * (i % 7)) for i in range(25)]
    blocks = [ref, [r * ratio for r in ref]]
    (pytester.path / "script.json").write_text(json.dumps({"blocks": blocks, "pad": pad}))


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A suite whose baseline reads ratio 0.9 (with op shares, for the attribution)."""
    pytester.makepyfile(test_perf=INNER)
    script(pytester, 0.9)
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    return pytester


def test_a_run_with_nothing_moved_writes_one_quiet_line(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nortperf_pr_comment = ci/comment.md\n")
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    target = suite.path / "ci" / "comment.md"
    result.stdout.fnmatch_lines([f"*PR comment written to {target}"])
    text = target.read_text()
    assert re.fullmatch(
        r"ortperf: 1 measurement, no regression \(threshold 5%\) on .+ \\\[[0-9a-f]{12}\\\]\n",
        text,
    ), text


def test_a_regression_is_listed_with_the_op_types_that_moved(suite: pytest.Pytester) -> None:
    script(suite, 0.99, pad=256)  # +10% against the stored 0.9
    result = suite.runpytest(*RUN, "--ortperf", "--ortperf-pr-comment=comment.md")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the comment changes no outcome
    lines = (suite.path / "comment.md").read_text().splitlines()
    assert lines[0].startswith("ortperf: **1 regressed** of 1 measurement (threshold 5%) on ")
    (row,) = table("\n".join(lines))
    assert row[1:4] == ["`test_perf.py::test_attention`", "attention", "ratio"]
    # The confirmed verdict's interval: the pooled pairs at the gate's alpha (the fresh
    # pairs alone were judged at alpha / 5 at each look).
    assert row[4] == "+10.0%" and row[5].endswith("98% CI")
    # The attribution the failure message shows: each arm's op-type shares, baseline -> now
    # (the padded candidate's MatMuls do more of its work), one code span per op type.
    moves = row[7].split("; ")
    assert all(re.fullmatch(r"`(candidate|reference) \w+: \d+\.\d% -> \d+\.\d%`", m) for m in moves)
    assert any(m.startswith(("`candidate MatMul", "`candidate FusedMatMul")) for m in moves), moves


def test_a_bad_path_is_a_note_and_changes_no_exit_status(suite: pytest.Pytester) -> None:
    (suite.path / "afile").write_text("not a directory")
    result = suite.runpytest(*RUN, "--ortperf", "--ortperf-pr-comment=afile/comment.md")
    result.assert_outcomes(passed=1)
    assert result.ret == 0 and "INTERNALERROR" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*PR comment NOT written to *afile/comment.md: *"])
