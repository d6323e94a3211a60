"""The plugin end to end: pytest runs in-process on small test files (pytester)."""

import subprocess
import sys
import textwrap

EVERY_FIXTURE = """
import numpy as np
import pytest
from pytest_ortperf import models


def test_latency_binding(ort_session, ort_feeds, ort_binding, ortperf):
    s = ort_session(models.linear_regression())
    b = ort_binding(s, ort_feeds(s, dims={"N": 4}))
    r = ortperf.latency(b, name="lr")
    assert r.api == "iobinding" and r.median > 0
    assert r.measured == MEASURED
    b.run()
    assert b.outputs()[0].shape == (4, 1)


def test_latency_session_api(ort_session, ort_feeds, ortperf):
    s = ort_session(models.kmeans())
    r = ortperf.latency(s, ort_feeds(s, dims={"N": 8}), api="run_c", name="km")
    assert r.api == "run_c" and (r.n > 1) == MEASURED


def test_compare(ort_session, ort_feeds, ortperf):
    ref = ort_session(models.attention(), optimization="disable")
    cand = ort_session(models.attention())
    c = ortperf.compare(ref, cand, ort_feeds(ref, dims={"B": 2}), name="attention")
    assert c.low <= c.ratio <= c.high
    assert c.output_diffs[0].max_abs < 1e-4
    if MEASURED:
        assert dict(c.candidate.session.op_histogram)["FusedMatMul"] == 1


def test_rank_and_sweep(ort_session, ort_feeds, ortperf):
    a = ort_session(models.gemm_concat(fused=False))
    b = ort_session(models.gemm_concat(fused=True))
    feeds = ort_feeds(a, dims={"M": 8, "K": 8, "N": 4})
    table = ortperf.rank({"two_gemm": a, "one_gemm": b}, feeds, name="gemm")
    assert sorted(table["variant"]) == ["one_gemm", "two_gemm"]
    assert table["ratio_to_fastest"].iloc[0] == 1.0
    sweep = ortperf.api_sweep(a, feeds)
    assert len(sweep) == 6 and set(sweep["api"]) >= {"run", "iobinding"}
"""


def write_suite(pytester, measured):
    pytester.makepyfile(test_suite=f"MEASURED = {measured}\n" + EVERY_FIXTURE)


def test_smoke_mode_uses_every_fixture_and_records_nothing(pytester):
    write_suite(pytester, measured=False)
    result = pytester.runpytest("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=4)
    assert "ortperf" not in result.stdout.str().split("passed")[0].split("\n")[-2]
    result.stdout.no_fnmatch_line("*== ortperf ==*")
    assert not (pytester.path / ".ortperf").exists()


def test_measured_mode_prints_both_tables(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # the summary fits the terminal's width
    write_suite(pytester, measured=True)
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf", "--ortperf-budget=0.05")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*ortperf: measuring, budget 0.05 s per measurement*",
            "*= ortperf =*",
            "measurement*api*median*IQR*n",
            "test_suite.py::test_latency_binding::lr*iobinding*",
            "test_suite.py::test_latency_session_api::km*run_c*",
            "comparison (candidate/reference)*ratio*CI*",
            "test_suite.py::test_compare::attention*",
        ]
    )
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith("measurement"))
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith("ortperf: "))
    assert max(len(line) for line in lines[start:end]) <= 100


def test_results_are_attached_to_the_report(pytester):
    write_suite(pytester, measured=True)
    pytester.makeconftest(
        """
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_makereport(item, call):
            if call.when == "call":
                kinds = [v["kind"] for k, v in item.user_properties if k == "ortperf"]
                print("KINDS", item.name, kinds)
        """
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-s", "--ortperf", "--ortperf-budget=0.02"
    )
    out = result.stdout.str()
    assert "KINDS test_latency_binding ['latency']" in out
    assert "KINDS test_compare ['compare']" in out
    assert "KINDS test_rank_and_sweep " + str(["latency"] * 8) in out


def test_injected_samples_drive_the_summary(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # the summary fits the terminal's width
    pytester.makepyfile(
        """
        from pytest_ortperf import models
        from pytest_ortperf.testing import ScriptedEngine

        def test_fixed(ort_session, ort_feeds, ortperf):
            ortperf.engine = ScriptedEngine(
                measure=[(1e-3, 2e-3, 3e-3, 4e-3, 5e-3)],
                interleave=[[(1e-3,) * 5, (1.1e-3,) * 5]],
                calls_per_block=10,
            )
            s = ort_session(models.linear_regression())
            feeds = ort_feeds(s, dims={"N": 2})
            r = ortperf.latency(s, feeds, name="fixed")
            assert (r.median, r.n, r.min, r.max) == (3e-3, 5, 1e-3, 5e-3)
            c = ortperf.compare(s, s, feeds, name="aa")
            assert round(c.ratio, 6) == 1.1
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_injected_samples_drive_the_summary.py::test_fixed::fixed*run*3.00 ms*2.00 ms*5",
            "test_injected_samples_drive_the_summary.py::test_fixed::aa*1.100*[[]1.100, 1.100]*1.00 ms*1.10 ms",
        ]
    )


def test_output_mismatch_fails_with_numbers(pytester):
    pytester.makepyfile(
        """
        from pytest_ortperf import models

        def test_mismatch(ort_session, ort_feeds, ortperf):
            a = ort_session(models.attention())
            b = ort_session(models.attention(extra_add=True))
            ortperf.compare(a, b, ort_feeds(a, dims={"B": 1}), name="bad")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*OutputMismatch: compare 'bad': outputs disagree*",
            "*Y: max abs diff 0.25, max rel diff *(atol=0.0001, rtol=0.001)*",
        ]
    )


