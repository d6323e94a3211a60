"""Settings of a run, resolved from the command line, ini keys and the marker."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_ortperf import values
from pytest_ortperf.gating.fingerprint import check_allowed
from pytest_ortperf.gating.settings import (
    BASELINE_SOURCES,
    LATENCY_MODES,
    MIN_HISTORY_RUNS,
    GateSettings,
    HistorySettings,
)
from pytest_ortperf.measuring.engine import EngineConfig
from pytest_ortperf.reports.writer import JSON_FORMATS, ReportFiles
from pytest_ortperf.text import did_you_mean

MARKER = "ortperf"


class MarkerError(ValueError):
    """A bad ``@pytest.mark.ortperf`` argument."""


T = TypeVar("T")


def _named(check: Callable[[Any], T]) -> Callable[[Any, str], T]:
    """A shared value check (:mod:`pytest_ortperf.values`) as a parser of the setting
    ``what``: a refused value is a usage error naming the setting first."""

    def parse(value: Any, what: str) -> T:
        try:
            return check(value)
        except values.BadValue as exc:
            raise pytest.UsageError(exc.named(what)) from None

    return parse


_seconds = _named(values.seconds)
_threshold = _named(values.threshold)
_alpha = _named(values.alpha)
_flag = _named(values.flag)


@dataclass(frozen=True)
class OrtperfConfig:
    """Run-wide settings: ``enabled`` is ``--ortperf`` (implied by ``--ortperf-update``)."""

    enabled: bool = False
    update: bool = False
    budget_s: float = 1.0
    store: str | None = None
    gate: GateSettings = field(default_factory=GateSettings)
    baseline: str = "files"
    """Where baselines come from (:data:`~pytest_ortperf.gating.settings.BASELINE_SOURCES`)."""
    history: HistorySettings = field(default_factory=HistorySettings)
    fail_blind: bool = False
    """``--ortperf-fail-blind``: an update fails a test whose baseline cannot see its
    threshold."""
    family_alpha: float | None = None
    """``--ortperf-family-alpha``: a false alarm anywhere in the run at most this likely,
    split over its planned timing verdicts (:mod:`pytest_ortperf.gating.suite`)."""
    artifacts: str | None = None
    """``--ortperf-artifacts``: the artifact store (a directory or ``store``; None: the
    default, :func:`pytest_ortperf.store.artifacts.resolve_artifacts`)."""
    skip_unchanged: bool = False
    """``--ortperf-skip-unchanged``: latencies unchanged since their baseline run once."""
    update_processes: int = 1
    """``--ortperf-update-processes``: the processes an update takes each baseline in."""
    update_part: str | None = None
    """Set in the further processes of such an update (never by a user): the file that
    process writes its baseline records to, in place of the baseline files."""

    @classmethod
    def from_pytest(cls, config: pytest.Config) -> OrtperfConfig:
        def option_or_ini(name: str) -> tuple[Any, str]:
            value = config.getoption(name, None)
            if value is not None:
                return value, "--" + name.replace("_", "-")
            return config.getini(name), f"ini {name}"

        budget = _seconds(*option_or_ini("ortperf_budget"))
        threshold = _threshold(*option_or_ini("ortperf_threshold"))
        latency_threshold = config.getini("ortperf_latency_threshold")
        latency = (
            _threshold(latency_threshold, "ini ortperf_latency_threshold")
            if str(latency_threshold).strip()
            else None
        )
        alpha = _alpha(config.getini("ortperf_alpha"), "ini ortperf_alpha")
        strict = bool(config.getoption("ortperf_strict", False)) or _flag(
            config.getini("ortperf_strict"), "ini ortperf_strict"
        )
        update = bool(config.getoption("ortperf_update", False))
        fail_blind = bool(config.getoption("ortperf_fail_blind", False)) or _flag(
            config.getini("ortperf_fail_blind"), "ini ortperf_fail_blind"
        )
        latency_mode = _latency_mode(config.getini("ortperf_latency"), "ini ortperf_latency")
        ignore = _fingerprint_keys(
            config.getini("ortperf_fingerprint_ignore"), "ini ortperf_fingerprint_ignore"
        )
        store = (
            config.getoption("ortperf_store", None)
            or config.getini("ortperf_store")
            or None  # then $ORTPERF_STORE, else the default (store.resolve_store)
        )
        baseline, history = _history_settings(option_or_ini, update=update)
        artifacts = str(option_or_ini("ortperf_artifacts")[0] or "").strip() or None
        skip_unchanged = bool(config.getoption("ortperf_skip_unchanged", False)) or _flag(
            config.getini("ortperf_skip_unchanged"), "ini ortperf_skip_unchanged"
        )
        family, what = option_or_ini("ortperf_family_alpha")
        family_alpha = _alpha(family, what) if str(family).strip() else None
        processes, what = option_or_ini("ortperf_update_processes")
        update_processes = _processes(processes, what)
        if update_processes > 1 and not update and what.startswith("--"):
            raise pytest.UsageError(f"{what} takes baselines: pass it with --ortperf-update")
        part = config.getoption("ortperf_update_part", None)
        return cls(
            enabled=update or bool(config.getoption("ortperf", False)),
            update=update,
            budget_s=budget,
            store=store,
            gate=GateSettings(
                threshold=threshold,
                alpha=alpha,
                strict=strict,
                latency_threshold=latency,
                latency_mode=latency_mode,
                fingerprint_ignore=ignore,
            ),
            baseline=baseline,
            history=history,
            fail_blind=fail_blind,
            family_alpha=family_alpha,
            artifacts=artifacts,
            skip_unchanged=skip_unchanged,
            update_processes=update_processes if update and not part else 1,
            update_part=str(part) if update and part else None,
        )

    def engine_config(self, marker: dict[str, Any]) -> EngineConfig:
        """The engine settings of one test: the run's, overridden by its marker (a
        ``block`` longer than the test's budget is a :class:`MarkerError`)."""
        config = replace(EngineConfig(budget_s=self.budget_s), **_overrides(marker, "engine"))
        if "block" in marker and config.block_s > config.budget_s:
            raise MarkerError(
                f"@pytest.mark.ortperf: block must not be longer than the budget "
                f"({config.budget_s:g} s), got {marker['block']!r} (accepted: more than 0 s "
                "and at most the budget)"
            )
        return config

    def gate_settings(self, marker: dict[str, Any]) -> GateSettings:
        """The gate settings of one test: the run's, overridden by its marker."""
        return replace(self.gate, **_overrides(marker, "gate"))


