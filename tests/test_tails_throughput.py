"""Single-call tails (``ortperf.per_call``, the tail rule) and throughput under concurrency
(``ortperf.throughput``): the timing code on real sessions and on a fake clock, the rule on
scripted samples and seeded simulations, the records through the plugin into the store
and every report."""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import threading
from collections.abc import Callable

import numpy as np
import onnx
import pytest

from pytest_ortperf.gating.tails import MIN_ROUNDS, judge_tail, quantile_label, tail_ratio
from pytest_ortperf.measuring.calls import make_call
from pytest_ortperf.measuring.engine import group_sizes
from pytest_ortperf.measuring.feeds import input_specs, make_feeds
from pytest_ortperf.measuring.percall import PerCallConfig, measure_per_call, timer_cost_ns
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.measuring.throughput import ThroughputError, measure_levels, run_level
from pytest_ortperf.models import tiny_add
from pytest_ortperf.reports import charts
from pytest_ortperf.reports.html import ReportInput, build_html
from pytest_ortperf.reports.markdown import markdown_summary
from pytest_ortperf.reports.terminal import compact_property, summary_lines
from pytest_ortperf.results import (
    USER_PROPERTY,
    Outcome,
    PerCallResult,
    Record,
    ThroughputLevel,
    ThroughputResult,
    record_from_dict,
)


def session_call(model: onnx.ModelProto, api: str = "run") -> Callable[[], object]:
    session = OrtSession.create(model)
    return make_call(session, make_feeds(input_specs(session.sess)), api)[0]


# ------------------------------------------------------------------------------ timing


class FakeClock:
    """A clock that advances ``step`` ns per read; :meth:`call` costs ``cost`` ns."""

    def __init__(self, step: int, cost: int) -> None:
        self.now, self.step, self.cost = 0, step, cost

    def __call__(self) -> int:
        self.now += self.step
        return self.now

    def call(self) -> None:
        self.now += self.cost


def test_timer_cost_is_subtracted_exactly_on_a_fake_clock() -> None:
    clock = FakeClock(step=50, cost=1000)
    config = PerCallConfig(budget_s=0.002, min_calls=100, max_calls=400, block_s=1e-4)
    (samples,) = measure_per_call([clock.call], config=config, clock=clock)
    assert samples.timer_ns == 50  # an empty timing spans one step of the clock
    assert set(samples.calls_ns) == {1050}  # each single call: its cost plus one step
    assert samples.preempted == 0 and samples.watched
    result = PerCallResult(
        test="t", name="fake", api="call", calls=tuple(x * 1e-9 for x in samples.calls_ns),
        timer_cost=samples.timer_ns * 1e-9, calls_per_round=samples.calls_per_round,
        blocks=samples.blocks, calls_per_block=samples.calls_per_block, measured=True,
    )  # fmt: skip
    assert result.p50 == pytest.approx(1e-6)
    assert result.p999 == pytest.approx(1e-6)
    # A block's sample is its median group's time per call; each group spans one clock step.
    sizes = group_sizes(samples.calls_per_block)
    assert len(sizes) > 1
    group = statistics.median((size * 1000 + 50) / size for size in sizes)
    assert result.block_median == pytest.approx(group * 1e-9)
    assert result.n >= 400 and result.n % samples.calls_per_round == 0
    assert len(result.rounds()) == len(samples.blocks)


def test_per_call_times_a_real_session() -> None:
    call = session_call(tiny_add())
    config = PerCallConfig(budget_s=0.02, min_calls=300, max_calls=2000)
    (samples,) = measure_per_call([call], config=config)
    assert samples.timer_ns > 0
    # at least two clean rounds; no more than one round past max_calls
    assert 2 * samples.calls_per_round <= len(samples.calls_ns) <= 2000 + samples.calls_per_round
    assert len(samples.calls_ns) == len(samples.blocks) * samples.calls_per_round
    assert all(x > 0 for x in samples.calls_ns) and all(b > 0 for b in samples.blocks)
    assert timer_cost_ns() > 0
    with pytest.raises(ValueError, match="max_calls"):
        PerCallConfig(min_calls=10, max_calls=5)


def test_two_arms_are_measured_in_paired_rounds() -> None:
    calls = [session_call(tiny_add(16)), session_call(tiny_add(64))]
    config = PerCallConfig(budget_s=0.02, min_calls=200, max_calls=1000)
    ref, cand = measure_per_call(calls, config=config)
    assert len(ref.blocks) == len(cand.blocks)  # one block of each per kept round
    assert len(ref.calls_ns) // ref.calls_per_round == len(cand.calls_ns) // cand.calls_per_round


