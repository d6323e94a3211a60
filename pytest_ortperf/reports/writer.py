"""Report files of a run: the HTML report, the JSON results and the Markdown CI summary.

``OutputSettings`` resolves the options and ini keys; ``write_outputs`` writes the files at
the end of the run and returns lines for the terminal summary. A file that cannot be
written is such a line, never an error: test outcomes do not change. Builders of the
report's data from the store serve ``ortperf report`` too.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ortperf.files import write_atomic

if TYPE_CHECKING:
    from pytest_ortperf.reports.html import HistoryKey, HistoryPoint, ReportInput
    from pytest_ortperf.reports.json import RunInfo
    from pytest_ortperf.state import OrtperfState

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
HISTORY_RUNS = 20
"""Runs of history an HTML report written during a run shows."""
NO_VERDICTS = (
    "Built from the store after the run: verdicts are only in reports written during the "
    "run (pytest --ortperf --ortperf-report=FILE.html)."
)


@dataclass(frozen=True)
class OutputSettings:
    """Where the report files go (None: not written)."""

    report: Path | None = None
    json: Path | None = None
    json_format: str = "ortperf"
    markdown: tuple[Path, ...] = ()

    @classmethod
    def from_pytest(cls, config: pytest.Config) -> OutputSettings:
        """Options (relative to the invocation directory) over ini keys (relative to the
        ini file's directory); ``$GITHUB_STEP_SUMMARY`` adds a Markdown target."""
        from pytest_ortperf.reports.json import FORMATS

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
        if fmt not in FORMATS:
            raise pytest.UsageError(
                f"ortperf_json_format must be one of {', '.join(FORMATS)}, got {fmt!r}"
            )
        markdown = [p for p in (path("ortperf_markdown"),) if p is not None]
        summary = os.environ.get(SUMMARY_ENV, "").strip()
        if summary:
            markdown.append(Path(summary))
        return cls(
            report=path("ortperf_report"),
            json=path("ortperf_json"),
            json_format=fmt,
            markdown=tuple(dict.fromkeys(markdown)),
        )

    @property
    def any(self) -> bool:
        return bool(self.report or self.json or self.markdown)


# ------------------------------------------------------------------------------ files


def append_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"


# ------------------------------------------------------------------------------ history


def _value(row: Mapping[str, Any]) -> float | None:
    value = row.get("ratio") if row.get("kind") == "compare" else row.get("median")
    if value is None or not math.isfinite(float(value)):
        return None
    return float(value)


def read_history(
    store: str,
    keys: Iterable[HistoryKey],
    *,
    last: int = HISTORY_RUNS,
    until: int | None = None,
) -> dict[HistoryKey, list[HistoryPoint]]:
    """The stored values of ``keys`` over the last ``last`` runs (up to run ``until``):
    ratios of comparisons, medians of latencies. Raises StoreError."""
    from pytest_ortperf.reports.html import HistoryPoint
    from pytest_ortperf.store import list_runs, read_results

    wanted = set(keys)
    runs = list_runs(store)
    if until is not None:
        runs = runs[runs["run_id"] <= until]
    ids = [int(i) for i in runs["run_id"].tail(max(last, 1))]
    if not ids or not wanted:
        return {}
    frame = read_results(store, since=min(ids))
    out: dict[HistoryKey, list[HistoryPoint]] = {}
    for record in frame.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        key = (str(row["test"]), str(row["name"]), str(row["kind"]), str(row["api"]))
        value = _value(row)
        if key not in wanted or int(row["run_id"]) not in ids or value is None:
            continue
        points = out.setdefault(key, [])
        if points and points[-1].run_id == int(row["run_id"]):
            points.pop()  # one value per run: the last one stored
        low, high = row.get("low"), row.get("high")
        points.append(
            HistoryPoint(
                run_id=int(row["run_id"]),
                started=row["started"].isoformat(),
                commit=row.get("commit") if isinstance(row.get("commit"), str) else None,
                value=value,
                low=None if low is None or math.isnan(low) else float(low),
                high=None if high is None or math.isnan(high) else float(high),
            )
        )
    return out


def history_keys(records: Sequence[Any]) -> list[HistoryKey]:
    return [(r.test, r.name, r.kind, r.api) for r in records]


# ------------------------------------------------------------------------------ from a run


def _run_info(state: OrtperfState, config: pytest.Config, exit_status: int) -> RunInfo:
    from pytest_ortperf.env import git_info
    from pytest_ortperf.reports.json import RunInfo
    from pytest_ortperf.state import environment

    settings = state.settings
    return RunInfo(
        started=state.started,
        finished=time.time(),
        environment=dict(environment()),
        git=git_info(config.rootpath),
        settings={
            "budget_s": settings.budget_s,
            "threshold": settings.gate.threshold,
            "alpha": settings.gate.alpha,
            "strict": settings.gate.strict,
            "update": settings.update,
        },
        run_id=state.run_id,
        exit_status=exit_status,
        notes=tuple(state.notes),
    )


def report_input_from_run(state: OrtperfState, config: pytest.Config, run: RunInfo) -> ReportInput:
    """The HTML report's data from this run's state, with history from its store."""
    from pytest_ortperf.reports.html import ReportInput
    from pytest_ortperf.store import StoreError, resolve_store

    history: dict[HistoryKey, list[HistoryPoint]] = {}
    note = None
    target = resolve_store(state.settings.store, config.rootpath)
    if target is None:
        note = "no history: the results store is disabled (--ortperf-store=none)"
    elif state.run_id is None:
        note = "no history: this run was not stored"
    else:
        try:
            history = read_history(target, history_keys(state.records), until=state.run_id)
        except StoreError as exc:
            note = f"no history: {exc}"
    return ReportInput(
        records=tuple(state.records),
        verdicts=tuple(state.verdicts),
        profiles=dict(state.profiles),
        environment=run.environment,
        git=run.git,
        started=state.started,
        run_id=state.run_id,
        notes=tuple(state.notes),
        history=history,
        history_note=note,
        threshold=state.settings.gate.threshold,
    )


def write_outputs(
    outputs: OutputSettings, state: OrtperfState, config: pytest.Config, exit_status: int
) -> list[str]:
    """Write the report files of this run; returns lines for the terminal summary."""
    if not outputs.any or not state.settings.enabled:
        return []
    lines: list[str] = []
    run = _run_info(state, config, exit_status)
    if outputs.report is not None:
        try:
            from pytest_ortperf.reports.html import build_html

            text = build_html(report_input_from_run(state, config, run))
            write_atomic(outputs.report, text)
            lines.append(f"HTML report written to {outputs.report}")
        except Exception as exc:
            lines.append(f"HTML report NOT written to {outputs.report}: {_why(exc)}")
    if outputs.json is not None:
        try:
            import json

            from pytest_ortperf.reports.json import ortperf_json, pytest_benchmark_json

            if outputs.json_format == "pytest-benchmark":
                doc = pytest_benchmark_json(run, state.records)
            else:
                doc = ortperf_json(run, state.records, state.verdicts, state.profiles)
            write_atomic(outputs.json, json.dumps(doc, indent=1, allow_nan=False) + "\n")
            lines.append(f"JSON results ({outputs.json_format}) written to {outputs.json}")
        except Exception as exc:
            lines.append(f"JSON results NOT written to {outputs.json}: {_why(exc)}")
    for target in outputs.markdown:
        try:
            from pytest_ortperf.reports.markdown import markdown_summary

            text = markdown_summary(
                state.records,
                state.verdicts,
                notes=state.notes,
                report_path=None if outputs.report is None else str(outputs.report),
            )
            append_text(target, text)
            lines.append(f"Markdown summary appended to {target}")
        except Exception as exc:
            lines.append(f"Markdown summary NOT written to {target}: {_why(exc)}")
    return lines


# ------------------------------------------------------------------------------ from a store


def report_input_from_store(store: str, run: str | int = "latest", last: int = 10) -> ReportInput:
    """The HTML report's data for one stored run (no verdicts: they are not stored).
    Raises StoreError."""
    from pytest_ortperf.reports.html import ReportInput
    from pytest_ortperf.store import list_runs, load_records, read_profiles, read_results, resolve_run_id

    run_id = resolve_run_id(store, run)
    records = load_records(store, run_id)
    runs = list_runs(store)
    row = runs[runs["run_id"] == run_id].to_dict("records")[0]
    env_rows = read_results(store, run=run_id).head(1).to_dict("records")
    env_keys = (
        "fingerprint",
        "ort_version",
        "providers",
        "onnx_version",
        "numpy_version",
        "python_version",
        "os",
        "cpu_model",
        "cores",
        "memory",
    )
    environment = {k: env_rows[0].get(k) for k in env_keys} if env_rows else {}
    if "cores" in environment:
        environment["logical_cores"] = environment.pop("cores")
    profiles: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in read_profiles(store, run_id=run_id).to_dict("records"):
        profiles.setdefault((str(item["test"]), str(item["name"])), []).append(
            {k: item[k] for k in ("op_type", "total_us", "count", "share")}
        )
    return ReportInput(
        records=tuple(records),
        profiles=profiles,
        environment=environment,
        git={k: row.get(k) for k in ("commit", "branch", "dirty")},
        started=row["started"].timestamp(),
        run_id=run_id,
        title=f"pytest-ortperf report: run {run_id}",
        history=read_history(store, history_keys(records), last=last, until=run_id),
        verdicts_note=NO_VERDICTS,
    )
