"""One set of value checks, shared by the plugin (options, ini keys, the marker) and the
``ortperf`` command: seconds, thresholds, significance levels and counts, each with its
documented limits.

A check takes what the user wrote (text, or a number from a marker) and returns the value
or raises :class:`BadValue`, whose text says what is wrong without naming the option:
:meth:`BadValue.named` puts the option first (the plugin: ``--ortperf-budget must be ...``);
argparse names it itself (``argument --budget: must be ...``). A leaf module: standard
library and :mod:`pytest_ortperf.units` only.
"""

from __future__ import annotations

import math
import operator
import re

from pytest_ortperf.units import MAX_THRESHOLD, parse_fraction, threshold_problem

MAX_BUDGET_S = 600.0
"""The longest budget of one measurement (10 minutes): a measurement ends within a few
budgets (:meth:`~pytest_ortperf.measuring.engine.EngineConfig.cap_s`), and a larger value is far
more likely a typo (or ``inf``) than a wish to time one model for an hour."""

MIN_ALPHA = 1e-6
"""The smallest significance level: the blocks a gated measurement needs grow like
log2(1/alpha) (9 at 0.01, 22 at 1e-6, about a thousand at 1e-300), and a measurement stops
at its hard cap, so a tinier alpha could never be reached."""

MAX_ALPHA = 0.5
"""Significance levels are one-sided and below this (excluded)."""

MAX_HISTORY_WINDOW = 1000
"""The most runs a history baseline pools, and ``ortperf compare --window`` (a larger
window is a typo, or a slow query)."""

MAX_RUNS = 100_000
"""The most runs an ``ortperf`` command shows, reads or keeps (``--last``, ``--keep``)."""

MAX_THREADS = 1024
"""The most intra-op threads a session is asked for (0: onnxruntime's default)."""

MAX_PROFILED_RUNS = 10_000
"""The most profiled runs (``ortperf profile --runs``, ``ortperf ab --profile-runs``): each
run adds its events to the profile ORT writes and this process parses."""

MAX_UPDATE_PROCESSES = 10
"""Most processes one ``--ortperf-update`` takes its baselines in
(``--ortperf-update-processes``): each one runs the selected tests again."""

MAX_PROCESSES = 16
"""Most worker-process pairs one A/B may start (each pair is two processes:
``ortperf ab --processes``, ``ab(processes=)``)."""

MAX_WARMUP_RUNS = 1000
"""The most warm-up runs before a profile (``ortperf profile --warmup``)."""

SECONDS = f"more than 0 s and at most {MAX_BUDGET_S:g} s"
THRESHOLD = (
    "a fraction above 0 and below 1 such as 0.05, or a percentage up to "
    f"{MAX_THRESHOLD:.0%} such as 5%"
)
ALPHA = f"at least {MIN_ALPHA:g} and below {MAX_ALPHA:g}, such as 0.01 or 1%"
"""What each check accepts, in words (the ``(accepted: ...)`` of its errors)."""


class BadValue(ValueError):
    """A value a check refuses. ``str()`` is the problem and what is accepted, without
    the option's name (argparse prefixes it); :meth:`named` puts the name first."""

    def __init__(self, problem: str, accepted: str, *, value: str | None = None) -> None:
        self.problem = problem
        self.accepted = accepted
        self.value = value
        """Set when the problem starts with the value written (``5 means 500%``)."""
        shown = f"{value} {problem}" if value is not None else problem
        super().__init__(f"{shown} (accepted: {accepted})")

    def named(self, what: str) -> str:
        """The message with the option at fault first: ``--ortperf-alpha must be ...``,
        or ``ini ortperf_threshold=5 means 500%; ...``."""
        named = f"{what}={self.value}" if self.value is not None else what
        return f"{named} {self.problem} (accepted: {self.accepted})"


def seconds(value: object) -> float:
    """A duration in seconds (a number, or its text), finite, above 0 and at most
    :data:`MAX_BUDGET_S`."""
    try:
        if isinstance(value, bool):  # float(True) is 1.0
            raise TypeError
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise BadValue(f"must be a number of seconds, got {value!r}", SECONDS) from None
    if math.isnan(number) or math.isinf(number):
        raise BadValue(f"must be finite, got {value!r}", SECONDS)
    if not number > 0:
        raise BadValue(f"must be positive, got {value!r}", SECONDS)
    if number > MAX_BUDGET_S:
        raise BadValue(f"must be at most {MAX_BUDGET_S:g} s, got {value!r}", SECONDS)
    return number