def _latency_mode(value: Any, what: str) -> str:
    """``normalized`` or ``absolute``."""
    mode = str(value).strip().lower()
    if mode not in LATENCY_MODES:
        raise pytest.UsageError(f"{what} must be one of {', '.join(LATENCY_MODES)}, got {value!r}")
    return mode


def _fingerprint_keys(value: Any, what: str) -> tuple[str, ...]:
    """Fingerprint key names that may differ from a baseline's."""
    names = [value] if isinstance(value, str) else list(value or ())
    try:
        return tuple(check_allowed(names))
    except ValueError as exc:
        raise pytest.UsageError(f"{what}: {exc}") from None


_MACHINE = re.compile(r"[0-9a-f]{4,12}")


def _history_settings(
    option_or_ini: Callable[[str], tuple[Any, str]], *, update: bool
) -> tuple[str, HistorySettings]:
    """``--ortperf-baseline`` and the ``--ortperf-history-*`` options, validated."""
    value, what = option_or_ini("ortperf_baseline")
    source = str(value).strip().lower()
    if source not in BASELINE_SOURCES:
        raise pytest.UsageError(
            f"{what} must be one of {', '.join(BASELINE_SOURCES)}, got {value!r}"
            f"{did_you_mean([source], BASELINE_SOURCES)}"
        )
    if source == "history" and update:
        raise pytest.UsageError(
            f"--ortperf-update writes the baseline files, which {what}=history does not "
            "read: a history baseline follows the runs stored on its branch (run `pytest "
            "--ortperf` there); to update the files, pass --ortperf-baseline=files"
        )
    value, what = option_or_ini("ortperf_history_branch")
    branch = str(value).strip()
    if not branch or not branch.isprintable() or any(c.isspace() for c in branch):
        raise pytest.UsageError(f"{what} must be a git branch name such as main, got {value!r}")
    value, what = option_or_ini("ortperf_history_machine")
    machine = str(value).strip().lower() or None
    if machine is not None and not _MACHINE.fullmatch(machine):
        raise pytest.UsageError(
            f"{what} must be a machine class (12 hex digits, as `ortperf machines` lists "
            f"them) or a unique prefix of at least 4 of them, got {value!r}"
        )
    value, what = option_or_ini("ortperf_history_window")
    window = _window(value, what)
    return source, HistorySettings(branch=branch, machine=machine, window=window)


