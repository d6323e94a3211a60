"""``pytest_ortperf.units``: how every report spells a duration, ratio or change, and how
every option reads a fraction."""

from __future__ import annotations

import math

import pytest

from pytest_ortperf.units import (
    SECOND_UNITS,
    format_bytes,
    format_change,
    format_interval,
    format_metric,
    format_ratio,
    format_ratio_bounds,
    format_ratio_interval,
    format_seconds,
    parse_fraction,
    time_unit,
)

# -- format_seconds --------------------------------------------------------------------------


def test_format_seconds() -> None:
    assert format_seconds(1.5) == "1.50 s"
    assert format_seconds(0.0) == "0.00 ns"
    assert format_seconds(0.00125) == "1.25 ms"
    assert format_seconds(4.53e-5) == "45.3 us"
    assert format_seconds(8.12e-7) == "812 ns"
    assert format_seconds(float("nan")) == "-"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (1.0, "1.00 s"),
        (12.5, "12.5 s"),
        (1e-3, "1.00 ms"),
        (0.000999, "999 us"),
        (1e-6, "1.00 us"),
        (1e-9, "1.00 ns"),
        (1e-10, "0.100 ns"),  # below a nanosecond: still ns
        (-0.00125, "-1.25 ms"),  # negative durations (differences) keep their sign
    ],
)
def test_format_seconds_units(seconds: float | None, text: str) -> None:
    assert format_seconds(seconds) == text


def test_format_seconds_is_ascii() -> None:
    """``us``, not the micro sign: terminals, JUnit XML and CI logs are not always UTF-8."""
    assert [unit for unit, _ in SECOND_UNITS] == ["s", "ms", "us", "ns"]
    assert all(format_seconds(10.0**-k).isascii() for k in range(12))


def test_format_seconds_rounds_up_into_the_next_unit() -> None:
    # Rounding to 3 digits can reach 1000 of the smaller unit: the next unit up then reads it.
    assert format_seconds(0.0009996) == "1.00 ms"
    assert format_seconds(0.9996) == "1.00 s"
    assert format_seconds(999.6e-9) == "1.00 us"
    assert format_seconds(0.000999) == "999 us"


def test_format_change_and_parse_fraction_have_no_negative_zero() -> None:
    assert format_change(-0.00001) == "+0.0%"
    assert str(parse_fraction("-0")) == "0.0"


# -- time_unit -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "unit"),
    [
        ([1.5, 2.0, 3.0], "s"),
        ([2e-3, 3e-3, 1e-6], "ms"),  # the typical (median) value decides, not the smallest
        ([4e-5, 5e-5], "us"),
        ([5e-10], "ns"),
        ([1e-12], "ns"),  # nothing smaller than ns
        ([], "s"),
        ([0.0, math.nan, math.inf], "s"),  # zeros and non-finite values are ignored
        ([-2e-3, 2e-3, 3e-3], "ms"),  # sizes, whatever the sign
    ],
)
def test_time_unit(values: list[float], unit: str) -> None:
    name, scale = time_unit(values)
    assert name == unit
    assert (name, scale) in SECOND_UNITS


def test_time_unit_reads_1_to_1000() -> None:
    values = [0.0123, 0.0456, 0.0789]
    _, scale = time_unit(values)
    assert all(1 <= v / scale < 1000 for v in values)


# -- format_ratio, format_change, format_interval ----------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "text"),
    [
        (0.8, "0.800"),
        (1.0, "1.000"),
        (1.23456, "1.235"),
        (999.0, "999.000"),
        (1234.5, "1234"),  # large: 4 significant digits
        (0.00512, "0.00512"),  # small: 4 significant digits
        (-0.5, "-0.500"),
        (None, "-"),
        (math.nan, "-"),
        (math.inf, "-"),
    ],
)
def test_format_ratio(ratio: float | None, text: str) -> None:
    assert format_ratio(ratio) == text


@pytest.mark.parametrize(
    ("change", "text"),
    [
        (0.053, "+5.3%"),
        (-0.012, "-1.2%"),
        (0.0, "+0.0%"),
        (1.0, "+100.0%"),
        (None, ""),
        (math.nan, ""),
    ],
)
def test_format_change(change: float | None, text: str) -> None:
    assert format_change(change) == text


def test_format_interval() -> None:
    assert format_interval(-0.012, 0.034) == "[-1.2%, +3.4%]"
    assert format_interval(0.188, 0.212) == "[+18.8%, +21.2%]"


# -- parse_fraction ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.05", 0.05),
        ("5%", 0.05),
        ("50%", 0.5),
        ("0.5%", 0.005),
        ("0", 0.0),
        ("1e-2", 0.01),
        ("+5%", 0.05),
        # Surrounding blanks and a blank before "%" are accepted: ini values, markers and
        # quoted shell arguments carry them, and the meaning is not in doubt.
        (" 5 % ", 0.05),
        ("5 %", 0.05),
        ("\t0.05\n", 0.05),
        (0.05, 0.05),  # not only text: ini values may already be numbers
        (2, 2.0),  # no upper bound here: callers bound their own options
    ],
)
def test_parse_fraction_accepts(text: object, value: float) -> None:
    assert parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", "must be a fraction such as 0.05 or 5%, got 'abc'"),
        ("", "must be a fraction such as 0.05 or 5%, got ''"),
        ("%", "must be a fraction such as 0.05 or 5%"),
        ("5%%", "must be a fraction such as 0.05 or 5%"),
        ("5 percent", "must be a fraction such as 0.05 or 5%"),
        ("-1", "must be a non-negative fraction such as 0.05 or 5%, got '-1'"),
        ("-5%", "must be a non-negative fraction such as 0.05 or 5%, got '-5%'"),
        ("nan", "must be a non-negative fraction such as 0.05 or 5%, got 'nan'"),
        ("inf", "must be a non-negative fraction such as 0.05 or 5%, got 'inf'"),
        ("-inf", "must be a non-negative fraction"),
        ("inf%", "must be a non-negative fraction"),
        (None, "must be a fraction such as 0.05 or 5%, got None"),
    ],
)
def test_parse_fraction_rejects(text: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_fraction(text)
    assert str(info.value).startswith(message)


# -- composite spellings ---------------------------------------------------------------------


def test_ratio_with_interval_and_metric_values() -> None:
    assert format_ratio_bounds(0.9, 0.93) == "[0.900, 0.930]"
    assert format_ratio_interval(0.912, 0.9, 0.93) == "0.912 [0.900, 0.930]"
    assert format_metric("latency", 1.5e-3) == "1.50 ms"
    assert format_metric("ratio", 0.9) == "0.900"
    assert format_metric("structure", 7.0) == "7"
    assert format_metric("ratio", math.nan) == "-"
    assert format_bytes(3 * 2**20 + 2**19) == "3.5 MiB"


def test_threshold_problem_is_the_one_rule_of_plugin_and_cli() -> None:
    from pytest_ortperf.units import threshold_problem

    assert threshold_problem("0.05", 0.05) is None
    assert threshold_problem("5%", 0.05) is None
    assert threshold_problem("1000%", 10.0) is None
    assert threshold_problem("5", 5.0) == "means 500%; write 5% or 0.05"
    assert threshold_problem("1", 1.0) == "means 100%; write 1% or 0.01"
    assert threshold_problem("1001%", 10.01) == "must be at most 1000%, got '1001%'"