def _positive_fraction(value: object, accepted: str) -> float:
    """A fraction above 0, finite, written ``0.05`` or ``5%``."""
    try:
        if isinstance(value, bool):
            raise ValueError(f"must be a fraction such as 0.05 or 5%, got {value!r}")
        number = parse_fraction(value)
    except ValueError as exc:
        raise BadValue(str(exc), accepted) from None
    if not number > 0:
        raise BadValue(f"must be positive, got {value!r}", accepted)
    return number


def threshold(value: object) -> float:
    """A relative change (a slowdown threshold, a smallest step): above 0 and below 1 as a
    plain fraction, up to :data:`~pytest_ortperf.units.MAX_THRESHOLD` (1000%) with ``%``.

    A plain number of 1 or more is refused with the likely fix rather than guessed at: as
    a fraction, ``5`` is 500% and would pass a tripled time as ``ok``."""
    number = _positive_fraction(value, THRESHOLD)
    problem = threshold_problem(value, number)
    if problem is not None:
        if problem.startswith("means"):
            raise BadValue(problem, THRESHOLD, value=str(value).strip())
        raise BadValue(problem, THRESHOLD)
    return number


def alpha(value: object) -> float:
    """A one-sided significance level: :data:`MIN_ALPHA` <= alpha < :data:`MAX_ALPHA`."""
    number = _positive_fraction(value, ALPHA)
    if not number < MAX_ALPHA:
        raise BadValue(f"must be below {MAX_ALPHA:g}, got {value!r}", ALPHA)
    if number < MIN_ALPHA:
        raise BadValue(
            f"must be at least {MIN_ALPHA:g}, got {value!r}: the blocks a gated measurement "
            "needs before a slowdown can be significant grow like log2(1/alpha), and a "
            "measurement stops at three times its budget",
            ALPHA,
        )
    return number


_WHOLE = re.compile(r"\s*[+-]?[0-9]+\s*")


def count(value: object, least: int, most: int, unit: str, *, below: str = "") -> int:
    """A whole number from ``least`` to ``most`` (an int, or its text) of ``unit``
    (``runs``, ``threads``...); ``below`` says why a smaller one is refused."""
    accepted = f"a whole number of {unit} from {least} to {most}"
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _WHOLE.fullmatch(value):
        number = int(value)
    else:
        raise BadValue(f"must be a whole number of {unit}, got {value!r}", accepted)
    if not least <= number <= most:
        why = f": {below}" if below and number < least else ""
        raise BadValue(f"must be from {least} to {most}, got {value!r}{why}", accepted)
    return number


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def flag(value: object) -> bool:
    """A switch: a bool, or ``true``/``false`` (``yes``/``no``, ``on``/``off``, ``1``/``0``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BadValue(f"must be true or false, got {value!r}", "true or false, yes or no, 1 or 0")


# The Python API's argument checks (per_call, throughput, cold_start): the same limits, in
# the words of a keyword argument rather than an option; numpy integers are accepted.


def check_count(what: str, value: object, low: int, high: int) -> int:
    """``value`` as a whole number from ``low`` to ``high``; else a ``ValueError`` naming
    ``what``, the value and the accepted range (``1.5``, ``True`` and ``"3"`` are refused,
    numpy integers accepted)."""
    accepted = f"a whole number from {low:,} to {high:,}"
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{what} must be {accepted}, got {value!r}") from None
    if not low <= number <= high:
        raise ValueError(f"{what} must be {accepted}, got {number:,}")
    return number


def check_seconds(what: str, value: object, high: float = MAX_BUDGET_S) -> float:
    """``value`` as seconds above 0 and at most ``high``; else a ``ValueError`` naming
    ``what`` and the accepted range (``inf`` and ``nan`` are refused)."""
    accepted = f"more than 0 s and at most {high:g} s"
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(
            f"{what} must be a number of seconds ({accepted}), got {value!r}"
        ) from None
    if not (math.isfinite(number) and 0 < number <= high):
        raise ValueError(f"{what} must be {accepted}, got {value!r}")
    return number
