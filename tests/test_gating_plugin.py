"""Every gate outcome through real pytest runs, with scripted samples (no timing luck) and
real sessions (the structure is ORT's own optimized graph)."""

import json

import numpy as np
import pytest

from pytest_ortperf.gating.baseline import load_baseline
from pytest_ortperf.gating.gate import BASELINE_RUNS

INNER = """
import json, pathlib
import pytest
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

SCRIPT = json.loads(pathlib.Path(__file__).with_name("script.json").read_text())


def test_attention(ort_session, ort_feeds, ortperf):
    ortperf.engine = engine = ScriptedEngine(interleave=SCRIPT["compare"])
    fusable = SCRIPT.get("fusable", True)
    ref = ort_session(models.attention(fusable=fusable), optimization="disable")
    cand = ort_session(models.attention(fusable=fusable))
    try:
        ortperf.compare(ref, cand, ort_feeds(ref, dims={"B": 1}), name="attention")
    finally:
        print("ENGINE LOG", engine.log)


def test_latency(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=SCRIPT["latency"])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")
"""

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none", "-s")
BASE = 1e-4


def blocks(ratio, n=25, noise=0.0, seed=0):
    """Scripted interleaved samples: reference ~BASE, candidate ratio times slower."""
    rng = np.random.default_rng(seed)
    ref = BASE * np.exp(rng.normal(0, noise, n)) if noise else np.full(n, BASE)
    cand = ref * ratio * (np.exp(rng.normal(0, noise, n)) if noise else 1.0)
    return [ref.tolist(), cand.tolist()]


def latency_samples(scale, n=25):
    return [BASE * scale * (1 + 0.001 * i) for i in range(n)]


def write_script(pytester, *, compare, latency=None, fusable=True):
    script = {
        "compare": compare,
        "latency": latency or [latency_samples(1.0)],
        "fusable": fusable,
    }
    (pytester.path / "script.json").write_text(json.dumps(script))


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(test_perf=INNER)
    return pytester


def baseline_file(pytester):
    return pytester.path / "__ortperf__" / "test_perf.json"


def take_baseline(suite):
    write_script(suite, compare=[blocks(0.9)])
    result = suite.runpytest(*RUN, "--ortperf-update")
    assert result.ret == 0
    return result


def test_no_baseline_is_new_and_passes_unless_strict(suite):
    write_script(suite, compare=[blocks(0.9)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_perf.py::test_attention::attention*ratio*new*"])
    assert not baseline_file(suite).exists()
    strict = suite.runpytest(*RUN, "--ortperf", "--ortperf-strict")
    strict.assert_outcomes(failed=2)
    strict.stdout.fnmatch_lines(["*no baseline yet: run `pytest --ortperf --ortperf-update`*"])


def test_update_writes_a_reviewable_baseline_and_a_rerun_is_ok(suite):
    result = take_baseline(suite)
    result.stdout.fnmatch_lines(
        ["*baseline __ortperf__/test_perf.json updated:*", "*test_attention::attention: new*"]
    )
    data = json.loads(baseline_file(suite).read_text())
    assert data["schema"] == 3
    entry = data["entries"]["test_attention::attention"]
    assert entry["kind"] == "compare" and entry["ratio"] == pytest.approx(0.9)
    # Taken as BASELINE_RUNS runs on fresh sessions, whose spread is the between-run variance; the
    # raw numbers in the samples file beside it.
    assert "block_ratios" not in entry
    raw = load_baseline(baseline_file(suite)).entries["test_attention::attention"]
    assert entry["runs"] == [25] * BASELINE_RUNS and len(raw["block_ratios"]) == 25 * BASELINE_RUNS
    latency = data["entries"]["test_latency::lr"]
    assert latency["mode"] == "normalized" and latency["control"]["model"] == "ortperf-control"
    assert entry["op_histograms"]["candidate"]["FusedMatMul"] == 1
    assert data["entries"]["test_latency::lr"]["kind"] == "latency"
    again = suite.runpytest(*RUN, "--ortperf")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["*test_attention::attention*ratio*ok*"])
    assert (
        "ENGINE LOG [('scaled', 0.3333333333333333), 'interleave', 'interleave', 'interleave']"
        in again.stdout.str()
    )  # three session pairs, no confirmation needed


def test_regression_fails_after_a_confirming_remeasure(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.99)])  # 10% slower than the stored 0.9
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(failed=1, passed=1)
    out = result.stdout.str()
    # three session pairs, then a confirmation on three fresh ones
    assert (
        "ENGINE LOG [('scaled', 0.3333333333333333), 'interleave', 'interleave', 'interleave', ('scaled', 0.3333333333333333), 'interleave', 'interleave', 'interleave']"
        in out
    )
    result.stdout.fnmatch_lines(
        [
            "*ortperf: 'attention' failed its performance gate*",
            f"*FAIL ratio: ratio 0.990 vs baseline 0.900 ({BASELINE_RUNS} runs, {25 * BASELINE_RUNS} blocks): "
            "+10.0% [[]+*%, "
            "+1*.*%[]] 98% CI, threshold 5%*-> regressed*",
            "*structure: structure unchanged*",
            "*(the verdict of a second measurement on fresh session pairs, pooled with the "
            "first where they confirm it; the first alone read ratio +10.0% [[]*[]] -> regressed)*",
            "*--ortperf-update*",
        ]
    )
    assert "INTERNALERROR" not in out
    assert result.ret == 1


