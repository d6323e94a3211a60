"""How a test is gated: the gate's own settings record (the plugin's config fills it)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ALPHA = 0.01
"""The gate's one-sided significance level unless set (``--ortperf-alpha``, ini
``ortperf_alpha``, the marker's ``alpha``, ``ortperf compare --alpha``, ``ortperf ab
--alpha``): the default of every rule that takes an ``alpha``."""
LATENCY_MODES = ("normalized", "absolute")
MIN_HISTORY_RUNS = 5
"""Fewest stored runs a history baseline gates with, for ratios as for latencies (the
latencies' :data:`pytest_ortperf.gating.history.MIN_RUNS`; here, so that validating the
options imports no statistics). A ratio's between-run spread is measured from the runs and
carried with runs - 1 degrees of freedom: the one-sided 99% t quantile is 31.8 from 2 runs,
6.96 from 3 and 4.54 from 4 (2.82 from 10): below 5, nothing could be gated."""
HISTORY_TAG = "history baseline"
"""Words in the message of every verdict judged against a history baseline
(:mod:`~pytest_ortperf.gating.history_baseline`): its failure hints and the summary's are
not about files."""
CHANGE_POINT_RUNS = 200
"""Runs change points are searched in by default: the newest complete runs (of the branch
and machine class asked for), so a report or ``ortperf changes`` on a fleet's large store
reads its recent history only."""
BASELINE_SOURCES = ("files", "history")
"""Where baselines come from: the committed ``__ortperf__/<module>.json`` files, or the
runs of a branch on a machine class in the results store (``--ortperf-baseline``)."""


@dataclass(frozen=True)
class GateSettings:
    """How one test is gated (run settings overridden by its marker)."""

    threshold: float = 0.05
    alpha: float = DEFAULT_ALPHA
    strict: bool = False
    structure: bool = True
    confirm: bool = True
    latency_threshold: float | None = None
    """Threshold of latencies (None: ``threshold``)."""
    latency_mode: str = "normalized"
    """``normalized``: a latency is measured interleaved with a control workload and its
    target/control ratio is gated; ``absolute``: its median is gated against the medians
    of earlier runs on the same fingerprint in the store."""
    fingerprint_ignore: tuple[str, ...] = ()
    """Fingerprint keys that may differ from the baseline's (``ortperf_fingerprint_ignore``)."""

    @property
    def of_latencies(self) -> float:
        """The threshold latencies are judged at: ``latency_threshold``, else ``threshold``."""
        return self.threshold if self.latency_threshold is None else self.latency_threshold


@dataclass(frozen=True)
class HistorySettings:
    """Which stored runs a history baseline pools (``--ortperf-baseline=history``)."""

    branch: str = "main"
    machine: str | None = None
    """Machine class (``machine.machine_fingerprint``) whose runs count; None: this machine's."""
    window: int = 10
    """The newest runs (on ``branch``, of ``machine``, holding the measurement) pooled."""
