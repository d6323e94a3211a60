"""Settings of a run, resolved from the command line, ini keys and the marker."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_ortperf.gating.settings import GateSettings
from pytest_ortperf.measure import EngineConfig
from pytest_ortperf.reports.writer import JSON_FORMATS, ReportFiles
from pytest_ortperf.units import parse_fraction

MARKER = "ortperf"


class MarkerError(ValueError):
    """A bad ``@pytest.mark.ortperf`` argument."""


def _positive_float(value: Any, what: str, unit: str = "a number of seconds") -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{what} must be {unit}, got {value!r}") from None
    if not number > 0:
        raise pytest.UsageError(f"{what} must be positive, got {value!r}")
    return number


def _fraction(value: Any, what: str) -> float:
    """A positive fraction given as ``0.05`` or ``5%``."""
    try:
        number = parse_fraction(value)
    except ValueError as exc:
        raise pytest.UsageError(f"{what} {exc}") from None
    if not number > 0:
        raise pytest.UsageError(f"{what} must be positive, got {value!r}")
    return number


def _flag(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise pytest.UsageError(f"{what} must be true or false, got {value!r}")


@dataclass(frozen=True)
class OrtperfConfig:
    """Run-wide settings: ``enabled`` is ``--ortperf`` (implied by ``--ortperf-update``)."""

    enabled: bool = False
    update: bool = False
    budget_s: float = 1.0
    store: str | None = None
    gate: GateSettings = field(default_factory=GateSettings)

    @classmethod
    def from_pytest(cls, config: pytest.Config) -> OrtperfConfig:
        def option_or_ini(name: str) -> tuple[Any, str]:
            value = config.getoption(name, None)
            if value is not None:
                return value, "--" + name.replace("_", "-")
            return config.getini(name), f"ini {name}"

        budget = _positive_float(*option_or_ini("ortperf_budget"))
        threshold = _fraction(*option_or_ini("ortperf_threshold"))
        latency_threshold = config.getini("ortperf_latency_threshold")
        latency = (
            _fraction(latency_threshold, "ini ortperf_latency_threshold")
            if str(latency_threshold).strip()
            else None
        )
        alpha = _alpha(config.getini("ortperf_alpha"), "ini ortperf_alpha")
        strict = bool(config.getoption("ortperf_strict", False)) or _flag(
            config.getini("ortperf_strict"), "ini ortperf_strict"
        )
        update = bool(config.getoption("ortperf_update", False))
        store = (
            config.getoption("ortperf_store", None)
            or config.getini("ortperf_store")
            or None  # then $ORTPERF_STORE, else the default (store.resolve_store)
        )
        return cls(
            enabled=update or bool(config.getoption("ortperf", False)),
            update=update,
            budget_s=budget,
            store=store,
            gate=GateSettings(
                threshold=threshold, alpha=alpha, strict=strict, latency_threshold=latency
            ),
        )

    def engine_config(self, marker: dict[str, Any]) -> EngineConfig:
        """The engine settings of one test: the run's, overridden by its marker."""
        return replace(EngineConfig(budget_s=self.budget_s), **_overrides(marker, "engine"))

    def gate_settings(self, marker: dict[str, Any]) -> GateSettings:
        """The gate settings of one test: the run's, overridden by its marker."""
        return replace(self.gate, **_overrides(marker, "gate"))


def _alpha(value: Any, what: str) -> float:
    alpha = _fraction(value, what)
    if not alpha < 0.5:
        raise pytest.UsageError(f"{what} must be below 0.5, got {alpha:g}")
    return alpha


MARKER_FIELDS: dict[str, tuple[str, str, Callable[[Any, str], Any]]] = {
    "budget": ("engine", "budget_s", _positive_float),
    "block": ("engine", "block_s", _positive_float),
    "threshold": ("gate", "threshold", _fraction),
    "alpha": ("gate", "alpha", _alpha),
    "structure": ("gate", "structure", _flag),
    "strict": ("gate", "strict", _flag),
}
"""Marker argument -> (settings record, its field, parser)."""
MARKER_KEYS = tuple(MARKER_FIELDS)


def _overrides(marker: dict[str, Any], record: str) -> dict[str, Any]:
    """The fields of ``record`` (``engine`` or ``gate``) that the marker sets, parsed."""
    out = {}
    try:
        for key, (target, fieldname, parse) in MARKER_FIELDS.items():
            if target == record and key in marker:
                out[fieldname] = parse(marker[key], key)
    except pytest.UsageError as exc:
        raise MarkerError(f"@pytest.mark.ortperf: {exc}") from None
    return out


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


SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
"""GitHub Actions' job summary file: a Markdown summary is appended there too."""


def report_files(config: pytest.Config) -> ReportFiles:
    """Where this run's report files go: options (relative to the invocation directory)
    over ini keys (relative to the ini file's directory); ``$GITHUB_STEP_SUMMARY`` adds a
    Markdown target."""
    ini_dir = config.inipath.parent if config.inipath else config.rootpath
    cwd = config.invocation_params.dir

    def path(name: str) -> Path | None:
        value = config.getoption(name, None)
        base = cwd
        if not value:
            value, base = config.getini(name), ini_dir
        if not value or not str(value).strip():
            return None
        p = Path(str(value).strip()).expanduser()
        return p if p.is_absolute() else base / p

    fmt = config.getoption("ortperf_json_format", None) or config.getini("ortperf_json_format")
    fmt = str(fmt or "ortperf").strip()
    if fmt not in JSON_FORMATS:
        raise pytest.UsageError(
            f"ortperf_json_format must be one of {', '.join(JSON_FORMATS)}, got {fmt!r}"
        )
    markdown = [p for p in (path("ortperf_markdown"),) if p is not None]
    summary = os.environ.get(SUMMARY_ENV, "").strip()
    if summary:
        markdown.append(Path(summary))
    return ReportFiles(
        report=path("ortperf_report"),
        json=path("ortperf_json"),
        json_format=fmt,
        markdown=tuple(dict.fromkeys(markdown)),
    )
