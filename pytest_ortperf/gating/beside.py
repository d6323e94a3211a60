"""A latency judged beside the baseline's own model (issue 23): the entry fields, the
verdicts and their words. Pure: no I/O, no onnxruntime.

At ``--ortperf-update`` a gated latency entry keeps its ``recipe`` (the hashes of what
determines its speed, :class:`pytest_ortperf.measuring.recipe.Recipe`) and a ``beside``
ratio baseline: two fresh sessions of the same model measured interleaved (an A/A
comparison), whose true ratio is 1 and whose spread is the baseline's between-pair variance,
set beside a later check's own. A check whose recipe differs rebuilds the baseline's session
from the artifact store (or, a committed model, git's history) and measures today's target
against it, interleaved: the ratio today / baseline-now is judged by the ratio rule
(:func:`~pytest_ortperf.gating.rules.judge_ratio`) against that A/A baseline, so neither
the CPU model nor the machine's drift since the baseline matters. A check whose recipe is
unchanged cannot have regressed by anything the team controls: :func:`unchanged_verdict`
never fails.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_ortperf.gating.baseline_judge import measurement_warnings, ratio_baseline_of
from pytest_ortperf.gating.baseline_schema import BESIDE, BESIDE_RATIOS
from pytest_ortperf.gating.gate import Gate
from pytest_ortperf.gating.rules import downgrade, judge_ratio
from pytest_ortperf.results import PROCESSES, Outcome, Verdict
from pytest_ortperf.stats import median, paired_ratio
from pytest_ortperf.units import format_change, format_interval

MODE = "judged"
"""Key of a recorded payload that says how its latency was judged: ``beside``,
``unchanged``, or the fallback mode with its reason."""

KEEP_ARTIFACTS = (
    "keep the artifact store between runs (.ortperf/artifacts in the CI cache, or "
    "$ORTPERF_ARTIFACTS, or ini ortperf_artifacts = store) and take the baseline again "
    "with --ortperf-update"
)
"""How to keep artifacts, as a fallback verdict says it."""


def beside_fields(comparison: Mapping[str, Any]) -> dict[str, Any]:
    """What an entry keeps of an A/A comparison record (``Comparison.to_dict()``): its
    summary (:data:`~pytest_ortperf.gating.baseline_schema.BESIDE`) and its block ratios
    (:data:`~pytest_ortperf.gating.baseline_schema.BESIDE_RATIOS`, in the samples file)."""
    ratios = [float(x) for x in comparison["block_ratios"]]
    summary: dict[str, Any] = {
        "ratio": float(comparison["ratio"]),
        "low": float(comparison["low"]),
        "high": float(comparison["high"]),
        "confidence": float(comparison["confidence"]),
        "n": len(ratios),
    }
    runs = [int(r) for r in comparison.get("runs") or ()]
    if len(runs) > 1 and sum(runs) == len(ratios):
        summary["runs"] = runs
    return {BESIDE: summary, BESIDE_RATIOS: ratios}


def merge_beside(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The A/A ratio baselines of one entry taken in several processes
    (``--ortperf-update-processes``; ``parts``: each process's payload, carrying
    :func:`beside_fields`) as one: every process's runs in order, ``processes`` the runs each
    took, so that a check judged beside the baseline's model allows for the spread between
    processes that its one process cannot show."""
    ratios = [float(x) for part in parts for x in part[BESIDE_RATIOS]]
    each = [[int(n) for n in part[BESIDE].get("runs") or [len(part[BESIDE_RATIOS])]]
            for part in parts]  # fmt: skip
    confidence = float(parts[0][BESIDE].get("confidence") or 0.95)
    estimate = paired_ratio(ratios, confidence)
    fields = beside_fields(
        {"block_ratios": ratios, "ratio": estimate.ratio, "low": estimate.low,
         "high": estimate.high, "confidence": confidence,
         "runs": [n for runs in each for n in runs]}
    )  # fmt: skip
    fields[BESIDE][PROCESSES] = [len(runs) for runs in each]
    return fields


