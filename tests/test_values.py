"""One set of value checks (issue 21, item 2): the plugin's settings and the ``ortperf``
options accept and refuse the same seconds, thresholds, significance levels and counts,
with the same words, naming the option at fault."""

from __future__ import annotations

import pytest

from pytest_ortperf import values
from pytest_ortperf.cli import build_parser
from pytest_ortperf.config import _alpha, _seconds, _threshold, _window

# ---------------------------------------------------------------------- the checks' bounds


@pytest.mark.parametrize(
    ("given", "expected"),
    [(600, 600.0), ("600", 600.0), ("1e-9", 1e-9), (0.5, 0.5), (" 2 ", 2.0)],
)
def test_seconds_accepts_up_to_the_budget_bound(given: object, expected: float) -> None:
    assert values.seconds(given) == expected


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("600.001", "must be at most 600 s, got '600.001'"),
        (0, "must be positive, got 0"),
        ("-1", "must be positive, got '-1'"),
        ("inf", "must be finite, got 'inf'"),
        ("nan", "must be finite, got 'nan'"),
        ("1e400", "must be finite, got '1e400'"),
        (True, "must be a number of seconds, got True"),
        ("soon", "must be a number of seconds, got 'soon'"),
    ],
)
def test_seconds_refuses(given: object, problem: str) -> None:
    with pytest.raises(values.BadValue) as caught:
        values.seconds(given)
    assert str(caught.value) == f"{problem} (accepted: {values.SECONDS})"


@pytest.mark.parametrize(
    ("given", "expected"),
    [("5%", 0.05), ("0.05", 0.05), ("0.999", 0.999), ("1000%", 10.0), ("1e-9", 1e-9)],
)
def test_threshold_accepts(given: str, expected: float) -> None:
    assert values.threshold(given) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("1", "1 means 100%; write 1% or 0.01"),
        ("5", "5 means 500%; write 5% or 0.05"),
        ("1001%", "must be at most 1000%, got '1001%'"),
        ("0", "must be positive, got '0'"),
        ("-5%", "must be a non-negative fraction such as 0.05 or 5%, got '-5%'"),
        (True, "must be a fraction such as 0.05 or 5%, got True"),
    ],
)
def test_threshold_refuses(given: object, problem: str) -> None:
    with pytest.raises(values.BadValue) as caught:
        values.threshold(given)
    assert str(caught.value) == f"{problem} (accepted: {values.THRESHOLD})"


def test_alpha_bounds_are_inclusive_below_and_exclusive_above() -> None:
    assert values.alpha("1e-6") == values.MIN_ALPHA
    assert values.alpha("1%") == pytest.approx(0.01)
    assert values.alpha(0.4999) == 0.4999
    for refused, problem in [
        ("9.9e-7", "must be at least 1e-06, got '9.9e-7'"),
        ("1e-9", "must be at least 1e-06, got '1e-9'"),
        ("0.5", "must be below 0.5, got '0.5'"),
        ("0", "must be positive, got '0'"),
        ("often", "must be a fraction such as 0.05 or 5%, got 'often'"),
    ]:
        with pytest.raises(values.BadValue, match="accepted: at least 1e-06") as caught:
            values.alpha(refused)
        assert str(caught.value).startswith(problem), refused


def test_count_bounds_are_inclusive() -> None:
    assert values.count("1", 1, 3, "runs") == 1
    assert values.count(3, 1, 3, "runs") == 3
    assert values.count(" +2 ", 1, 3, "runs") == 2
    for refused, problem in [
        ("0", "must be from 1 to 3, got '0'"),
        ("4", "must be from 1 to 3, got '4'"),
        ("-1", "must be from 1 to 3, got '-1'"),
        ("2.5", "must be a whole number of runs, got '2.5'"),
        (2.0, "must be a whole number of runs, got 2.0"),
        (True, "must be a whole number of runs, got True"),
        ("", "must be a whole number of runs, got ''"),
    ]:
        with pytest.raises(values.BadValue) as caught:
            values.count(refused, 1, 3, "runs")
        accepted = "(accepted: a whole number of runs from 1 to 3)"
        assert str(caught.value) == f"{problem} {accepted}", refused


def test_count_says_why_a_smaller_one_is_refused() -> None:
    with pytest.raises(values.BadValue, match="got '3': too few to gate"):
        values.count("3", 5, 10, "runs", below="too few to gate")
    with pytest.raises(values.BadValue) as caught:
        values.count("11", 5, 10, "runs", below="too few to gate")
    assert "too few" not in str(caught.value)


def test_flag() -> None:
    assert values.flag("Yes") is True and values.flag(" off ") is False
    assert values.flag(False) is False and values.flag("") is False
    with pytest.raises(values.BadValue, match="must be true or false, got 'maybe'"):
        values.flag("maybe")


