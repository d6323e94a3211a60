"""Bounds of the settings, of generated inputs and of model paths (issue 11, items 4 and 11).

Settings are refused when pytest starts (options, ini keys) or when a test asks for the
``ortperf`` fixture (marker), naming the setting, the value and the accepted range; the
engine's own hard cap is tested with a fake clock in ``test_measure.py``. Runs that used to
hang run in a subprocess with a timeout.
"""

import tracemalloc

import numpy as np
import onnx
import pytest

from pytest_ortperf import models
from pytest_ortperf.config import MarkerError, OrtperfConfig
from pytest_ortperf.measuring.feeds import (
    MAX_FEED_BYTES,
    FeedError,
    InputSpec,
    check_feed_names,
    make_feeds,
    random_array,
)
from pytest_ortperf.measuring.session import OrtSession

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none")
TIMEOUT = 120  # seconds: a run that hangs fails instead

MEASURING_TEST = """
import pytest
from pytest_ortperf import models

def test_lr(ort_session, ort_feeds, ortperf):
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 4}), name="lr")
"""


def assert_usage_error(result, *needles):
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    err = result.stderr.str()
    for needle in needles:
        assert needle in err, err
    assert "INTERNALERROR" not in err + result.stdout.str()


# ---------------------------------------------------------------------- options and ini keys


def test_infinite_budget_option_is_refused_not_a_hang(pytester):
    pytester.makepyfile(MEASURING_TEST)
    result = pytester.runpytest_subprocess(
        *RUN, "--ortperf", "--ortperf-budget=inf", timeout=TIMEOUT
    )
    assert_usage_error(result, "--ortperf-budget must be finite, got inf", "at most 600 s")


def test_infinite_budget_ini_is_refused_not_a_hang(pytester):
    pytester.makepyfile(MEASURING_TEST)
    pytester.makeini("[pytest]\nortperf_budget = inf\n")
    result = pytester.runpytest_subprocess(*RUN, "--ortperf", timeout=TIMEOUT)
    assert_usage_error(result, "ini ortperf_budget must be finite, got 'inf'", "at most 600 s")


@pytest.mark.parametrize(
    "option, needles",
    [
        ("--ortperf-budget=nan", ["--ortperf-budget must be finite, got nan"]),
        ("--ortperf-budget=601", ["--ortperf-budget must be at most 600 s, got 601.0"]),
        ("--ortperf-budget=0", ["--ortperf-budget must be positive, got 0.0", "more than 0 s"]),
        (
            "--ortperf-threshold=5",
            ["--ortperf-threshold=5 means 500%; write 5% or 0.05", "below 1"],
        ),
        (
            "--ortperf-threshold=1",
            ["--ortperf-threshold=1 means 100%; write 1% or 0.01"],
        ),
        ("--ortperf-threshold=1001%", ["--ortperf-threshold must be at most 1000%, got '1001%'"]),
        ("--ortperf-threshold=inf", ["--ortperf-threshold", "'inf'", "accepted: a fraction"]),
    ],
)
def test_bad_option_is_a_usage_error_naming_it_and_the_range(pytester, option, needles):
    result = pytester.runpytest(*RUN, "--ortperf", option)
    assert_usage_error(result, *needles)


@pytest.mark.parametrize(
    "ini, needles",
    [
        ("ortperf_threshold = 5", ["ini ortperf_threshold=5 means 500%; write 5% or 0.05"]),
        (
            "ortperf_latency_threshold = 25",
            ["ini ortperf_latency_threshold=25 means 2500%; write 25% or 0.25"],
        ),
        (
            "ortperf_alpha = 1e-300",
            ["ini ortperf_alpha must be at least 1e-06, got '1e-300'", "log2(1/alpha)"],
        ),
        ("ortperf_budget = 1e400", ["ini ortperf_budget must be finite, got '1e400'"]),
    ],
)
def test_bad_ini_key_is_a_usage_error_naming_it_and_the_range(pytester, ini, needles):
    pytester.makeini(f"[pytest]\n{ini}\n")
    result = pytester.runpytest(*RUN, "--ortperf")
    assert_usage_error(result, *needles)


def test_bounds_that_are_accepted(pytester):
    pytester.makeini(
        "[pytest]\nortperf_threshold = 1000%\nortperf_alpha = 1e-6\nortperf_budget = 600\n"
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.ortperf(budget=0.05, block=0.05, threshold="0.99", alpha=0.49)
        def test_settings(ortperf):
            assert ortperf.engine.config.block_s == ortperf.engine.config.budget_s == 0.05
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=1)


# ----------------------------------------------------------------------------------- marker