def as_compare_entry(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The entry's A/A ratio baseline in a compare entry's shape (what
    :func:`~pytest_ortperf.gating.baseline_judge.ratio_baseline_of` reads); None when the
    entry has none."""
    beside, ratios = entry.get(BESIDE), entry.get(BESIDE_RATIOS)
    if not isinstance(beside, Mapping) or not ratios:
        return None
    return {"kind": "compare", "api": entry.get("api"), **beside, "block_ratios": ratios}


def judge_beside(
    record: Mapping[str, Any],
    entry: Mapping[str, Any] | None,
    *,
    threshold: float,
    alpha: float,
) -> list[Verdict]:
    """The ``latency`` verdict of a comparison record (reference: the baseline's model
    rebuilt now, candidate: today's) against the A/A ratio baseline ``entry`` (from
    :func:`as_compare_entry`), with the measurement's warnings. Its figures are seconds:
    the baseline's model's median now, and today's (that median scaled by the change)."""
    baseline = ratio_baseline_of(entry)
    if baseline is None:
        raise ValueError("judge_beside needs an entry with block ratios (as_compare_entry)")
    ratios = [float(x) for x in record["block_ratios"]]
    # Shown in seconds: the baseline's model now, today's scaled by the change.
    shown = median([float(x) for x in (record.get("reference") or {}).get("samples") or ()] or [1])
    verdict = judge_ratio(
        ratios, baseline, threshold=threshold, alpha=alpha, metric="latency",
        shown_baseline=shown, runs=record.get("runs"),
    )  # fmt: skip
    message = verdict.message.replace(" normalized by its control,", " its model run beside,")
    verdict = dataclasses.replace(verdict, message=message)
    notes, trusted, _ = measurement_warnings(record)
    if notes:
        verdict = (
            dataclasses.replace(verdict, message=verdict.message + "; " + "; ".join(notes))
            if trusted
            else downgrade(verdict, "; ".join(notes))
        )
    return [verdict]


class BesideGate(Gate):
    """The gate's procedure (session pairs, extension, confirmation: :meth:`Gate.decide`)
    with :func:`judge_beside` as its judge: the entry it is given is the A/A baseline."""

    @classmethod
    def of(cls, gate: Gate) -> BesideGate:
        return cls(gate.settings, gate.baselines, gate.environment, None, gate.clock)

    def threshold_of(self, entry: Mapping[str, Any] | None) -> float:
        """A latency's threshold: the entry it is given is a compare-shaped A/A baseline."""
        return self.settings.of_latencies

    def judge(self, record: Mapping[str, Any], entry: Mapping[str, Any] | None) -> list[Verdict]:
        threshold = self.threshold_of(entry)
        return judge_beside(record, entry, threshold=threshold, alpha=self.settings.alpha)


def beside_verdict(
    verdict: Verdict, model_sha256: str, changed: Sequence[str], *, whose: str = "model"
) -> Verdict:
    """``verdict`` (of :func:`judge_beside`) in the words of a latency judged beside the
    baseline's model: ``latency +8.1% [+6.9%, +9.3%] against the baseline's model (sha
    1a2b3c4d), run beside it now -> regressed; changed: ...``, the rule's details after.
    ``whose="candidate"``: a compare's candidate against the baseline's candidate."""
    what = "latency" if whose == "model" else f"{whose} latency"
    head = (
        f"{what} {format_change(verdict.change)} {format_interval(verdict.low, verdict.high)} "
        f"against the baseline's {whose} (sha {model_sha256[:8]}), run beside it now -> "
        f"{verdict.outcome.value}"
    )
    diff = "; changed: " + ", ".join(changed) if changed else ""
    return dataclasses.replace(verdict, message=f"{head}{diff} ({verdict.message})")


UNCHANGED = "unchanged: model, settings and onnxruntime identical to the baseline"
SKIPPED = "not measured: --ortperf-skip-unchanged"


def unchanged_verdict(
    figures: Sequence[Verdict], *, n: int = 0, threshold: float = 0.0, alpha: float = 0.0
) -> Verdict:
    """The verdict of a latency whose recipe equals the baseline's: ``ok``, whatever its
    figure (nothing the team controls changed: a slower figure is the machine's drift).
    ``figures``: what the usual mode read (empty: not measured, ``--ortperf-skip-unchanged``:
    no figures, NaN as a verdict without baseline has)."""
    timing = [v for v in figures if v.metric != "structure"]
    if not timing:
        nan = math.nan
        return Verdict(
            "latency", Outcome.OK, nan, nan, nan, nan, nan, threshold, alpha, None, n,
            f"{UNCHANGED} ({SKIPPED})",
        )  # fmt: skip
    first = timing[0]
    figure = first.message.split(" -> ")[0]
    message = f"{UNCHANGED} ({figure}); not gated on machine drift"
    return dataclasses.replace(first, outcome=Outcome.OK, message=message)


def fallback_verdicts(
    verdicts: Sequence[Verdict], reason: str, *, whose: str = "model"
) -> list[Verdict]:
    """``verdicts`` of today's mode, each timing one saying why the latency (``whose``:
    a compare's candidate) was not judged beside the baseline's (``reason``)."""
    subject = "" if whose == "model" else f"{whose} "
    note = f"; {subject}not judged beside the baseline's {whose}: {reason}"
    return [
        v if v.metric == "structure" else dataclasses.replace(v, message=v.message + note)
        for v in verdicts
    ]