def test_the_option_is_named_first() -> None:
    with pytest.raises(values.BadValue) as caught:
        values.threshold("5")
    assert caught.value.named("ini ortperf_threshold").startswith(
        "ini ortperf_threshold=5 means 500%; write 5% or 0.05 (accepted: a fraction"
    )
    with pytest.raises(values.BadValue) as caught:
        values.alpha("0.5")
    assert caught.value.named("--alpha").startswith("--alpha must be below 0.5, got '0.5'")


# ------------------------------------------------------------------ the two sides agree


def cli_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str | None:
    """The CLI's usage error for ``argv`` (parsed only: nothing runs), None if accepted."""
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        assert exc.code == 2
        return capsys.readouterr().err.strip().splitlines()[-1]
    return None


def plugin_error(parse: object, value: str, what: str) -> str | None:
    """The plugin's usage error for ``value`` of setting ``what``, None if accepted."""
    try:
        parse(value, what)  # type: ignore[operator]
    except pytest.UsageError as exc:
        return str(exc)
    return None


AB = ["ab", "m.onnx", "--a", "x", "--b", "y"]


@pytest.mark.parametrize(
    ("parse", "cli", "value"),
    [
        (_alpha, ["compare", "1", "2", "--alpha"], "1e-9"),  # the CLI took it before
        (_alpha, ["ab", *AB[1:], "--alpha"], "1e-7"),
        (_alpha, ["compare", "1", "2", "--alpha"], "1e-6"),
        (_alpha, ["compare", "1", "2", "--alpha"], "0.5"),
        (_alpha, ["compare", "1", "2", "--alpha"], "0"),
        (_threshold, ["compare", "1", "2", "--threshold"], "5"),
        (_threshold, ["changes", "--min-change"], "1001%"),
        (_threshold, ["ab", *AB[1:], "--threshold"], "0.05"),
        (_seconds, [*AB, "--budget"], "601"),  # the CLI took it before
        (_seconds, [*AB, "--budget"], "inf"),  # the CLI took it before
        (_seconds, [*AB, "--budget"], "600"),
        (_seconds, [*AB, "--budget"], "0"),
    ],
)
def test_plugin_and_cli_agree(
    capsys: pytest.CaptureFixture[str], parse: object, cli: list[str], value: str
) -> None:
    option = cli[-1]
    on_cli = cli_error(capsys, [*cli, value])
    in_plugin = plugin_error(parse, value, option)
    assert (on_cli is None) == (in_plugin is None), (on_cli, in_plugin)
    if in_plugin is not None:
        problem = in_plugin.removeprefix(option).removeprefix("=").lstrip()
        assert on_cli is not None and on_cli.endswith(f"argument {option}: {problem}")


def test_history_window_and_compare_window_share_their_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    top = str(values.MAX_HISTORY_WINDOW)
    assert _window(top, "--ortperf-history-window") == values.MAX_HISTORY_WINDOW
    assert cli_error(capsys, ["compare", "1", "2", "--window", top]) is None
    over = str(values.MAX_HISTORY_WINDOW + 1)
    with pytest.raises(pytest.UsageError, match=f"must be from 5 to {top}, got '{over}'"):
        _window(over, "--ortperf-history-window")
    said = cli_error(capsys, ["compare", "1", "2", "--window", over])
    assert said is not None and f"must be from 1 to {top}, got '{over}'" in said


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["history", "--last", "0"], "argument --last: must be from 1 to 100000, got '0'"),
        (["report", "-o", "r.html", "--last", "0"], "argument --last: must be from 1 to"),
        (["changes", "--last", "0"], "argument --last: must be from 1 to"),
        (["runs", "--last", "100001"], "argument --last: must be from 0 to 100000"),
        (["prune", "--keep", "-1"], "argument --keep: must be from 0 to 100000, got '-1'"),
        (["profile", "m.onnx", "--runs", "0"], "argument --runs: must be from 1 to 10000"),
        (["profile", "m.onnx", "--threads", "1025"], "argument --threads: must be from 0 to"),
        ([*AB, "--profile-runs", "10001"], "argument --profile-runs: must be from 0 to 10000"),
        ([*AB, "--processes", "17"], "argument --processes: must be from 1 to 16, got '17'"),
        ([*AB, "--processes", "x"], "must be a whole number of worker-process pairs, got 'x'"),
    ],
)
def test_every_cli_count_is_bounded(
    capsys: pytest.CaptureFixture[str], argv: list[str], problem: str
) -> None:
    said = cli_error(capsys, argv)
    assert said is not None and problem in said, said


def test_cli_counts_keep_their_meaningful_zero(capsys: pytest.CaptureFixture[str]) -> None:
    # runs --last 0 lists all, prune --keep 0 deletes all, --profile-runs 0 profiles none,
    # --warmup 0 warms nothing, --threads 0 is onnxruntime's default.
    for argv in (
        ["runs", "--last", "0"],
        ["prune", "--keep", "0"],
        [*AB, "--profile-runs", "0", "--threads", "0"],
        ["profile", "m.onnx", "--warmup", "0"],
    ):
        assert cli_error(capsys, argv) is None, argv