def test_unavailable_provider_skips_at_the_test(pytester):
    pytester.makepyfile(
        """
        from pytest_ortperf import models

        def test_gpu(ort_session):
            ort_session(models.linear_regression(), providers=["CUDAExecutionProvider"])
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1] test_unavailable_provider_skips_at_the_test.py:3: execution provider "
            "'CUDAExecutionProvider' is not available*available: *CPUExecutionProvider*"
        ]
    )


def test_marker_budget_and_bad_marker(pytester):
    pytester.makepyfile(
        """
        import pytest
        from pytest_ortperf import models

        @pytest.mark.ortperf(budget=0.01)
        def test_small_budget(ort_session, ort_feeds, ortperf):
            assert ortperf.engine.config.budget_s == 0.01

        @pytest.mark.ortperf(budjet=1)
        def test_typo(ortperf):
            pass

        @pytest.mark.ortperf(budget="soon")
        def test_bad_value(ortperf):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf")
    result.assert_outcomes(passed=1, errors=2)
    out = result.stdout.str()
    assert "test_typo: unknown @pytest.mark.ortperf argument(s) ['budjet']" in out
    assert "@pytest.mark.ortperf: budget must be a number of seconds, got 'soon'" in out
    assert "Traceback" not in out and "def ortperf(" not in out


def test_bad_budget_option_is_a_usage_error(pytester):
    result = pytester.runpytest("--ortperf-budget=-1")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--ortperf-budget must be positive, got -1.0*"])


def test_marker_is_registered(pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.ortperf(*"])


def test_loading_the_plugin_imports_no_heavy_module():
    code = textwrap.dedent(
        """
        import sys
        import pytest_ortperf.plugin
        heavy = [m for m in ("onnxruntime", "pandas", "matplotlib", "onnx", "numpy")
                 if m in sys.modules]
        print(heavy)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_run_that_stores_nothing_loads_no_database_code(pytester):
    # --ortperf-store=none: the fixture asks where results go, which must not cost the
    # SQLAlchemy import (about 0.2 s a process) when the answer is nowhere.
    pytester.makepyfile(
        textwrap.dedent(
            """
            import sys
            from pytest_ortperf import models

            def test_latency(ort_session, ort_feeds, ortperf):
                s = ort_session(models.linear_regression())
                ortperf.latency(s, ort_feeds(s, dims={"N": 1}))

            def test_after():
                print("LOADED", "sqlalchemy" in sys.modules)
            """
        )
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--ortperf", "--ortperf-store=none", "--ortperf-budget=0.01",
        "-s",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    assert "LOADED False" in result.stdout.str()


def test_xdist_runs_measured_tests_on_one_worker(pytester):
    pytester.makepyfile(
        "\n".join(
            [
                "import os",
                "from pytest_ortperf import models",
                "def _body(ort_session, ort_feeds, ortperf, i):",
                "    s = ort_session(models.linear_regression())",
                "    ortperf.latency(s, ort_feeds(s, dims={'N': 1}), name=f'm{i}')",
                "    print('WORKER', os.environ.get('PYTEST_XDIST_WORKER'))",
            ]
            + [
                f"def test_{i}(ort_session, ort_feeds, ortperf):\n"
                f"    _body(ort_session, ort_feeds, ortperf, {i})"
                for i in range(6)
            ]
        )
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--ortperf", "--ortperf-budget=0.01", "-rA"
    )
    result.assert_outcomes(passed=6)
    workers = {line.split()[-1] for line in result.outlines if line.startswith("WORKER")}
    assert len(workers) == 1, workers
    assert "all tests on one xdist worker" in result.stdout.str()
    summary = [line for line in result.outlines if "::m" in line and " run " in line]
    assert len(summary) == 6


def test_junitxml_gets_one_line_per_measurement(pytester):
    write_suite(pytester, measured=True)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--ortperf", "--ortperf-budget=0.02", "--junitxml=out.xml"
    )
    result.assert_outcomes(passed=4)
    xml = (pytester.path / "out.xml").read_text()
    assert '<property name="ortperf" value="lr: median ' in xml
    assert '<property name="ortperf" value="attention: ratio ' in xml
    assert '<property name="ortperf-verdicts" value="attention: structure=new, ratio=new"' in xml
    assert "samples" not in xml


def test_user_mistakes_show_the_test_line_not_plugin_internals(pytester):
    pytester.makepyfile(
        """
        from pytest_ortperf import models

        def test_bad_feeds(ort_session, ort_feeds):
            s = ort_session(models.attention())
            ort_feeds(s, dims={"B": 1}, values={"q": 1})

        def test_bad_path(ort_session):
            ort_session("missing.onnx")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert (
        "FeedError: values names unknown input(s) ['q']; the model's inputs are ['K', 'Q', 'V']"
        in out
    )
    assert "ONNX model file not found: missing.onnx" in out
    assert "feeds.py" not in out and "session.py" not in out and "plugin.py" not in out
