"""How a test is gated: the gate's own settings record (the plugin's config fills it)."""

from __future__ import annotations

from dataclasses import dataclass

LATENCY_MODES = ("normalized", "absolute")


@dataclass(frozen=True)
class GateSettings:
    """How one test is gated (run settings overridden by its marker)."""

    threshold: float = 0.05
    alpha: float = 0.01
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