_window = _named(
    lambda value: values.count(
        value,
        MIN_HISTORY_RUNS,
        values.MAX_HISTORY_WINDOW,
        "runs",
        below=f"fewer than {MIN_HISTORY_RUNS} runs never gate (their spread is too uncertain)",
    )
)


_processes = _named(lambda value: values.count(value, 1, values.MAX_UPDATE_PROCESSES, "processes"))


MARKER_FIELDS: dict[str, tuple[str, str, Callable[[Any, str], Any]]] = {
    "budget": ("engine", "budget_s", _seconds),
    "block": ("engine", "block_s", _seconds),
    "threshold": ("gate", "threshold", _threshold),
    "alpha": ("gate", "alpha", _alpha),
    "structure": ("gate", "structure", _flag),
    "strict": ("gate", "strict", _flag),
    "latency": ("gate", "latency_mode", _latency_mode),
    "fingerprint_ignore": ("gate", "fingerprint_ignore", _fingerprint_keys),
}
"""Marker argument -> (settings record, its field, parser)."""
MARKER_KEYS = (*MARKER_FIELDS, "providers", "slo")
"""Every marker argument: ``providers`` (execution providers the test needs, skipped with
the package to install when onnxruntime lacks one) and ``slo`` (latency budgets, for each
measurement of the test whose kind the form fits: :mod:`pytest_ortperf.gating.slo`) belong
to no settings record."""


def marker_providers(marker: dict[str, Any]) -> tuple[str, ...]:
    """The ``providers=[...]`` of a marker, checked: names onnxruntime knows (a misspelled
    one is a :class:`MarkerError`, never a skip). Imports onnxruntime only when given."""
    value = marker.get("providers")
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise MarkerError(
            f"@pytest.mark.ortperf: providers must be a list of execution provider names "
            f"such as ['CUDAExecutionProvider'], got {value!r}"
        )
    import onnxruntime as ort

    known = ort.get_all_providers()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise MarkerError(
            f"@pytest.mark.ortperf: unknown execution provider(s) {unknown}; onnxruntime "
            f"knows {', '.join(known)}{did_you_mean(unknown, known)}"
        )
    return tuple(names)


def missing_providers(providers: tuple[str, ...]) -> str | None:
    """The skip reason of a test needing ``providers`` where this onnxruntime lacks some:
    each missing one with the package that provides it; ``None`` when all are there."""
    if not providers:
        return None
    import onnxruntime as ort

    from pytest_ortperf.measuring.providers import install_hint

    available = ort.get_available_providers()
    missing = [p for p in providers if p not in available]
    if not missing:
        return None
    needs = "; ".join(f"{p} ({install_hint(p)})" for p in missing)
    return (
        f"needs {needs}, which onnxruntime {ort.__version__} lacks; available: "
        f"{', '.join(available)}"
    )


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
            f"known: {', '.join(MARKER_KEYS)}{did_you_mean(unknown, MARKER_KEYS)}"
        )
    return dict(marker.kwargs)


def check_marker(node: pytest.Item, settings: OrtperfConfig) -> None:
    """Raise :class:`MarkerError` for a bad ``@pytest.mark.ortperf`` on ``node`` (an
    unknown argument, a value out of range), whether the test measures anything or not."""
    marker = marker_settings(node)
    if marker:
        settings.engine_config(marker)
        settings.gate_settings(marker)
        marker_providers(marker)
        if "slo" in marker:
            from pytest_ortperf.gating.slo import SloError, check_marker_slo

            try:
                check_marker_slo(marker["slo"], node.nodeid)
            except SloError as exc:
                raise MarkerError(str(exc)) from None


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
        pr_comment=path("ortperf_pr_comment"),
    )
