"""The HTML report's page layout: the headline says failures apart from metrics that need
attention, a legend explains every outcome shown, long tables are shown in full (collapsible,
never in a fixed-height scroll box), print CSS prints every row, and memory is in MiB."""

from __future__ import annotations

import re
from typing import Any

from ortperf_store_factories import comparison, latency, memory

from pytest_ortperf.gating.gate import BASELINE_RUNS
from pytest_ortperf.reports.html import OUTCOME_LEGEND, ReportInput, build_html, headline
from pytest_ortperf.reports.html_base import COLLAPSE_ROWS
from pytest_ortperf.results import Judgement, Outcome
from pytest_ortperf.units import format_bytes

PRINT = re.compile(r"@media print\{(.*?)\n\}", re.S)


def _judgement(test: str, name: str, outcome: str) -> Judgement:
    verdict: dict[str, Any] = {
        "metric": "ratio",
        "outcome": outcome,
        "baseline": 0.8,
        "current": 0.9,
        "change": 0.125,
        "low": 0.1,
        "high": 0.15,
        "threshold": 0.05,
        "alpha": 0.01,
        "p_value": 1e-4,
        "n": 10,
        "message": f"ratio -> {outcome}",
    }
    return Judgement.from_dict({"test": test, "name": name, "verdicts": [verdict]})


def _mixed() -> ReportInput:
    outcomes = ["regressed", "inconclusive", "unstable", "ok"]
    tests = [f"t.py::test_{o}" for o in outcomes]
    records = [comparison(t) for t in tests] + [latency("t.py::test_plain")]
    judgements = [_judgement(t, "fused", o) for t, o in zip(tests, outcomes, strict=True)]
    return ReportInput(records, judgements)


def _page(data: ReportInput) -> str:
    return build_html(data, charts_enabled=False).replace("<wbr>", "")


def test_headline_says_failures_apart_from_metrics_that_pass() -> None:
    page = _page(_mixed())
    assert (
        "1 metric(s) failed the gate (regressed); 2 metric(s) need attention but passed "
        "(inconclusive/unstable; these fail only with --ortperf-strict)"
    ) in page
    assert 'class="status bad"' in page
    assert "regressed or inconclusive" not in page


def test_headline_tones() -> None:
    text, tone = headline({Outcome.INCONCLUSIVE: 3, Outcome.OK: 2})
    assert tone == "warn" and text.startswith("3 metric(s) need attention but passed")
    assert "failed" not in text
    text, tone = headline({Outcome.REGRESSED: 3})
    assert (text, tone) == ("3 metric(s) failed the gate (regressed)", "bad")
    assert headline({Outcome.OK: 1, Outcome.RECORDED: 4})[1] == "good"


def test_legend_explains_every_outcome_shown() -> None:
    page = _page(_mixed())
    legend = re.search(r'<dl class="legend">(.*?)</dl>', page, re.S)
    assert legend is not None
    for outcome in ("regressed", "inconclusive", "unstable", "ok", "recorded"):
        assert f'<span class="badge {outcome}">' in legend.group(1)
    assert "improved" not in legend.group(1)  # only the outcomes present
    assert "measured, not gated" in legend.group(1)
    assert set(OUTCOME_LEGEND) == set(Outcome)


def test_long_tables_are_shown_in_full_not_in_a_scroll_box() -> None:
    n = COLLAPSE_ROWS * 2
    records = [latency(f"t.py::test_{i:02d}") for i in range(n)]
    page = _page(ReportInput(records))
    screen_css = PRINT.sub("", page)
    assert "max-height" not in screen_css and 'class="scroll"' not in page
    assert f'<details open class="rows"><summary>{n} rows</summary>' in page
    assert all(f"t.py::test_{i:02d}" in page for i in range(n))
    # Every <details> starts open: a printout or screenshot shows each table's rows.
    assert re.findall(r"<details(?![^>]*\bopen\b)[^>]*>", page) == []


def test_print_css_prints_every_row() -> None:
    page = _page(_mixed())
    found = PRINT.search(page)
    assert found is not None
    rules = found.group(1)
    assert "max-height:none" in rules and "overflow:visible" in rules
    assert "details::details-content" in rules
    assert "beforeprint" in page  # closed sections open for printing


def test_memory_in_mib_everywhere() -> None:
    size = 25276502016
    data = ReportInput(
        [memory("t.py::test_mem")],
        environment={"memory_bytes": size, "cpu_model": "X", "weird_bytes": "n/a"},
    )
    page = _page(data)
    assert str(size) not in page
    assert format_bytes(size) in page and format_bytes(size) == "24105.6 MiB"
    assert "<dt>memory</dt><dd>24105.6 MiB</dd>" in page  # header
    assert "MiB peak" in page  # the memory measurement's row
    assert "n/a" in page  # not a number: shown as it is


def test_hostile_environment_size_is_escaped() -> None:
    page = _page(ReportInput([latency("t.py::test_a")], environment={"<i>_bytes": "<script>"}))
    assert "<td><script>" not in page and "<td><i>" not in page
    assert "&lt;script&gt;" in page and "&lt;i&gt;_bytes" in page


# --------------------------------------------------------------------------- baseline samples


def test_a_latency_with_a_baseline_draws_the_baseline_beside_it() -> None:
    from pytest_ortperf.reports import charts
    from pytest_ortperf.reports.html_sections import _boxes_of

    record = latency("t.py::t", "lr")
    boxes = _boxes_of([record], {("t.py::t", "lr"): [1.1e-3] * 5})
    assert [(b.label, b.group) for b in boxes] == [
        ("lr (run)", 0),
        ("lr baseline", charts.BASELINE_GROUP),
    ]
    assert _boxes_of([record], {}) == boxes[:1]
    assert charts.box_plot(boxes).startswith(b"\x89PNG")


INNER = """
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

def test_latency(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[[1e-4 * (1 + 0.001 * i) for i in range(20)]])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")
"""


def test_the_run_passes_the_baselines_samples_to_the_report(pytester, monkeypatch) -> None:
    from pytest_ortperf.reports import writer

    seen: list[dict[Any, Any]] = []
    original = writer.report_input_from_run

    def spy(results: Any) -> Any:
        seen.append(dict(results.baseline_samples))
        return original(results)

    monkeypatch.setattr(writer, "report_input_from_run", spy)
    pytester.makepyfile(test_perf=INNER)
    run = ("-p", "no:cacheprovider", "--ortperf-store=none", "--ortperf-report=r.html")
    pytester.runpytest(*run, "--ortperf-update").assert_outcomes(passed=1)
    assert seen == [{}]  # an update replaces its entries: nothing to draw beside
    pytester.runpytest(*run, "--ortperf").assert_outcomes(passed=1)
    ((key, samples),) = seen[1].items()
    # 20 blocks in each of the baseline's runs
    assert key == ("test_perf.py::test_latency", "lr") and len(samples) == 20 * BASELINE_RUNS