MARKED = """
import pytest
from pytest_ortperf import models

@pytest.mark.ortperf({args})
def test_marked(ort_session, ort_feeds, ortperf):
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={{"N": 4}}), name="lr")
"""

BAD_MARKERS = {
    "budget_inf": ('budget=float("inf")', "budget must be finite, got inf"),
    "budget_huge": ("budget=3600", "budget must be at most 600 s, got 3600"),
    "block_long": ("block=100", "block must not be longer than the budget (1 s), got 100"),
    "block_over_budget": (
        "budget=0.05, block=0.1",
        "block must not be longer than the budget (0.05 s), got 0.1",
    ),
    "threshold_5": ("threshold=5", "threshold=5 means 500%; write 5% or 0.05"),
    "threshold_inf": ('threshold=float("inf")', "threshold must be a non-negative fraction"),
    "alpha_tiny": ("alpha=1e-300", "alpha must be at least 1e-06, got 1e-300"),
    "budget_bool": ("budget=True", "budget must be a number of seconds, got True"),
}


def test_bad_marker_arguments_fail_their_tests_naming_them(pytester):
    # One subprocess run: budget=inf used to time forever.
    for name, (args, _) in BAD_MARKERS.items():
        pytester.makepyfile(**{f"test_{name}": MARKED.format(args=args)})
    result = pytester.runpytest_subprocess(*RUN, "--ortperf", timeout=TIMEOUT)
    result.assert_outcomes(errors=len(BAD_MARKERS))
    out = result.stdout.str()
    for _, needle in BAD_MARKERS.values():
        assert f"@pytest.mark.ortperf: {needle}" in out
    assert "INTERNALERROR" not in out and "Traceback" not in out


def test_marker_bounds_without_pytest():
    settings = OrtperfConfig(budget_s=0.5)
    assert settings.engine_config({"block": 0.5}).block_s == 0.5
    with pytest.raises(MarkerError, match=r"block must not be longer than the budget \(0.5 s\)"):
        settings.engine_config({"block": 0.6})
    with pytest.raises(MarkerError, match=r"block must not be longer than the budget \(0.1 s\)"):
        settings.engine_config({"budget": 0.1, "block": 0.2})
    assert settings.gate_settings({"threshold": "0.5%"}).threshold == pytest.approx(0.005)
    assert settings.gate_settings({"threshold": "500%"}).threshold == 5.0
    with pytest.raises(MarkerError, match=r"threshold=2 means 200%; write 2% or 0.02"):
        settings.gate_settings({"threshold": 2})


# ------------------------------------------------------------------------------------ feeds


SPEC = InputSpec("x", "tensor(float)", ("batch", 4))


def test_low_above_high_names_the_input():
    with pytest.raises(FeedError, match=r"input 'x': low=3 is above high=1$"):
        make_feeds([SPEC], dims={"batch": 2}, low=3, high=1)
    with pytest.raises(FeedError, match=r"input 'x': low=5 is above high=1 \(floats default"):
        make_feeds([SPEC], dims={"batch": 2}, low=5)


@pytest.mark.parametrize("bound", [float("inf"), float("nan"), True, "1"])
def test_low_and_high_must_be_finite_numbers(bound):
    with pytest.raises(FeedError, match=r"low= must be a finite number"):
        make_feeds([SPEC], dims={"batch": 2}, low=bound)


def test_float16_range_must_fit_the_dtype():
    spec = InputSpec("h", "tensor(float16)", (3,))
    with pytest.raises(FeedError, match=r"input 'h': range \[0, 1e\+06\) does not fit dtype"):
        make_feeds([spec], low=0, high=1e6)


def test_unknown_dims_key_is_refused_with_the_known_ones():
    specs = [SPEC, InputSpec("y", "tensor(int64)", ("batch", "seq"))]
    with pytest.raises(
        FeedError,
        match=r"dims names dim\(s\) \['btach'\] that no input of the model has; "
        r"its symbolic dims are \['batch', 'seq'\]",
    ):
        make_feeds(specs, dims={"batch": 2, "seq": 3, "btach": 2})
    static = InputSpec("s", "tensor(float)", (2, 2))
    with pytest.raises(FeedError, match=r"\['N'\].*it has no symbolic dims"):
        make_feeds([static], dims={"N": 2})


def test_bool_is_no_dim():
    with pytest.raises(FeedError, match=r"input 'x': axis 0 is symbolic dim 'batch'.*True"):
        make_feeds([SPEC], dims={"batch": True})
    with pytest.raises(FeedError, match=r"input 'x': shapes= gives \[True, 4\]"):
        make_feeds([SPEC], shapes={"x": (True, 4)})