def test_unconfirmed_regression_passes(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.99), blocks(0.9)])  # the re-measure disagrees
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    assert result.stdout.str().count("('scaled', 0.3333333333333333)") == 2  # confirmed


def test_a_second_measurement_is_pooled_with_the_first(suite):
    # The first measurement reads +10%, the fresh pairs +4.6%: a significant slowdown
    # that alone reads under the threshold. Pooled (3 pairs at +10%, then the fresh ones
    # extended while the pooled interval holds 5%), it is past it: the test fails.
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.99), blocks(0.9 * 1.046)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAIL ratio: *-> regressed; the first measurement pooled with * fresh session "
            "pairs, which alone read +4.6% [[]*[]]; measured in * over * session pairs",
        ]
    )


def test_improvement_passes_with_a_hint(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.7)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*attention*ratio*improved*",
            "1 improved, 0 without baseline: pytest --ortperf --ortperf-update*",
        ]
    )


def test_inconclusive_passes_unless_strict(suite):
    take_baseline(suite)
    # Median about 8% slower but so noisy that 8 blocks a pair cannot tell, however many
    # pairs: the check extends to its cap (15 pairs, 5 budgets) and stays inconclusive.
    # (Every pair replays the same 8 blocks, so pooling more pairs narrows the interval:
    # with seed 3, 30 pooled pairs read a significant speed-up at the gate's alpha.)
    write_script(suite, compare=[blocks(0.97, n=8, noise=1.0, seed=5)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*attention*ratio*inconclusive*"])
    # Still undecided at the cap, it is measured a second time on fresh pairs (three,
    # extended three at a time while the pooled verdict is undecided, to the same cap),
    # pooled with the first: still inconclusive, it passes...
    extended = "ENGINE LOG [('scaled', 0.3333333333333333)" + ", 'interleave'" * 15
    confirmed = extended + ", ('scaled', 0.3333333333333333)" + ", 'interleave'" * 15 + "]"
    assert confirmed in result.stdout.str()
    # ...unless --ortperf-strict fails it.
    strict = suite.runpytest(*RUN, "--ortperf", "--ortperf-strict")
    strict.assert_outcomes(failed=1, passed=1)
    strict.stdout.fnmatch_lines(["*FAIL ratio:*inconclusive*"])
    assert confirmed in strict.stdout.str()


def test_marker_threshold_relaxes_one_test(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.99)])
    source = (
        (suite.path / "test_perf.py")
        .read_text()
        .replace("def test_attention", "@pytest.mark.ortperf(threshold='20%')\ndef test_attention")
    )
    (suite.path / "test_perf.py").write_text(source)
    suite.runpytest(*RUN, "--ortperf").assert_outcomes(passed=2)