def test_levels_of_threads_call_a_shared_session() -> None:
    session = OrtSession.create(tiny_add())
    feeds = make_feeds(input_specs(session.sess))
    before = threading.active_count()
    runs = measure_levels(
        lambda n: [make_call(session, feeds, "run")[0] for _ in range(n)],
        [1, 2, 4],
        seconds=0.06,
        rounds=2,
    )
    assert threading.active_count() == before  # every thread joined
    for n, windows in runs.items():
        assert len(windows) == 2
        for w in windows:
            assert w.concurrency == n and w.calls == len(w.latencies_ns) > 0
            assert w.seconds > 0


def test_a_failing_call_in_a_thread_is_a_clear_error() -> None:
    def broken() -> None:
        raise RuntimeError("model exploded")

    with pytest.raises(ThroughputError, match=r"thread 0 of 2 raised RuntimeError: model exploded"):
        run_level([broken, broken], 0.01)


# ------------------------------------------------------------------------------ the tail rule


def rounds(
    rng: np.random.Generator,
    n_rounds: int = 40,
    per_round: int = 250,
    *,
    tail_share: float = 0.02,
    tail_factor: float = 3.0,
    round_sd: float = 0.03,
) -> list[np.ndarray]:
    """Simulated single calls: lognormal around 10 us, a ``tail_share`` of slow calls
    ``tail_factor`` times slower, and a per-round scale factor (rounds depend on the
    machine's state, calls within a round share it)."""
    out = []
    for _ in range(n_rounds):
        scale = math.exp(rng.normal(0, round_sd))
        body = rng.lognormal(math.log(10e-6), 0.05, per_round) * scale
        slow = rng.random(per_round) < tail_share
        out.append(np.where(slow, body * tail_factor, body))
    return out


