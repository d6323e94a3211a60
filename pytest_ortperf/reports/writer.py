"""Report files of a run: the HTML report, the JSON results, the Markdown CI summary and
the pull-request comment.

:class:`ReportFiles` says where they go (the plugin's config fills it) and
:class:`RunResults` what one run measured and judged (the per-run state builds it);
:func:`write_reports` writes the files at the end of the run and returns lines for the
terminal summary. A file that cannot be written is such a line, never an error: test
outcomes do not change. :func:`report_input_from_store` serves ``ortperf report``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf.files import append_text, write_atomic

if TYPE_CHECKING:
    from pytest_ortperf.gating.history_changes import MeasurementChange
    from pytest_ortperf.gating.suite import Family
    from pytest_ortperf.reports.html import ReportInput
    from pytest_ortperf.reports.json import RunInfo
    from pytest_ortperf.results import Judgement, Record

JSON_FORMATS = ("ortperf", "pytest-benchmark")
"""Layouts of ``--ortperf-json``: our schema, or pytest-benchmark's."""
HISTORY_RUNS = 20
"""Runs of history an HTML report written during a run shows."""
NO_VERDICTS = (
    "Built from the store after the run: verdicts are only in reports written during the "
    "run (pytest --ortperf --ortperf-report=FILE.html)."
)


@dataclass(frozen=True)
class ReportFiles:
    """Where the report files of a run go (None: not written)."""

    report: Path | None = None
    json: Path | None = None
    json_format: str = "ortperf"
    markdown: tuple[Path, ...] = ()
    pr_comment: Path | None = None

    @property
    def any(self) -> bool:
        return bool(self.report or self.json or self.markdown or self.pr_comment)


@dataclass(frozen=True)
class RunResults:
    """What one run measured and judged, as the report files need it. ``store`` is where
    the run was stored (None: storing disabled), for the history of each measurement."""

    run: RunInfo
    records: Sequence[Record]
    judgements: Sequence[Judgement] = ()
    profiles: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    store: str | None = None
    threshold: float | None = None
    baseline_samples: Mapping[tuple[str, str], Sequence[float]] = field(default_factory=dict)
    """(test, name) of a latency -> the samples its baseline entry stores (the report
    draws them beside this run's)."""
    attributions: Mapping[tuple[str, str], Sequence[str]] = field(default_factory=dict)
    """(test, name) of a regression -> the op types its attribution found moving."""
    family: Family | None = None
    """``--ortperf-family-alpha`` over the run's planned verdicts (None: off)."""


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"


def report_input_from_run(results: RunResults) -> ReportInput:
    """The HTML report's data for this run, with history from its store."""
    from pytest_ortperf.reports.html import ReportInput
    from pytest_ortperf.store.errors import StoreError
    from pytest_ortperf.store.history import HistoryKey, HistoryPoint, history_keys, read_history

    run = results.run
    history: dict[HistoryKey, list[HistoryPoint]] = {}
    note = None
    if results.store is None:
        note = "no history: the results store is disabled (--ortperf-store=none)"
    elif run.run_id is None:
        note = "no history: this run was not stored"
    else:
        try:
            history = read_history(
                results.store, history_keys(results.records), last=HISTORY_RUNS, until=run.run_id
            )
        except StoreError as exc:
            note = f"no history: {exc}"
    changes, changes_note = _changes(results) if note is None else (None, None)
    return ReportInput(
        records=tuple(results.records),
        judgements=tuple(results.judgements),
        profiles=dict(results.profiles),
        environment=run.environment,
        git=run.git,
        started=run.started,
        run_id=run.run_id,
        notes=tuple(run.notes),
        history=history,
        history_note=note,
        changes=changes,
        changes_note=changes_note,
        threshold=results.threshold,
        baseline_samples=dict(results.baseline_samples),
        family=results.family,
    )


def _changes(results: RunResults) -> tuple[list[MeasurementChange] | None, str | None]:
    """The change points of this run's measurements on its machine class, or a note
    saying why there are none: the section is never worth the report."""
    from pytest_ortperf.gating.history_changes import history_changes
    from pytest_ortperf.store.history import history_keys

    assert results.store is not None
    fingerprint = results.run.environment.get("fingerprint")
    try:
        found = history_changes(
            results.store,
            keys=set(history_keys(results.records)),
            machine=fingerprint if isinstance(fingerprint, str) and fingerprint else None,
        )
    except Exception as exc:
        return None, f"no change points: {_why(exc)}"
    return found, None


def write_reports(files: ReportFiles, results: RunResults) -> list[str]:
    """Write the report files of this run; returns lines for the terminal summary."""
    lines: list[str] = []
    if files.report is not None:
        try:
            from pytest_ortperf.reports.html import build_html

            write_atomic(files.report, build_html(report_input_from_run(results)))
            lines.append(f"HTML report written to {files.report}")
        except Exception as exc:
            lines.append(f"HTML report NOT written to {files.report}: {_why(exc)}")
    if files.json is not None:
        try:
            from pytest_ortperf.reports.json import ortperf_json, pytest_benchmark_json

            if files.json_format == "pytest-benchmark":
                doc = pytest_benchmark_json(results.run, results.records)
            else:
                doc = ortperf_json(
                    results.run,
                    results.records,
                    results.judgements,
                    results.profiles,
                    family=results.family,
                )
            write_atomic(files.json, json.dumps(doc, indent=1, allow_nan=False) + "\n")
            lines.append(f"JSON results ({files.json_format}) written to {files.json}")
        except Exception as exc:
            lines.append(f"JSON results NOT written to {files.json}: {_why(exc)}")
    for target in files.markdown:
        try:
            from pytest_ortperf.reports.markdown import markdown_summary

            text = markdown_summary(
                results.records,
                results.judgements,
                notes=results.run.notes,
                report_path=None if files.report is None else str(files.report),
                family=results.family,
            )
            append_text(target, text)
            lines.append(f"Markdown summary appended to {target}")
        except Exception as exc:
            lines.append(f"Markdown summary NOT written to {target}: {_why(exc)}")
    if files.pr_comment is not None:
        try:
            from pytest_ortperf.reports.pr_comment import machine_class, pr_comment

            text = pr_comment(
                results.records,
                results.judgements,
                machine=machine_class(results.run.environment),
                threshold=0.05 if results.threshold is None else results.threshold,
                strict=bool(results.run.settings.get("strict")),
                attributions=results.attributions,
            )
            write_atomic(files.pr_comment, text)
            lines.append(f"PR comment written to {files.pr_comment}")
        except Exception as exc:
            lines.append(f"PR comment NOT written to {files.pr_comment}: {_why(exc)}")
    return lines


# ------------------------------------------------------------------------------ from a store


def report_input_from_store(store: str, run: str | int = "latest", last: int = 10) -> ReportInput:
    """The HTML report's data for one stored run (no verdicts: they are not stored).
    Raises StoreError."""
    from pytest_ortperf.reports.html import ReportInput
    from pytest_ortperf.store.history import history_keys, read_history
    from pytest_ortperf.store.read import (
        list_runs,
        load_records,
        read_profiles,
        read_results,
        resolve_run_id,
    )

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
