"""Units: formatting and parsing of seconds, rates, ratios, percentages and bytes.

A leaf module (standard library only): every report, verdict message and option parser
spells a quantity the same way. Micro-seconds are written ``us`` everywhere (terminals,
JUnit XML and CI logs are not always UTF-8).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

SECOND_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))
"""Units of a duration, largest first, with their size in seconds."""


def format_seconds(seconds: float | None) -> str:
    """A duration with a unit and 3 significant digits: ``812 ns``, ``45.3 us``,
    ``1.00 ms``; ``-`` for None or NaN."""
    if seconds is None or math.isnan(seconds):
        return "-"
    # Round first: 0.9996 ms reads "1.00 ms" in the next unit up, not "1.00e+03 us".
    rounded = float(f"{seconds:.3g}")
    for unit, scale in SECOND_UNITS:
        if abs(rounded) >= scale or unit == "ns":
            return f"{rounded / scale:#.3g}".rstrip(".") + f" {unit}"
    raise AssertionError("unreachable")


def time_unit(values: Sequence[float]) -> tuple[str, float]:
    """A unit for durations in seconds such that their typical value reads 1 to 1000."""
    finite = sorted(abs(v) for v in values if math.isfinite(v) and v != 0)
    typical = finite[len(finite) // 2] if finite else 1.0
    for unit, scale in SECOND_UNITS:
        if typical >= scale:
            return unit, scale
    return SECOND_UNITS[-1]


_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_QUANTITY = re.compile(rf"\s*({_NUMBER}|inf|nan)\s*([^\s\d.+-][^\s]*)?\s*", re.IGNORECASE)


def _quantity(text: object, units: dict[str, float], example: str) -> float:
    """A number with one of ``units`` (a plain number: the unit of scale 1), finite and
    not negative; a ValueError saying what was expected otherwise."""
    expected = f"a quantity such as {example} (units: {', '.join(units)})"
    if isinstance(text, bool) or not isinstance(text, int | float | str):
        raise ValueError(f"must be {expected}, got {text!r}")
    match = _QUANTITY.fullmatch(str(text))
    if match is None or (match.group(2) is not None and match.group(2) not in units):
        raise ValueError(f"must be {expected}, got {text!r}")
    unit = match.group(2) or next(k for k, scale in units.items() if scale == 1.0)
    value = float(match.group(1)) * units[unit]
    if not math.isfinite(value):
        raise ValueError(f"must be finite, got {text!r}")
    if value < 0:
        raise ValueError(f"must not be negative, got {text!r}")
    return value + 0.0  # -0 reads as 0


def parse_seconds(text: object) -> float:
    """A duration in seconds from ``"20 ms"``, ``"2s"``, ``"500 us"`` (units of
    :data:`SECOND_UNITS`; ``µs`` too) or a plain number of seconds; finite, not negative.

    Raises ValueError saying what was expected; callers prefix the name at fault."""
    return _quantity(text, {**dict(SECOND_UNITS), "µs": 1e-6}, "20 ms or 2 s")


def parse_rate(text: object) -> float:
    """Calls per second from ``"1500/s"``, ``"1.5k/s"`` or a plain number; finite, not
    negative. Raises ValueError saying what was expected."""
    return _quantity(text, {"/s": 1.0, "k/s": 1e3, "M/s": 1e6}, "1500/s")


def format_ratio(ratio: float | None) -> str:
    """A ratio to 3 decimals (4 significant digits when very small or large); ``-`` when
    missing or not finite."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{ratio:.3f}" if 0.01 <= abs(ratio) < 1000 else f"{ratio:.4g}"


def format_ratio_bounds(low: float, high: float) -> str:
    """The interval of a ratio: ``[0.905, 0.920]``."""
    return f"[{format_ratio(low)}, {format_ratio(high)}]"


def format_ratio_interval(ratio: float, low: float, high: float) -> str:
    """A ratio with its interval: ``0.912 [0.905, 0.920]``."""
    return f"{format_ratio(ratio)} {format_ratio_bounds(low, high)}"


def format_metric(metric: str, value: float) -> str:
    """A gated metric's value: seconds for ``latency`` and ``cold_start.*``, a ratio for
    ``ratio``, bytes for ``memory.*``, a plain number otherwise (node counts of
    ``structure``); ``-`` when not finite."""
    if not math.isfinite(value):
        return "-"
    if metric == "latency" or metric.startswith("cold_start."):
        return format_seconds(value)
    if metric.startswith("memory."):
        return format_bytes(value)
    if metric == "ratio":
        return format_ratio(value)
    return f"{value:g}"


def format_bytes(n: float) -> str:
    """A memory size in MiB with one decimal: ``12.3 MiB``."""
    return f"{n / 2**20:.1f} MiB"


def format_change(change: float | None) -> str:
    """A relative change as a signed percentage, ``+5.3%``; empty when missing or NaN."""
    if change is None or math.isnan(change):
        return ""
    percent = round(change * 100, 1) + 0.0  # + 0.0: no "-0.0%"
    return f"{percent:+.1f}%"


def format_interval(low: float, high: float) -> str:
    """A relative interval ``[-1.2%, +3.4%]``."""
    return f"[{format_change(low)}, {format_change(high)}]"


def format_confidence(confidence: float) -> str:
    """The label of an interval's confidence: ``95% CI``; a confidence below 100% never
    reads 100% (``99.96% CI`` at alpha 0.0002, a family's share)."""
    percent = confidence * 100
    text = f"{percent:.3g}"
    digits = 3
    while percent < 100 and float(text) >= 100 and digits < 9:
        digits += 1
        text = f"{percent:.{digits}g}"
    return f"{text}% CI"


MAX_THRESHOLD = 10.0
"""The largest slowdown threshold, 1000%, and only written with ``%``."""


def threshold_problem(text: object, value: float) -> str | None:
    """What is wrong with ``value`` (parsed from ``text``) as a slowdown threshold, or None.

    A plain number of 1 or more is refused with the likely fix rather than guessed at: as a
    fraction, ``5`` is 500% and would pass a tripled time as ``ok``; the answer then starts
    with ``means``. Written with ``%``, a threshold may reach :data:`MAX_THRESHOLD`.
    """
    raw = str(text).strip()
    if not raw.endswith("%") and value >= 1:
        return f"means {value:.0%}; write {raw}% or {value / 100:g}"
    if value > MAX_THRESHOLD:
        return f"must be at most {MAX_THRESHOLD:.0%}, got {text!r}"
    return None


def parse_fraction(text: object) -> float:
    """A non-negative fraction written ``0.05`` or ``5%``.

    Raises ValueError with a message that says what was expected; callers prefix the name
    of the option or argument at fault.
    """
    raw = str(text).strip()
    scale = 100.0 if raw.endswith("%") else 1.0
    try:
        value = float(raw.removesuffix("%").strip()) / scale
    except ValueError:
        raise ValueError(f"must be a fraction such as 0.05 or 5%, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a non-negative fraction such as 0.05 or 5%, got {text!r}")
    return value + 0.0  # -0 reads as 0
