"""Profiles and memory through the plugin: the fixture, per-op summaries in the store,
op shares in baselines and the attribution of a regression."""

import json

from pytest_ortperf.store.read import read_profiles, read_results

SUITE = """
from pytest_ortperf import models


def test_profiled(ort_session, ort_feeds, ort_profiler, ortperf):
    s = ort_session(models.attention())
    feeds = ort_feeds(s, dims={"B": 2})
    profile = ort_profiler(s, feeds, runs=4, warmup=2)
    assert profile.n_runs == (4 if MEASURED else 1)
    assert set(profile.by_op()["op_type"]) == {"FusedMatMul", "MatMul", "Softmax"}
    ortperf.latency(s, feeds, name="att")
    ortperf.profile(s, feeds, name="att", runs=3)


def test_memory(ort_session, ort_feeds, ortperf):
    s = ort_session(models.kmeans())
    result = ortperf.memory(s, ort_feeds(s, dims={"N": 64}), name="km", runs=3)
    assert len(result.peak_bytes) == (3 if MEASURED else 1)
    assert min(result.peak_bytes) > 0
"""


# pytest-benchmark (installed with the benchmarks extra) creates .benchmarks/ in the
# working directory of any run it is loaded in: left out, to see what ortperf leaves.
NO_OTHER_FILES = ("-p", "no:cacheprovider", "-p", "no:benchmark")


def test_profiles_and_memory_in_smoke_mode(pytester):
    pytester.makepyfile(test_suite="MEASURED = False\n" + SUITE)
    pytester.runpytest(*NO_OTHER_FILES).assert_outcomes(passed=2)
    assert sorted(p.name for p in pytester.path.iterdir()) == ["test_suite.py"]


def test_profiles_and_memory_are_stored(pytester):
    pytester.makepyfile(test_suite="MEASURED = True\n" + SUITE)
    result = pytester.runpytest(*NO_OTHER_FILES, "--ortperf", "--ortperf-budget=0.05")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["memory*api*peak RSS*method", "test_suite.py::test_memory::km*MiB*"]
    )
    store = pytester.path / ".ortperf" / "results.sqlite"
    ops = read_profiles(store)
    assert set(ops["op_type"]) == {"FusedMatMul", "MatMul", "Softmax"}
    frame = read_results(store)
    assert sorted(frame["kind"]) == ["latency", "memory"]
    # Nothing but the store is left behind: no profile JSON in the user's directory.
    assert sorted(p.name for p in pytester.path.iterdir()) == [".ortperf", "test_suite.py"]


ATTRIBUTION = """
import json, pathlib
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

SCRIPT = json.loads(pathlib.Path(__file__).with_name("script.json").read_text())


def test_attention(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(interleave=[SCRIPT])
    ref = ort_session(models.attention(), optimization="disable")
    cand = ort_session(models.attention(zero_pad=SCRIPT and 0))
    ortperf.compare(ref, cand, ort_feeds(ref, dims={"B": 2}), name="attention")
"""


def test_update_stores_op_shares_and_a_regression_names_the_op_types(pytester):
    pytester.makepyfile(test_perf=ATTRIBUTION)
    script = pytester.path / "script.json"
    script.write_text(json.dumps([[1e-4] * 20, [0.9e-4] * 20]))
    pytester.runpytest("-p", "no:cacheprovider", "--ortperf-update").assert_outcomes(passed=1)
    entry = json.loads((pytester.path / "__ortperf__" / "test_perf.json").read_text())["entries"][
        "test_attention::attention"
    ]
    assert set(entry["op_shares"]["candidate"]) == {"FusedMatMul", "MatMul", "Softmax"}
    assert set(entry["op_shares"]["reference"]) == {"MatMul", "Softmax", "Transpose"}
    assert abs(sum(entry["op_shares"]["candidate"].values()) - 1.0) < 0.01

    script.write_text(json.dumps([[1e-4] * 20, [1.2e-4] * 20]))
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf", "--ortperf-store=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAIL ratio: ratio 1.200 vs baseline 0.900*regressed*",
            "*op types whose share of kernel time moved most, baseline -> now:*",
        ]
    )
