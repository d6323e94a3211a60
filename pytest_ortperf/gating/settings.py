"""How a test is gated: the gate's own settings record (the plugin's config fills it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GateSettings:
    """How one test is gated (run settings overridden by its marker)."""

    threshold: float = 0.05
    alpha: float = 0.01
    strict: bool = False
    structure: bool = True
    confirm: bool = True
    latency_threshold: float | None = None
    """Threshold of absolute latencies (None: ``threshold``): run-to-run drift of a
    machine adds to them, not to ratios measured side by side."""
