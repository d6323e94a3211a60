"""Settings of a run, resolved from the command line, ini keys and the marker."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from .measure import EngineConfig

MARKER = "ortperf"
MARKER_KEYS = ("budget", "block")


def _positive_float(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{what} must be a number of seconds, got {value!r}") from None
    if not number > 0:
        raise pytest.UsageError(f"{what} must be positive, got {value!r}")
    return number


@dataclass(frozen=True)
class OrtperfConfig:
    """Run-wide settings: ``enabled`` is ``--ortperf``."""

    enabled: bool = False
    budget_s: float = 1.0
    store: str | None = None

    @classmethod
    def from_pytest(cls, config: pytest.Config) -> OrtperfConfig:
        budget = config.getoption("ortperf_budget", None)
        if budget is None:
            budget = _positive_float(config.getini("ortperf_budget"), "ini ortperf_budget")
        else:
            budget = _positive_float(budget, "--ortperf-budget")
        store = config.getoption("ortperf_store", None) or config.getini("ortperf_store") or None
        return cls(enabled=bool(config.getoption("ortperf", False)), budget_s=budget, store=store)

    def engine_config(self, marker: dict[str, Any]) -> EngineConfig:
        """The engine settings of one test: the run's, overridden by its marker."""
        engine = EngineConfig(budget_s=self.budget_s)
        try:
            if "budget" in marker:
                engine = replace(engine, budget_s=_positive_float(marker["budget"], "budget"))
            if "block" in marker:
                engine = replace(engine, block_s=_positive_float(marker["block"], "block"))
        except pytest.UsageError as exc:
            raise MarkerError(f"@pytest.mark.ortperf: {exc}") from None
        return engine


class MarkerError(ValueError):
    """A bad ``@pytest.mark.ortperf`` argument."""


def marker_settings(node: pytest.Item) -> dict[str, Any]:
    """Keyword arguments of the closest ``@pytest.mark.ortperf`` (unknown keys rejected)."""
    marker = node.get_closest_marker(MARKER)
    if marker is None:
        return {}
    if marker.args:
        raise MarkerError(
            f"{node.nodeid}: @pytest.mark.ortperf takes keyword arguments only "
            f"({', '.join(MARKER_KEYS)})"
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_KEYS))
    if unknown:
        raise MarkerError(
            f"{node.nodeid}: unknown @pytest.mark.ortperf argument(s) {unknown}; "
            f"known: {', '.join(MARKER_KEYS)}"
        )
    return dict(marker.kwargs)