def test_lost_fusion_fails_on_structure(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.9)], fusable=False)
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAIL structure: candidate lost fusion: FusedMatMul 1 -> 0, MatMul 3 -> 4, Transpose 0 -> 1*"
        ]
    )


def test_structure_false_marker_only_reports_it(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.9)], fusable=False)
    source = (
        (suite.path / "test_perf.py")
        .read_text()
        .replace("def test_attention", "@pytest.mark.ortperf(structure=False)\ndef test_attention")
    )
    (suite.path / "test_perf.py").write_text(source)
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*attention*structure*regressed*"])


def test_latency_gated_on_the_same_machine_only(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(1.3)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*FAIL latency:*regressed*"])
    data = json.loads(baseline_file(suite).read_text())
    data["entries"]["test_latency::lr"]["environment"]["cpu_model"] = "Another CPU"
    baseline_file(suite).write_text(json.dumps(data))
    other = suite.runpytest(*RUN, "--ortperf")
    other.assert_outcomes(passed=2)
    other.stdout.fnmatch_lines(["*test_latency::lr*latency*not_comparable*"])


def test_unused_entries_are_reported_and_pruned_by_update(suite):
    take_baseline(suite)
    source = (
        (suite.path / "test_perf.py")
        .read_text()
        .replace("def test_latency", "def test_latency_renamed")
    )
    (suite.path / "test_perf.py").write_text(source)
    result = suite.runpytest(*RUN, "--ortperf")
    result.stdout.fnmatch_lines(
        ["*1 unused baseline entries in __ortperf__/test_perf.json*test_latency::lr*"]
    )
    update = suite.runpytest(*RUN, "--ortperf-update")
    update.stdout.fnmatch_lines(["*test_latency::lr: removed (test no longer exists)*"])
    entries = json.loads(baseline_file(suite).read_text())["entries"]
    assert sorted(entries) == ["test_attention::attention", "test_latency_renamed::lr"]


def test_update_respects_k_and_reports_old_to_new(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.99)], latency=[latency_samples(2.0)])
    result = suite.runpytest(*RUN, "--ortperf-update", "-k", "attention")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*test_attention::attention: ratio 0.900 -> 0.990*"])
    entries = json.loads(baseline_file(suite).read_text())["entries"]
    assert entries["test_latency::lr"]["median"] == pytest.approx(BASE * 1.012)  # untouched


def test_corrupt_baseline_fails_clearly_and_is_kept(suite):
    take_baseline(suite)
    text = baseline_file(suite).read_text().replace('"schema": 3', '"schema": 3,,', 1)
    baseline_file(suite).write_text(text)
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*ortperf baseline unusable: *test_perf.json:*:*invalid JSON*"])
    assert "INTERNALERROR" not in result.stdout.str()
    assert baseline_file(suite).read_text() == text  # never overwritten without --ortperf-update


def test_newer_schema_asks_for_an_upgrade(suite):
    take_baseline(suite)
    data = json.loads(baseline_file(suite).read_text())
    data["schema"] = 99
    baseline_file(suite).write_text(json.dumps(data))
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*newer pytest-ortperf (schema 99 > 3); upgrade the plugin*"])


def test_update_never_fails_for_a_regression(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(1.5)], fusable=False)
    result = suite.runpytest(*RUN, "--ortperf-update")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_attention::attention: ratio 0.900 -> 1.500*"])


def test_all_measurements_run_before_the_gate_fails(suite):
    # Both gated measurements of one test regress: the test fails once, with both messages.
    source = (suite.path / "test_perf.py").read_text() + (
        "\n\ndef test_both(ort_session, ort_feeds, ortperf):\n"
        "    test_attention(ort_session, ort_feeds, ortperf)\n"
        "    test_latency(ort_session, ort_feeds, ortperf)\n"
    )
    (suite.path / "test_perf.py").write_text(source)
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.99)], latency=[latency_samples(1.5)])
    result = suite.runpytest(*RUN, "--ortperf", "-k", "test_both")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    assert "ortperf: 'attention' failed its performance gate" in out
    assert "ortperf: 'lr' failed its performance gate" in out
    # The test fails on the compare already: the latency cannot change that, so it takes
    # a first measurement only (no confirmation), and says why.
    result.stdout.fnmatch_lines(
        ["*FAIL latency: *-> regressed; a first measurement only (a quarter of the budget), "
         "not measured further: the test already fails on 'attention' ratio*"]
    )  # fmt: skip


