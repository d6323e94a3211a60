"""Latency budgets (service levels): a figure's quantile judged against a budget with a
distribution-free binomial bound, the way MLPerf LoadGen's early stopping does.

Pure: budgets are parsed from what users write (units by :mod:`pytest_ortperf.units`),
verdicts computed from injected values; the recorder measures.

**The bound.** The number of values above the true ``q`` quantile among ``n`` is binomial
``Bin(n, 1 - q)``. The ``t``-th largest value is an upper bound of the quantile at
confidence ``1 - alpha`` for the largest ``t`` with ``P(Bin(n, 1 - q) <= t) < alpha``
(:func:`bound_rank`; LoadGen's criterion, one value more careful than the bare order
statistic). The lower bound mirrors it. A budget is

- ``met`` when the upper bound is at most the budget (equivalently: ``k`` values over the
  budget and ``P(Bin(n, 1 - q) <= k + 1) < alpha``);
- ``violated`` when the lower bound is over the budget;
- ``inconclusive`` otherwise, with the values that would decide it: how many more, all
  within the budget, would make it ``met`` (:func:`calls_needed`).

With no value over the budget, :func:`calls_needed` is LoadGen's minimum: 64 calls for a
p90 and 662 for a p99 at 99% confidence (the bare order statistic would take 44 and 459).

**Measuring on** (:func:`keep_measuring`, per-call budgets): the first look is at what the
measurement took; while a budget is undecided, more calls are measured up to the next of
an eighth, a quarter, half and all of the cap (:func:`cap_calls`: :data:`CAP_FACTOR` times
the calls a first decision takes, at most :data:`MAX_SLO_CALLS`; 13,808 for a p99 at alpha
0.01), and looked at again. At most :data:`LOOKS` looks, each at ``alpha / LOOKS``: looking
again cannot raise the chance of a wrong ``violated`` (or ``met``) past ``alpha``.

**Machine classes** (:func:`select`): a budget is for ``"any"`` machine or for a class named
by words of its CPU model and, optionally, its effective CPUs (``"Xeon 8375C, 2 CPUs"``);
the most specific match applies, and a machine that none names is ``not_gated``.

Rates (calls per second) are floors: judged as the negated values against the negated
budget. Medians of few values (a latency's blocks, a cold start's launches, a throughput
level's windows) are judged the same way, with ``q = 0.5``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from pytest_ortperf.results import SloVerdict
from pytest_ortperf.units import format_seconds, parse_rate, parse_seconds

if TYPE_CHECKING:
    from pytest_ortperf.measuring.percall import PerCallSamples
    from pytest_ortperf.results import PerCallResult

KINDS = ("latency", "per_call", "throughput", "cold_start")
"""The measurements that take an ``slo=``."""

COLD_START_KEYS = ("create", "first_run", "new_shape")
MAX_QUANTILE = 0.999
"""The most extreme quantile a budget may name (p99.9): a decision on it takes thousands of
calls, one on p99.99 tens of thousands."""

MAX_BUDGETS = 32
"""The most budgets (figures times machine classes) one measurement takes."""

LOOKS = 6
"""The most looks a measurement that keeps measuring takes at its data: each at
``alpha / LOOKS`` (Bonferroni), so that looking again never raises the overall error."""

CAP_FACTOR = 16
"""A measurement kept going for a budget stops at this many times the calls its first
decision can take (:func:`cap_calls`)."""

MAX_SLO_CALLS = 200_000
"""The most calls a measurement is kept going to, whatever the quantile."""

ANY_MACHINE = ("any", "*")
"""Machine-class keys that match every machine."""

_MACHINE = re.compile(r"^(?P<model>.*?)\s*(?:,\s*(?P<cpus>\d+)\s*CPUs?)?\s*$", re.IGNORECASE)
_QUANTILE = re.compile(r"^p(\d+(?:\.\d+)?)$")


class SloError(ValueError):
    """A bad ``slo=``: the message names the test and the key at fault."""


@dataclass(frozen=True)
class Budget:
    """One figure's budget: its ``q`` quantile at most ``limit`` (seconds), or, for a
    ``floor`` (calls per second), its ``q`` quantile at least ``limit``."""

    figure: str
    q: float
    limit: float
    floor: bool = False

    @property
    def label(self) -> str:
        """``p99``, ``median``, ``create median``, ``4 threads median``."""
        from pytest_ortperf.gating.tails import quantile_label

        if self.figure == "median" or _QUANTILE.match(self.figure):
            return self.figure
        return f"{self.figure} {'median' if self.q == 0.5 else quantile_label(self.q)}"

    def show(self, value: float) -> str:
        return f"{value:.4g}/s" if self.floor else format_seconds(value)


@dataclass(frozen=True)
class MachineBudgets:
    """The budgets of one machine class: ``model`` (lower case; each of its words must be
    part of the CPU model) and ``cpus`` (effective CPUs), either None for any."""

    machine: str
    model: str | None
    cpus: int | None
    budgets: tuple[Budget, ...]

    def matches(self, cpu_model: str | None, cpus: int | None) -> bool:
        text = (cpu_model or "").lower()
        if self.model is not None and not all(w in text for w in self.model.split()):
            return False
        return self.cpus is None or self.cpus == cpus

    @property
    def specificity(self) -> tuple[bool, int]:
        return self.cpus is not None, len((self.model or "").split())


def _where(test: str, kind: str) -> str:
    return f"{test}: ortperf.{kind}(slo=...)" if kind in KINDS else f"{test}: {kind}"


def parse_slo(
    kind: str, spec: Any, test: str = "", where: str | None = None
) -> tuple[MachineBudgets, ...]:
    """The budgets of ``spec`` for a measurement of ``kind`` (:data:`KINDS`), per machine
    class; :class:`SloError` naming ``test`` and the key for a bad one.

    ``spec`` is the flat form of the kind (``"5 ms"`` for ``latency``; ``{"p99": "20
    ms"}`` for ``per_call``; ``{4: "1500/s"}`` for ``throughput``; ``{"create": "2 s"}`` for
    ``cold_start``), for any machine; or a mapping from machine classes to flat forms:
    ``"any"``, a part of the CPU model (``"Xeon 8375C"``), optionally with the effective CPUs
    (``"Xeon 8375C, 2 CPUs"``).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown slo kind {kind!r}")
    at = where or _where(test, kind)
    flat = (
        not isinstance(spec, Mapping)
        if kind == "latency"
        else not (
            isinstance(spec, Mapping)
            and spec
            and all(isinstance(v, Mapping) for v in spec.values())
        )
    )
    per_machine = {"any": spec} if flat else dict(spec)
    if not per_machine:
        raise SloError(f"{at}: slo has no budget")
    out = []
    for machine, flat_spec in per_machine.items():
        if not isinstance(machine, str) or not machine.strip():
            raise SloError(
                f"{at}: machine class {machine!r} must be text such as 'any' or "
                "'Xeon 8375C, 2 CPUs'"
            )
        budgets = _flat(kind, flat_spec, at, "" if flat else f"[{machine!r}]")
        key = machine.strip()
        if not flat and (_QUANTILE.match(key.lower()) or key in COLD_START_KEYS):
            raise SloError(
                f"{at}: {machine!r} is a figure, not a machine class: this measurement's "
                f"budget is {_EXAMPLES[kind]}"
            )
        if key.lower() in ANY_MACHINE:
            out.append(MachineBudgets("any", None, None, budgets))
            continue
        match = _MACHINE.match(key)
        assert match is not None  # the pattern matches any text
        cpus = None if match["cpus"] is None else int(match["cpus"])
        model = match["model"].strip().lower() or None
        if cpus is not None and cpus < 1:
            raise SloError(f"{at}: machine class {machine!r} must have at least 1 CPU")
        out.append(MachineBudgets(key, model, cpus, budgets))
    if sum(len(m.budgets) for m in out) > MAX_BUDGETS:
        raise SloError(
            f"{at}: at most {MAX_BUDGETS} budgets, got {sum(len(m.budgets) for m in out)}"
        )
    return tuple(out)


def _flat(kind: str, spec: Any, at: str, prefix: str) -> tuple[Budget, ...]:
    if kind == "latency":
        return (Budget("median", 0.5, _value(spec, False, f"{at}{prefix}")),)
    if not isinstance(spec, Mapping) or not spec:
        raise SloError(
            f"{at}{prefix}: slo must be a mapping such as {_EXAMPLES[kind]}, got {spec!r}"
        )
    out = []
    for key, value in spec.items():
        named = f"{at}{prefix}[{key!r}]"
        if kind == "per_call":
            q = _quantile_key(key, named)
            out.append(Budget(f"p{q * 100:g}", q, _value(value, False, named)))
        elif kind == "throughput":
            if isinstance(key, bool) or not isinstance(key, int) or key < 1:
                raise SloError(
                    f"{named}: a throughput budget is keyed by a thread count "
                    "such as 4 (one of concurrency=)"
                )
            out.append(Budget(f"{key} threads", 0.5, _value(value, True, named), floor=True))
        else:
            if key not in COLD_START_KEYS:
                from pytest_ortperf.text import did_you_mean

                raise SloError(
                    f"{named}: a cold-start budget is keyed by one of "
                    f"{', '.join(COLD_START_KEYS)}"
                    f"{did_you_mean([key], COLD_START_KEYS)}"
                )
            out.append(Budget(str(key), 0.5, _value(value, False, named)))
    return tuple(out)


_EXAMPLES = {
    "latency": "one duration of the median such as '5 ms'",
    "per_call": "{'p99': '20 ms', 'p50': '4 ms'}",
    "throughput": "{4: '1500/s'}",
    "cold_start": "{'create': '2 s', 'first_run': '50 ms'}",
}


def _quantile_key(key: Any, named: str) -> float:
    match = _QUANTILE.match(str(key).strip().lower()) if isinstance(key, str) else None
    q = float(match[1]) / 100 if match else math.nan
    if not 0 < q <= MAX_QUANTILE:
        raise SloError(
            f"{named}: a per-call budget is keyed by a quantile from p1 to "
            f"p{MAX_QUANTILE * 100:g}, such as 'p99' or 'p50'"
        )
    return q


def _value(value: Any, rate: bool, named: str) -> float:
    try:
        number = parse_rate(value) if rate else parse_seconds(value)
    except ValueError as exc:
        raise SloError(f"{named}: the budget {exc}") from None
    if not number > 0:
        raise SloError(f"{named}: the budget must be positive, got {value!r}")
    return number


def select(
    classes: Sequence[MachineBudgets], cpu_model: str | None, cpus: int | None
) -> MachineBudgets | None:
    """The budgets for this machine: the most specific class that matches it (one with
    its CPUs over one without; more words of the model over fewer), None when none does.
    Two equally specific matches are a :class:`SloError`."""
    found = [m for m in classes if m.matches(cpu_model, cpus)]
    if not found:
        return None
    best = max(m.specificity for m in found)
    tied = [m for m in found if m.specificity == best]
    if len(tied) > 1:
        raise SloError(
            f"machine classes {[m.machine for m in tied]} all match this machine "
            f"({cpu_model}, {cpus} CPUs): make one more specific"
        )
    return tied[0]


def describe_machine(cpu_model: str | None, cpus: int | None) -> str:
    """This machine's class as a budget key would name it: ``"<CPU model>, 2 CPUs"``."""
    return f"{cpu_model or 'unknown CPU'}, {cpus if cpus else '?'} CPUs"


# ------------------------------------------------------------------ the binomial bound


def binom_cdf(k: int, n: int, p: float) -> float:
    """``P(Bin(n, p) <= k)``."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    from pytest_ortperf.stats import regularized_beta

    return regularized_beta(n - k, k + 1, 1.0 - p)


@cache
def bound_rank(n: int, q: float, alpha: float) -> int:
    """The largest ``t >= 1`` with ``P(Bin(n, 1 - q) <= t) < alpha``: the ``t``-th largest
    of ``n`` values bounds their ``q`` quantile from above at confidence ``1 - alpha``; 0
    when ``n`` values are too few for any bound."""
    lo, hi = 0, n - 1  # cdf(t) grows with t; find the last t with cdf(t) < alpha
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if binom_cdf(mid, n, 1.0 - q) < alpha:
            lo = mid
        else:
            hi = mid - 1
    return lo


@cache
def calls_needed(q: float, confidence: float, over: int = 0) -> int:
    """The fewest values that make a ``q`` quantile budget ``met`` at ``confidence`` with
    ``over`` of them over the budget: the least ``n`` with ``P(Bin(n, 1 - q) <= over + 1)
    < 1 - confidence`` (64 for p90 and 662 for p99 at 0.99 with none over)."""
    alpha = 1.0 - confidence
    if not (0 < q < 1 and 0 < alpha < 1 and over >= 0):
        raise ValueError(
            f"calls_needed: q and confidence in (0, 1), over >= 0; got {q}, {confidence}, {over}"
        )
    hi = over + 2
    while binom_cdf(over + 1, hi, 1.0 - q) >= alpha:
        hi *= 2
    lo = hi // 2
    while lo < hi:
        mid = (lo + hi) // 2
        if binom_cdf(over + 1, mid, 1.0 - q) < alpha:
            hi = mid
        else:
            lo = mid + 1
    return hi


def cap_calls(q: float, alpha: float) -> int:
    """How many calls a measurement is kept going to for a ``q`` quantile budget:
    :data:`CAP_FACTOR` times the fewest that can meet it at ``alpha / LOOKS``, at most
    :data:`MAX_SLO_CALLS`."""
    return min(MAX_SLO_CALLS, CAP_FACTOR * calls_needed(q, 1.0 - alpha / LOOKS))


def look_points(budgets: Sequence[Budget], alpha: float) -> list[int]:
    """The call counts at which a measurement kept going looks again: an eighth, a
    quarter, half of the cap, and the cap."""
    cap = max(cap_calls(b.q, alpha) for b in budgets)
    return [cap // 8, cap // 4, cap // 2, cap]


def judge(
    values: Sequence[float],
    budget: Budget,
    alpha: float,
    *,
    unit: str = "calls",
    preempted: Sequence[float] = (),
    machine: str = "any",
    looks: int = 1,
) -> SloVerdict:
    """The verdict on ``budget`` from ``values`` (and ``preempted``: values measured while
    the thread was preempted, judged with the rest and counted apart), each look at
    ``alpha / looks``."""
    from pytest_ortperf.stats import quantile

    look_alpha = alpha / looks
    sign = -1.0 if budget.floor else 1.0
    q = 1.0 - budget.q if budget.floor else budget.q
    limit = sign * budget.limit
    ordered = sorted(sign * v for v in (*values, *preempted))
    n = len(ordered)
    over = sum(1 for v in ordered if v > limit)
    over_preempted = sum(1 for v in preempted if sign * v > limit)
    t = bound_rank(n, q, look_alpha)
    s = bound_rank(n, 1.0 - q, look_alpha)
    upper = ordered[n - t] if t else math.inf
    lower = ordered[s - 1] if s else -math.inf
    estimate = quantile(ordered, q) if n else math.nan
    if upper <= limit:
        outcome = "met"
    elif lower > limit:
        outcome = "violated"
    else:
        outcome = "inconclusive"
    more = 0
    if outcome == "inconclusive":
        more = calls_needed(q, 1.0 - look_alpha, over) - n
    low, high = (-upper, -lower) if budget.floor else (lower, upper)
    est = sign * estimate
    confidence = 1.0 - look_alpha
    verdict = SloVerdict(
        figure=budget.label,
        outcome=outcome,
        budget=budget.limit,
        floor=budget.floor,
        estimate=est,
        low=low,
        high=high,
        n=n,
        unit=unit,
        over=over,
        over_preempted=over_preempted,
        more=more,
        confidence=confidence,
        machine=machine,
        message="",
    )
    return _with_message(verdict, budget)


def _with_message(v: SloVerdict, budget: Budget) -> SloVerdict:
    """``p99 of 1200 calls: 1.02 ms (0.98 ms to 1.10 ms at 99.83% confidence); budget
    50.0 ms: met, 0 calls over the budget``."""
    import dataclasses

    show = budget.show
    low, high = math.isfinite(v.low), math.isfinite(v.high)
    if low and high:
        bounds = f"{show(v.low)} to {show(v.high)}"
    elif low or high:
        bounds = f"at least {show(v.low)}" if low else f"at most {show(v.high)}"
    else:
        bounds = f"too few {v.unit} for a bound"
    word = "below" if budget.floor else "over"
    preempted = f" ({v.over_preempted} of them preempted)" if v.over_preempted else ""
    text = (
        f"{v.figure} of {v.n} {v.unit}: {show(v.estimate)} ({bounds} at "
        f"{v.confidence * 100:.4g}% confidence); budget {show(v.budget)}: {v.outcome}, "
        f"{v.over} {v.unit} {word} the budget{preempted}"
    )
    if v.outcome == "inconclusive":
        text += f"; {v.more} more {v.unit}, all within the budget, would meet it"
    if v.machine != "any":
        text += f" [budget for {v.machine}]"
    return dataclasses.replace(v, message=text)


def not_gated(machine: str) -> SloVerdict:
    """The verdict where no budget names this machine's class: reported, not gated."""
    return SloVerdict(
        figure="-",
        outcome="not_gated",
        budget=math.nan,
        floor=False,
        estimate=math.nan,
        low=math.nan,
        high=math.nan,
        n=0,
        unit="calls",
        over=0,
        over_preempted=0,
        more=0,
        confidence=math.nan,
        machine=machine,
        message=f"no budget for this machine class ({machine}): reported, not gated",
    )


def judge_all(
    classes: Sequence[MachineBudgets],
    values_of: Mapping[str, Sequence[float]],
    alpha: float,
    *,
    cpu_model: str | None,
    cpus: int | None,
    unit: str = "calls",
    preempted_of: Mapping[str, Sequence[float]] | None = None,
    looks: int = 1,
) -> tuple[SloVerdict, ...]:
    """Every budget of this machine's class, each figure's values from ``values_of``
    (keyed by :attr:`Budget.figure`; a figure without values is skipped)."""
    chosen = select(classes, cpu_model, cpus)
    if chosen is None:
        return (not_gated(describe_machine(cpu_model, cpus)),)
    out = []
    for budget in chosen.budgets:
        values = values_of.get(budget.figure)
        if values is None:
            continue
        out.append(
            judge(
                values,
                budget,
                alpha,
                unit=unit,
                machine=chosen.machine,
                looks=looks,
                preempted=(preempted_of or {}).get(budget.figure, ()),
            )
        )
    return tuple(out)


def keep_measuring(
    first: Sequence[float],
    more: Callable[[int], Sequence[float]],
    budgets: Sequence[Budget],
    alpha: float,
    *,
    machine: str = "any",
    preempted: Sequence[float] = (),
) -> tuple[list[float], tuple[SloVerdict, ...]]:
    """Values and verdicts of a measurement kept going while a budget is undecided.

    Looks at ``first``; while some budget is inconclusive, asks ``more(m)`` for ``m``
    more values, up to the next of :func:`look_points`, and looks again: at most
    :data:`LOOKS` looks, each at ``alpha / LOOKS``, and no more values than the cap. Stops
    early when ``more`` gives nothing (it could not measure). ``preempted``: values taken
    while the thread was preempted, judged with the rest and counted apart (a list that
    ``more`` may add to)."""
    values = list(first)
    points = look_points(budgets, alpha)
    looks = 0
    while True:
        looks += 1
        verdicts = tuple(
            judge(values, b, alpha, machine=machine, looks=LOOKS, preempted=preempted)
            for b in budgets
        )
        n = len(values) + len(preempted)
        if all(v.outcome != "inconclusive" for v in verdicts) or looks >= LOOKS:
            return values, verdicts
        following = [p for p in points if p > n]
        if not following:
            return values, verdicts
        extra = more(following[0] - n)
        if not extra:
            return values, verdicts
        values.extend(extra)


def failure_message(
    test_name: str, verdicts: Sequence[SloVerdict], *, strict: bool = False
) -> str | None:
    """The test's failure text for its violated budgets (and, when ``strict``, as
    ``--ortperf-strict`` asks, its inconclusive ones), None when none is."""
    failing = ("violated", "inconclusive") if strict else ("violated",)
    failed = [v for v in verdicts if v.outcome in failing]
    if not failed:
        return None
    what = "violated its" if any(v.outcome == "violated" for v in failed) else "could not decide"
    lines = [f"ortperf: {test_name!r} {what} latency budget"]
    lines += [f"  {v.outcome.upper()} {v.message}" for v in failed]
    return "\n".join(lines)


# ------------------------------------------------------------------ what the recorder asks


def _guess_kind(spec: Any) -> str:
    """The kind whose flat form ``spec`` (or its first machine class's) looks like: for
    the error of a marker's ``slo=`` that fits none."""
    if isinstance(spec, Mapping) and spec and all(isinstance(v, Mapping) for v in spec.values()):
        spec = next(iter(spec.values()))
    if not isinstance(spec, Mapping):
        return "latency"
    keys = list(spec)
    if all(isinstance(k, int) for k in keys):
        return "throughput"
    if any(isinstance(k, str) and k in COLD_START_KEYS for k in keys):
        return "cold_start"
    if any(isinstance(k, str) and _QUANTILE.match(k.strip().lower()) for k in keys):
        return "per_call"
    return "latency"  # a mapping of machine classes to durations


def check_marker_slo(spec: Any, test: str) -> tuple[str, ...]:
    """The kinds a marker's ``slo=`` applies to (those whose form it has); a
    :class:`SloError` naming the test when it fits none."""
    where = f"{test}: @pytest.mark.ortperf(slo=...)"
    kinds = []
    for kind in KINDS:
        try:
            parse_slo(kind, spec, test, where)
        except SloError:
            continue
        kinds.append(kind)
    if not kinds:
        parse_slo(_guess_kind(spec), spec, test, where)  # raises, naming the key at fault
        raise SloError(f"{where}: fits no measurement")  # pragma: no cover - defensive
    return tuple(kinds)


def budgets_for(
    kind: str, slo: Any, marker_slo: Any, test: str
) -> tuple[MachineBudgets, ...] | None:
    """The budgets of one measurement: its own ``slo=``, else the marker's where that has
    this kind's form; None without either."""
    if slo is not None:
        return parse_slo(kind, slo, test)
    if marker_slo is None or kind not in check_marker_slo(marker_slo, test):
        return None
    return parse_slo(kind, marker_slo, test, f"{test}: @pytest.mark.ortperf(slo=...)")


def min_values(classes: Sequence[MachineBudgets], alpha: float) -> int:
    """The fewest values (windows, launches) that can decide every budget of ``classes``
    at ``alpha`` (11 for a median at 0.01)."""
    return max((calls_needed(b.q, 1.0 - alpha) for m in classes for b in m.budgets), default=1)


def judge_per_call(
    result: PerCallResult,
    first: PerCallSamples,
    classes: Sequence[MachineBudgets],
    alpha: float,
    more: Callable[[int], PerCallSamples | None],
    *,
    cpu_model: str | None,
    cpus: int | None,
) -> tuple[PerCallResult, tuple[SloVerdict, ...]]:
    """A per-call measurement's budgets for this machine's class, judged on its single
    calls and those of its preempted rounds (``first``: the measurement ``result`` came
    from), measured on with ``more(m)`` (``m`` more calls; None: no more) while one is
    undecided; ``result`` with the further calls added (:func:`extend_per_call`)."""
    chosen = select(classes, cpu_model, cpus)
    if chosen is None:
        return result, (not_gated(describe_machine(cpu_model, cpus)),)
    chunks: list[PerCallSamples] = []
    preempted = [max(0.0, (x - first.timer_ns) * 1e-9) for x in first.preempted_ns]

    def calls(m: int) -> list[float]:
        chunk = more(m)
        if chunk is None:
            return []
        chunks.append(chunk)
        preempted.extend(max(0.0, (x - chunk.timer_ns) * 1e-9) for x in chunk.preempted_ns)
        return [max(0.0, (x - chunk.timer_ns) * 1e-9) for x in chunk.calls_ns]

    _, verdicts = keep_measuring(
        result.corrected, calls, chosen.budgets, alpha, machine=chosen.machine,
        preempted=preempted,
    )  # fmt: skip
    return extend_per_call(result, chunks), verdicts


def extend_per_call(result: PerCallResult, chunks: Sequence[PerCallSamples]) -> PerCallResult:
    """``result`` with the single calls of ``chunks`` (later measurements of its target)
    appended: each chunk's calls shifted by the difference of its timer cost to the
    result's (so every call is corrected by its own chunk's), rounds of the greatest common
    divisor of the chunks' round sizes (round boundaries stay boundaries)."""
    import dataclasses

    if not chunks:
        return result
    calls = list(result.calls)
    blocks = list(result.blocks)
    round_size = result.calls_per_round
    for chunk in chunks:
        shift = result.timer_cost - chunk.timer_ns * 1e-9
        calls.extend(x * 1e-9 + shift for x in chunk.calls_ns)
        blocks.extend(chunk.blocks)
        round_size = math.gcd(round_size, chunk.calls_per_round)
    return dataclasses.replace(
        result,
        calls=tuple(calls),
        blocks=tuple(blocks),
        calls_per_round=round_size,
        preempted=result.preempted + sum(c.preempted for c in chunks),
        preempted_kept=result.preempted_kept or any(c.preempted_kept for c in chunks),
    )


def check_figures(
    classes: Sequence[MachineBudgets], figures: Sequence[str], kind: str, test: str
) -> None:
    """A :class:`SloError` for a budget of a figure the measurement does not take (a
    thread count missing from ``concurrency=``)."""
    known = set(figures)
    for machine in classes:
        for budget in machine.budgets:
            if budget.figure not in known:
                raise SloError(
                    f"{_where(test, kind)}: a budget for {budget.figure}, which this "
                    f"measurement does not take (it takes {', '.join(figures)})"
                )


# ------------------------------------------------------------------ what the reports show

TABLE_HEADER = (
    "latency budget",
    "figure",
    "verdict",
    "estimate",
    "bounds",
    "budget",
    "headroom",
    "n",
)
"""The columns of :func:`table_row`."""


def _show(value: float, floor: bool) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:.4g}/s" if floor else format_seconds(value)