def test_huge_dims_are_refused_before_allocating():
    with pytest.raises(
        FeedError,
        match=r"input 'x': shape \[1000000000000, 4\] of dtype float32 is "
        r"4,000,000,000,000 elements .*at most 2 GiB per input.*values=",
    ):
        make_feeds([SPEC], dims={"batch": 10**12})
    strings = InputSpec("s", "tensor(string)", ("batch",))
    with pytest.raises(FeedError, match=r"input 's': shape \[100000000\] of dtype object"):
        make_feeds([strings], dims={"batch": 10**8})
    with pytest.raises(FeedError, match=r"shape \[0, 1099511627776\] of dtype float32 is 0 "):
        # empty, but a dim no input needs: refused too
        random_array(np.dtype(np.float32), (0, 2**40), np.random.default_rng(0))
    assert MAX_FEED_BYTES == 2**31


def test_floats_are_generated_in_their_own_dtype():
    # float64 first, then a float32 copy, used to need three times the input's memory.
    rng = np.random.default_rng(0)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        array = random_array(np.dtype(np.float32), (1_000_000,), rng)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert array.dtype == np.float32 and array.min() >= -1 and array.max() < 1
    assert peak < 1.5 * array.nbytes


def test_integers_are_generated_in_their_own_dtype_over_its_full_range():
    rng = np.random.default_rng(0)
    small = random_array(np.dtype(np.int8), (10_000,), rng, low=-1000, high=1000)
    assert small.dtype == np.int8 and small.min() == -128 and small.max() == 127
    big = random_array(np.dtype(np.uint64), (1000,), rng, low=0, high=2.0**70)
    assert big.dtype == np.uint64 and int(big.max()) > 2**62


# ----------------------------------------------------------------------- feed names, models


def test_extra_or_missing_feed_names_are_named():
    with pytest.raises(
        FeedError,
        match=r"^feeds name input\(s\) \['Y'\] that model m does not have; "
        r"its inputs are \['X'\]$",
    ):
        check_feed_names(["X"], {"X": 1, "Y": 2}, "model m")
    with pytest.raises(
        FeedError,
        match=r"feeds lack input\(s\) \['X'\] of the model and name input\(s\) \['Y'\] "
        r"that it does not have",
    ):
        check_feed_names(["X"], {"Y": 2})
    check_feed_names(["X"], {"X": 1})


def test_session_run_refuses_feeds_the_model_does_not_have():
    session = OrtSession.create(models.linear_regression())
    x = np.zeros((2, 10), np.float32)
    assert session.run({"X": x})[0].shape == (2, 1)
    with pytest.raises(
        FeedError, match=r"\['X2'\] that model linear_regression does not have; its inputs"
    ):
        session.run({"X": x, "X2": x})


def test_directory_as_model_says_it_is_a_directory(tmp_path):
    (tmp_path / "models").mkdir()
    with pytest.raises(IsADirectoryError, match=r"is a directory, not a model file: .*models"):
        OrtSession.create(tmp_path / "models")
    with pytest.raises(FileNotFoundError, match=r"not found: .*nope\.onnx"):
        OrtSession.create(tmp_path / "nope.onnx")


def test_fixtures_turn_bound_errors_into_clean_failures(pytester):
    onnx.save(models.linear_regression(), str(pytester.path / "lr.onnx"))
    (pytester.path / "adir").mkdir()
    pytester.makepyfile(
        """
        from pytest_ortperf import models

        def test_dir(ort_session):
            ort_session("adir")

        def test_low_high(ort_session, ort_feeds):
            ort_feeds(ort_session("lr.onnx"), dims={"N": 2}, low=2, high=1)

        def test_extra_dim(ort_session, ort_feeds):
            ort_feeds(ort_session("lr.onnx"), dims={"N": 2, "M": 3})

        def test_bool_dim(ort_session, ort_feeds):
            ort_feeds(ort_session("lr.onnx"), dims={"N": True})

        def test_huge(ort_session, ort_feeds):
            ort_feeds(ort_session("lr.onnx"), dims={"N": 10**12})
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(failed=5)
    out = result.stdout.str()
    for line in (
        "E       IsADirectoryError: ONNX model path is a directory, not a model file: adir",
        "FeedError: input 'X': low=2 is above high=1\n",
        "FeedError: dims names dim(s) ['M'] that no input of the model has; its symbolic "
        "dims are ['N']",
        "FeedError: input 'X': axis 0 is symbolic dim 'N', which dims= sets to True",
        "FeedError: input 'X': shape [1000000000000, 10] of dtype float32 is",
    ):
        assert line in out
    assert "INTERNALERROR" not in out and "def factory(" not in out