def test_a_name_used_twice_in_one_test_is_an_error(pytester):
    pytester.makepyfile(
        """
        from pytest_ortperf import models

        def test_twice(ort_session, ort_feeds, ortperf):
            s = ort_session(models.linear_regression())
            feeds = ort_feeds(s, dims={"N": 1})
            ortperf.latency(s, feeds)
            ortperf.latency(s, feeds, api="iobinding")
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*measurement name 'linear_regression' is already used in this test*name=*"]
    )


def test_baseline_through_another_api_is_not_comparable(suite):
    take_baseline(suite)
    source = (
        (suite.path / "test_perf.py").read_text().replace('name="lr")', 'name="lr", api="run_c")')
    )
    (suite.path / "test_perf.py").write_text(source)
    write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(3.0)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_latency::lr*latency*not_comparable*"])


def test_bad_alpha_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\nortperf_alpha = 0.7\n")
    result = pytester.runpytest("--ortperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini ortperf_alpha must be below 0.5, got '0.7'*"])


def test_gated_measurements_take_enough_blocks_to_be_significant(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.ortperf(budget=0.001)
        def test_blocks(ortperf):
            assert ortperf.engine.config.min_blocks == 9  # alpha 0.01
        """
    )
    pytester.runpytest(*RUN, "--ortperf").assert_outcomes(passed=1)


def test_latency_threshold_is_separate_from_the_ratio_threshold(suite):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(1.3)])
    suite.makeini("[pytest]\nortperf_latency_threshold = 50%\n")
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_latency::lr*latency*ok*"])


# --------------------------------------------------------------------------- fingerprints

OTHER = {
    "cpu_model": "Another CPU",
    "isa": "avx2 fma sse4_2",
    "ort_version": "1.0.0",
    "ort_build": "onnxruntime-gpu==1.0.0",
}


@pytest.mark.parametrize("key", sorted(OTHER))
def test_a_ratio_baseline_from_another_machine_or_ort_is_not_comparable(suite, key):
    take_baseline(suite)
    write_script(suite, compare=[blocks(0.99)])  # 10% slower: would fail if compared
    data = json.loads(baseline_file(suite).read_text())
    entry = data["entries"]["test_attention::attention"]
    assert entry["environment"][key] is not None  # recorded when the baseline was taken
    entry["environment"][key] = OTHER[key]
    baseline_file(suite).write_text(json.dumps(data))
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_attention::attention*ratio*not_comparable*"])
    # The verdict names the key, and an ini opt-in gates across it on purpose.
    (suite.path / "pytest.ini").write_text(
        f"[pytest]\nortperf_fingerprint_ignore = {key}\nortperf_json = out.json\n"
    )
    across = suite.runpytest(*RUN, "--ortperf")
    across.assert_outcomes(failed=1, passed=1)
    across.stdout.fnmatch_lines(["*FAIL ratio:*-> regressed*"])
    first = json.loads((suite.path / "out.json").read_text())
    assert first["results"]
    (suite.path / "pytest.ini").write_text("[pytest]\nortperf_json = out.json\n")
    suite.runpytest(*RUN, "--ortperf").assert_outcomes(passed=2)
    report = json.loads((suite.path / "out.json").read_text())
    (ratio,) = [
        v for r in report["results"] for v in r.get("verdicts", ()) if v["metric"] == "ratio"
    ]
    assert ratio["outcome"] == "not_comparable" and f"{key}:" in ratio["message"]