def table_row(measurement: str, v: SloVerdict) -> tuple[str, ...]:
    """One verdict as a report's table row (:data:`TABLE_HEADER`)."""
    if v.outcome == "not_gated":
        return (measurement, "-", "not gated", "-", "-", f"none for {v.machine}", "-", "-")
    bounds = f"[{_show(v.low, v.floor)}, {_show(v.high, v.floor)}]"
    headroom = f"{v.headroom:+.1%}" if math.isfinite(v.headroom) else "-"
    floor = ">= " if v.floor else ""
    return (
        measurement,
        v.figure,
        v.outcome,
        _show(v.estimate, v.floor),
        bounds,
        f"{floor}{_show(v.budget, v.floor)}",
        headroom,
        str(v.n),
    )


def summary_text(verdicts: Sequence[Mapping[str, Any]]) -> str:
    """The budgets of a record's dict in a line: ``budgets: p99 met (headroom +95.0%)``."""
    parts = []
    for data in verdicts:
        v = SloVerdict.from_dict(data)
        if v.outcome == "not_gated":
            parts.append(f"not gated (no budget for {v.machine})")
            continue
        room = f" (headroom {v.headroom:+.1%})" if math.isfinite(v.headroom) else ""
        parts.append(f"{v.figure} {v.outcome}{room}")
    return "budgets: " + ", ".join(parts)