def paired(seed: int, cand_tail: float, **kw: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    ref = rounds(rng, **kw)  # type: ignore[arg-type]
    cand = rounds(rng, tail_factor=cand_tail, **kw)  # type: ignore[arg-type]
    return ref, cand


def test_a_fatter_tail_is_regressed_though_the_median_holds() -> None:
    ref, cand = paired(1, cand_tail=4.5)
    assert np.median(np.concatenate(cand)) / np.median(np.concatenate(ref)) < 1.02
    verdict = judge_tail(ref, cand, 0.99, threshold=0.10, resamples=300)
    assert verdict.outcome is Outcome.REGRESSED, verdict.message
    assert verdict.metric == "p99" and verdict.low > 0.10 and verdict.current > 1.3
    assert "paired round bootstrap" in verdict.message


def test_a_thinner_tail_is_improved_and_equal_tails_are_ok() -> None:
    ref, cand = paired(2, cand_tail=2.0)
    assert judge_tail(ref, cand, resamples=300).outcome is Outcome.IMPROVED
    ref, cand = paired(3, cand_tail=3.0)
    verdict = judge_tail(ref, cand, resamples=300)
    assert verdict.outcome is Outcome.OK, verdict.message
    assert verdict.low < 0 < verdict.high


def test_a_baseline_ratio_moves_what_counts_as_no_change() -> None:
    ref, cand = paired(4, cand_tail=4.5)
    ratio = tail_ratio(ref, cand, 0.99, resamples=300).ratio
    verdict = judge_tail(ref, cand, expected=ratio, resamples=300)
    assert verdict.outcome is Outcome.OK and abs(verdict.change) < 1e-12


def test_too_little_data_is_inconclusive_and_says_why() -> None:
    ref, cand = paired(5, cand_tail=4.5, n_rounds=MIN_ROUNDS - 1)
    verdict = judge_tail(ref, cand)
    assert verdict.outcome is Outcome.INCONCLUSIVE and "rounds" in verdict.message
    ref, cand = paired(6, cand_tail=4.5, n_rounds=20, per_round=20)
    verdict = judge_tail(ref, cand, 0.999)
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "beyond the p99.9" in verdict.message and "10000 calls" in verdict.message


def test_a_noisy_run_is_inconclusive_not_regressed() -> None:
    ref, cand = paired(7, cand_tail=3.0, round_sd=0.6, n_rounds=12, per_round=100)
    verdict = judge_tail(ref, cand, resamples=300)
    assert verdict.outcome is Outcome.INCONCLUSIVE, verdict.message


def test_false_alarms_stay_rare_in_seeded_aa_simulations() -> None:
    """A/A: both arms from one distribution with dependent rounds; at alpha 0.01 and a
    10% threshold, a regressed verdict is a false alarm."""
    outcomes = [
        judge_tail(*paired(100 + s, cand_tail=3.0, n_rounds=20, per_round=200), resamples=200)
        for s in range(40)
    ]
    regressed = sum(v.outcome is Outcome.REGRESSED for v in outcomes)
    assert regressed <= 1
    assert sum(v.outcome is Outcome.OK for v in outcomes) >= 30


def test_the_rule_rejects_bad_input_by_name() -> None:
    ref, cand = paired(8, cand_tail=3.0)
    with pytest.raises(ValueError, match="paired rounds"):
        judge_tail(ref, cand[:-1])
    with pytest.raises(ValueError, match="quantile q"):
        judge_tail(ref, cand, 1.5)
    with pytest.raises(ValueError, match="candidate has a negative"):
        judge_tail(ref, [*cand[:-1], np.array([-1.0])])
    with pytest.raises(ValueError, match="threshold"):
        judge_tail(ref, cand, threshold=0)
    assert quantile_label(0.999) == "p99.9"


# ------------------------------------------------------------------------------ records


def per_call_record(name: str = "tail <b>", n: int = 2000) -> PerCallResult:
    rng = np.random.default_rng(0)
    calls = tuple(float(x) for x in rng.lognormal(math.log(10e-6), 0.2, n))
    return PerCallResult(
        test="t.py::test_x", name=name, api="run", calls=calls, timer_cost=7e-8,
        calls_per_round=100, blocks=tuple([10.5e-6] * (n // 100)), calls_per_block=100,
        measured=True, watched=True,
    )  # fmt: skip


def throughput_record(name: str = "tp <i>") -> ThroughputResult:
    levels = tuple(
        ThroughputLevel(
            n,
            1000 * min(n, 2),
            1.0,
            (900.0 * min(n, 2), 1100.0 * min(n, 2)),
            1e-3 * n / min(n, 2),
            1.1e-3,
            2e-3,
            1e-3,
        )
        for n in (1, 2, 4)
    )
    return ThroughputResult(
        test="t.py::test_y", name=name, api="run", levels=levels, sessions="shared",
        intra_op_threads=1, inter_op_threads=1, spinning=False, cores=2, measured=True,
    )  # fmt: skip


def test_records_round_trip_and_carry_their_figures() -> None:
    tail = per_call_record()
    again = record_from_dict(json.loads(json.dumps(tail.to_dict())))
    assert again == tail
    data = tail.to_dict()
    assert data["quantiles"]["p99"] == pytest.approx(tail.p99)
    assert data["quantiles"]["p99.9"] is None  # 2000 calls leave 2 beyond it
    assert tail.corrected[0] == pytest.approx(tail.calls[0] - 7e-8)
    tp = throughput_record()
    assert record_from_dict(json.loads(json.dumps(tp.to_dict()))) == tp
    assert tp.scaling == {1: 1.0, 2: 2.0, 4: 2.0}
    assert tp.level(2).calls_per_s == 2000.0
    assert tp.busy_threads(4) == 4 and tp.busy_threads(1) == 1
    with pytest.raises(KeyError, match="levels: 1, 2, 4"):
        tp.level(3)
    with pytest.raises(ValueError, match="no calls"):
        PerCallResult("t", "empty", "run", (), 0.0, 1, (), 1, True)


def test_reports_show_histograms_curves_and_tables_escaped() -> None:
    records: list[Record] = [per_call_record(), throughput_record()]
    page = build_html(ReportInput(records=records), charts_enabled=charts.available())
    assert "Single-call latency" in page and "Throughput under concurrency" in page
    assert "tail &lt;b&gt;" in page and "tp &lt;i&gt;" in page and "<b>" not in page
    assert "2.00k/s" in page and "intra-op 1" in page
    if charts.available():
        assert page.count("data:image/png;base64") >= 2
    md = markdown_summary(records)
    assert "### Single calls (timer cost subtracted)" in md
    assert "### Throughput under concurrency" in md and "tail \\<b\\>" in md
    lines = "\n".join(summary_lines(records))
    assert "single calls" in lines and "throughput (calls/s)" in lines and "2.00k/s" in lines
    line = compact_property(USER_PROPERTY, records[0].to_dict())
    assert isinstance(line, str) and "p99" in line


def test_a_histogram_draws_on_a_log_axis() -> None:
    pytest.importorskip("matplotlib")
    tail = per_call_record()
    png = charts.latency_histogram(charts.Histogram("x", tail.corrected, (("p99", tail.p99),)))
    assert png.startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="no positive call time"):
        charts.latency_histogram(charts.Histogram("empty", (0.0,)))


# ------------------------------------------------------------------------------ the plugin

INNER = """
from pytest_ortperf.models import tiny_add


def test_tails(ort_session, ort_feeds, ortperf):
    s = ort_session(tiny_add(16))
    feeds = ort_feeds(s)
    r = ortperf.per_call(s, feeds, name="tail", min_calls=200, max_calls=1000)
    assert r.n >= 1 and r.timer_cost >= 0
    ref = ort_session(tiny_add(16))
    c = ortperf.per_call(s, feeds, reference=ref, name="tail pair", min_calls=200,
                         max_calls=1000, threshold=10.0)
    assert c.reference is not None


def test_throughput(ort_session, ort_feeds, ortperf):
    s = ort_session(tiny_add(16))
    r = ortperf.throughput(s, ort_feeds(s), concurrency=[1, 2], seconds=0.04, rounds=2,
                           name="tp")
    assert [x.concurrency for x in r.levels] == [1, 2]
    r = ortperf.throughput(s, ort_feeds(s), concurrency=[2], sessions="per_thread",
                           seconds=0.02, rounds=1, name="tp each")
    assert r.sessions == "per_thread" and r.intra_op_threads == 1
"""


def test_plugin_records_stores_and_reports_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=INNER)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--ortperf", "--ortperf-budget=0.02",
        "--ortperf-store=results.sqlite", "--ortperf-json=out.json",
        "--ortperf-report=report.html", "--ortperf-markdown=summary.md",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*single calls*p99*", "*throughput (calls/s)*1 thr*2 thr*"])
    doc = json.loads((pytester.path / "out.json").read_text())
    by_name = {r["name"]: r for r in doc["results"]}
    assert by_name["tail"]["kind"] == "per_call" and by_name["tail"]["quantiles"]["p50"] > 0
    pair = by_name["tail pair"]
    assert pair["reference"]["kind"] == "per_call"
    assert [v["metric"] for v in pair["verdicts"]] == ["p99"]
    assert pair["verdicts"][0]["outcome"] in {"ok", "improved", "inconclusive"}
    assert [x["concurrency"] for x in by_name["tp"]["levels"]] == [1, 2]
    assert by_name["tp each"]["sessions"] == "per_thread"
    page = (pytester.path / "report.html").read_text()
    assert "Single-call latency" in page and "Throughput under concurrency" in page
    md = (pytester.path / "summary.md").read_text()
    assert "### Single calls" in md and "### Throughput under concurrency" in md
    with sqlite3.connect(pytester.path / "results.sqlite") as db:
        rows = db.execute("SELECT kind, name, extra FROM measurements ORDER BY id").fetchall()
    kinds = {(kind, name) for kind, name, _ in rows}
    assert {("per_call", "tail"), ("throughput", "tp")} <= kinds
    # A stored row holds the record's to_dict less its head columns: enough to rebuild it.
    for kind, name, extra in rows:
        head = {"kind": kind, "test": "test_perf.py::x", "name": name, "api": "run"}
        rebuilt = record_from_dict({**json.loads(extra), **head, "measured": True})
        assert rebuilt.kind == kind and rebuilt.name == name


FAT_TAIL = """
from pytest_ortperf import models


def test_fat_tail(ort_session, ort_feeds, ortperf):
    ref = ort_session(models.deep_chain(layers=1))
    cand = ort_session(models.deep_chain(layers=200))
    ortperf.per_call(cand, ort_feeds(ref, dims={"N": 1}), reference=ref, name="deep",
                     q=0.9, min_calls=100, max_calls=10_000)
"""


def test_a_regressed_tail_fails_the_test_with_the_rule_s_message(
    pytester: pytest.Pytester,
) -> None:
    """200 layers against 1: a p90 ratio of tens, on any machine (the verdict logic itself
    is tested on scripted samples above). The fewest calls p90 allows, so short rounds, and
    a budget of 1 s: beside the test suite and two busy neighbours, 300 calls in 0.3 s left
    5 of 40 rounds unpreempted, short of the rule's 10, and the verdict inconclusive."""
    pytester.makepyfile(test_fat=FAT_TAIL)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--ortperf", "--ortperf-budget=1", "--ortperf-store=none"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*'deep' failed its tail rule*", "*FAIL p90: p90 ratio candidate/reference*regressed*"]
    )


def test_plain_pytest_runs_each_once_and_records_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=INNER)
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf-json=out.json")
    result.assert_outcomes(passed=2)
    assert not (pytester.path / "out.json").exists() or not json.loads(
        (pytester.path / "out.json").read_text()
    ).get("results")


BAD = """
import pytest
from pytest_ortperf import models


def test_bad(ort_session, ort_feeds, ortperf):
    s = ort_session(models.linear_regression())
    feeds = ort_feeds(s, dims={"N": 1})
    with pytest.raises(ValueError, match="sessions='pool' is not one of"):
        ortperf.throughput(s, feeds, sessions="pool")
    with pytest.raises(ValueError, match="repeated levels"):
        ortperf.throughput(s, feeds, concurrency=[1, 1])
    with pytest.raises(ValueError, match="concurrency level 0 must be a whole number"):
        ortperf.throughput(s, feeds, concurrency=[0])
    ortperf.per_call(s, feeds, name="x", min_calls=10, max_calls=10)
    with pytest.raises(ValueError, match="'x' is already used"):
        ortperf.per_call(s, feeds, name="x")
"""


def test_bad_arguments_are_clear_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad=BAD)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