@pytest.mark.parametrize(("section", "key", "value"), [
    ("sessions", "threads", 4), ("sessions", "spinning", True),
    ("sessions", "optimization", "basic"), ("sessions", "providers", ["OtherProvider"]),
])  # fmt: skip
def test_session_settings_are_fingerprint_keys(suite, section, key, value):
    take_baseline(suite)
    data = json.loads(baseline_file(suite).read_text())
    data["entries"]["test_attention::attention"][section]["candidate"][key] = value
    baseline_file(suite).write_text(json.dumps(data))
    write_script(suite, compare=[blocks(0.99)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_attention::attention*ratio*not_comparable*"])


def test_unknown_fingerprint_key_in_the_ini_is_a_usage_error(suite):
    (suite.path / "pytest.ini").write_text("[pytest]\nortperf_fingerprint_ignore = cpu_modle\n")
    result = suite.runpytest(*RUN, "--ortperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ortperf_fingerprint_ignore*unknown fingerprint key 'cpu_modle'*"]
    )


# --------------------------------------------------------------------------- latency modes


def test_normalized_latency_is_judged_against_its_control(suite):
    take_baseline(suite)
    # Target 30% slower, the control (scripted at a constant) unchanged: regressed.
    write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(1.3)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*FAIL latency: latency *normalized by its control*regressed*"])


def test_a_slower_control_makes_a_normalized_regression_unstable(suite):
    take_baseline(suite)
    # The baseline's control ran at 1e-4 s; make it look 30% faster then, i.e. the
    # machine 30% slower now: the target's +8% is then no trustworthy regression.
    data = json.loads(baseline_file(suite).read_text())
    data["entries"]["test_latency::lr"]["control"]["median"] = 0.77e-4
    baseline_file(suite).write_text(json.dumps(data))
    write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(1.08)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_latency::lr*latency*unstable*",
            "unstable test_perf.py::test_latency::lr latency: latency *-> unstable*downgraded "
            "from regressed because the control workload itself ran +29.9%*re-run on a "
            "quieter runner*",
        ]
    )
    strict = suite.runpytest(*RUN, "--ortperf", "--ortperf-strict")
    strict.stdout.fnmatch_lines(["*FAIL latency:*control workload itself ran +29.9%*"])


def test_a_slower_control_never_mutes_a_gross_regression(suite):
    take_baseline(suite)
    data = json.loads(baseline_file(suite).read_text())
    data["entries"]["test_latency::lr"]["control"]["median"] = 0.77e-4
    baseline_file(suite).write_text(json.dumps(data))
    # +30%: the interval's lower bound lies past twice the threshold.
    write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(1.3)])
    result = suite.runpytest(*RUN, "--ortperf")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*FAIL latency:*-> regressed*not downgraded although the control workload itself "
         "ran +29.9%*past 2x the threshold*"]
    )  # fmt: skip


def test_absolute_latency_is_gated_against_earlier_runs_only(suite):
    (suite.path / "pytest.ini").write_text(
        "[pytest]\nortperf_latency = absolute\nortperf_store = results.sqlite\n"
    )
    write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(1.0)])
    suite.runpytest("-p", "no:cacheprovider", "-s", "--ortperf-update").assert_outcomes(passed=2)
    for i in range(4):
        write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(1.0 + 0.004 * i)])
        run = suite.runpytest("-p", "no:cacheprovider", "-s", "--ortperf", "--ortperf-json=o.json")
        run.assert_outcomes(passed=2)
        report = json.loads((suite.path / "o.json").read_text())
        (verdict,) = [
            v for r in report["results"] for v in r.get("verdicts", ()) if v["metric"] == "latency"
        ]
        assert verdict["outcome"] == "not_comparable"
        assert f"not gated: {i + 1} of 5 earlier runs" in verdict["message"]
    # Five earlier runs on this fingerprint: now a 30% slower median fails.
    write_script(suite, compare=[blocks(0.9)], latency=[latency_samples(1.3)])
    slow = suite.runpytest("-p", "no:cacheprovider", "-s", "--ortperf")
    slow.assert_outcomes(failed=1, passed=1)
    slow.stdout.fnmatch_lines(["*FAIL latency: latency *vs earlier runs*5 runs -> regressed*"])
