"""The ``ortperf`` command: browse, compare, export and prune the results store.

Exit status (:data:`EXIT_STATUS`): 0 success, 1 ``compare`` or ``ab`` found a regression, 2
usage or input error (bad arguments, a store missing, corrupt or unreadable, an output that
cannot be written), 3 internal error (a bug: a short message and the traceback on stderr).
New subcommands register a ``_add_<name>(subparsers, common)`` function in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import json
import math
import os
import re
import shutil
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_ortperf.gating.settings import CHANGE_POINT_RUNS, MIN_HISTORY_RUNS
from pytest_ortperf.reports.terminal import ELLIPSIS, WIDTH, format_table, shorten_left
from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.text import escape_control, match_machine
from pytest_ortperf.units import (
    format_change,
    format_interval,
    format_metric,
    format_ratio_interval,
    format_seconds,
    parse_fraction,
    threshold_problem,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from pytest_ortperf.measuring.feeds import InputSpec
    from pytest_ortperf.results import Comparison

EXIT_OK = 0
EXIT_REGRESSED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT) during ``ortperf ab``: the shell's status for an interrupted command."""

EXIT_STATUS = f"""exit status:
  {EXIT_OK}  success
  {EXIT_REGRESSED}  `compare` or `ab` found a regression (no other command exits {EXIT_REGRESSED})
  {EXIT_USAGE}  usage or input error: bad arguments, a store missing, corrupt or unreadable,
     an output file that cannot be written (one line on stderr)
  {EXIT_INTERNAL}  internal error: a bug in pytest-ortperf (a message and the traceback on
     stderr; please report it)
  {EXIT_INTERRUPTED}  `ab` interrupted (Ctrl-C): its workers stopped, no traceback"""
"""The exit codes, as ``ortperf --help`` lists them."""

KEY = ["test", "name", "kind", "api"]


class UsageError(Exception):
    """A problem with what the user asked for: one line on stderr, exit status 2."""


def _why(exc: OSError) -> str:
    """An OSError in words; a full disk says so."""
    text = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        return f"disk full ({text})"
    return text


# --------------------------------------------------------------------------------------------
# Formatting


def _fmt_ratio(row: Any) -> str:
    if _missing(row.get("ratio")):
        return "-"
    return format_ratio_interval(row["ratio"], row["low"], row["high"])


def _fmt_when(ts: Any) -> str:
    return datetime.fromtimestamp(ts.timestamp()).strftime("%Y-%m-%d %H:%M")


def _fmt_commit(row: Any) -> str:
    commit = row.get("commit")
    if not isinstance(commit, str) or not commit:
        return "-"
    return commit[:8] + ("*" if row.get("dirty") is True else "")


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = WIDTH) -> str:
    """Rows aligned under their headers, cut to ``width`` columns (default 100), control
    characters escaped (``reports.terminal.format_table``)."""
    return "\n".join(format_table(headers, rows, width=width))


MIN_WIDTH = 60
"""The narrowest table :func:`terminal_width` allows."""


def terminal_width() -> int:
    """The terminal's width ($COLUMNS first); 100 when stdout is no terminal (a pipe, a file)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def _shared_head(ids: Sequence[str]) -> int:
    """Length of the longest prefix all ``ids`` share that ends at a ``/`` or ``::`` and
    leaves each of them something."""
    common = ids[0] if ids else ""
    for other in ids[1:]:
        common = common[: _shared_length(common, other)]

    def boundary(text: str) -> int:  # the end of the last separator in text, else 0
        return max(text.rfind("/") + 1, text.rfind("::") + 2 if "::" in text else 0)

    cut = boundary(common)
    while cut and any(len(i) <= cut for i in ids):
        cut = boundary(common[: cut - 1])
    return cut


def shorten_ids(ids: Sequence[str], budget: int) -> list[str]:
    """Measurement ids (escaped) that fit in ``budget`` columns and keep what tells them
    apart: the directory or module all of them share goes first (as ``...``), then each id
    too long is cut from the left, keeping its end (test, parameters, name); ids that would
    then read alike keep their head too, the middle elided."""
    ids = [escape_control(i) for i in ids]
    budget = max(budget, len(ELLIPSIS) + 4)
    if all(len(i) <= budget for i in ids):
        return ids
    head = _shared_head(ids) if len(set(ids)) > 1 else 0
    if head > len(ELLIPSIS):
        ids = [ELLIPSIS + i[head:] for i in ids]
    ends = [shorten_left(i, budget) for i in ids]
    seen: dict[str, set[str]] = {}
    for full, end in zip(ids, ends, strict=True):
        seen.setdefault(end, set()).add(full)
    keep = budget - len(ELLIPSIS)
    out = []
    for full, end in zip(ids, ends, strict=True):
        alike = seen[end] - {full}
        if not alike:
            out.append(end)
            continue
        # Keep the head up to a few characters past where it differs from the others.
        differs = max(_shared_length(full, other) for other in alike)
        head = max(keep // 2, min(keep - 4, differs + 6))
        out.append(full[:head] + ELLIPSIS + full[len(full) - (keep - head) :])
    return out


def _shared_length(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def fit_first_column(headers: Sequence[str], rows: list[list[str]], width: int) -> list[list[str]]:
    """``rows`` with their first column (measurement ids) shortened by :func:`shorten_ids`
    to what the other columns leave of ``width``."""
    if not rows:
        return rows
    others = sum(
        max(len(escape_control(h)), *(len(escape_control(r[i])) for r in rows))
        for i, h in enumerate(headers)
        if i
    )
    budget = width - others - 2 * (len(headers) - 1)
    ids = shorten_ids([r[0] for r in rows], max(budget, len(headers[0])))
    return [[short, *r[1:]] for short, r in zip(ids, rows, strict=True)]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _metric(row: Any) -> float:
    """The figure a change is computed on: the ratio of a comparison, else the median
    (NaN when missing, e.g. for memory records)."""
    value = row.get("ratio") if row["kind"] == "compare" else row.get("median")
    return math.nan if _missing(value) else float(value)


# --------------------------------------------------------------------------------------------
# Commands


ROOT_MARKERS = ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", ".git")
"""Files that mark a project's root, as pytest finds its rootdir: the upward search for
the default store checks such a directory and goes no higher."""


def find_store(start: Path, relative: str | None = None) -> tuple[Path | None, list[Path]]:
    """The default store (``DEFAULT_STORE``, or the ``relative`` path given) nearest
    ``start``: looked for in ``start``, then each parent, up to the first directory holding
    a :data:`ROOT_MARKERS` file (checked too) or the filesystem root. Returns the store
    (None when there is none) and the directories searched."""
    from pytest_ortperf.store.connection import DEFAULT_STORE

    searched = []
    for directory in [start, *start.parents]:
        searched.append(directory)
        candidate = directory / (relative or DEFAULT_STORE)
        if candidate.exists():
            return candidate, searched
        if any((directory / marker).exists() for marker in ROOT_MARKERS):
            break
    return None, searched


def _store(args: argparse.Namespace) -> str:
    """The store to read: ``--store``, else ``$ORTPERF_STORE``, else the nearest
    ``.ortperf/results.sqlite`` from the current directory upward (:func:`find_store`).
    Unless given with ``--store``, the store used is named on stderr (credentials masked)."""
    from pytest_ortperf.store.connection import DEFAULT_STORE, STORE_ENV, resolve_store
    from pytest_ortperf.store.secrets import redact_url

    explicit = args.store is not None and bool(args.store.strip())
    from_env = not explicit and bool(os.environ.get(STORE_ENV, "").strip())
    cwd = Path.cwd()
    if explicit or from_env:
        resolved = resolve_store(args.store, cwd)
        if resolved is None:
            where = "--store none" if explicit else f"${STORE_ENV}=none"
            raise UsageError(f"{where}: storing is disabled, there is nothing to read")
        if from_env:
            shown = redact_url(resolved, resolved)
            print(f"ortperf: using store {shown} (from ${STORE_ENV})", file=sys.stderr)
        return resolved
    found, searched = find_store(cwd)
    if found is None:
        upto = f" and its parents up to {searched[-1]}" if len(searched) > 1 else ""
        raise UsageError(
            f"no store found: looked for {DEFAULT_STORE} in {cwd}{upto}; run "
            f"`pytest --ortperf` first, or name one with --store or ${STORE_ENV}"
        )
    print(f"ortperf: using store {found}", file=sys.stderr)
    return str(found)


def cmd_history(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.read import read_results

    frame = read_results(
        _store(args),
        test=args.test,
        name=args.name,
        include_interrupted=args.include_interrupted,
    )
    if args.branch is not None:
        frame = frame[frame["branch"] == args.branch]
    if args.machine is not None:
        frame = frame[frame["fingerprint"] == machine_class(frame, args.machine)]
    if frame.empty:
        print("no stored measurements match", file=sys.stderr)
        return EXIT_OK
    blocks = []
    for key, group in frame.groupby(KEY, sort=False):
        series = group.drop_duplicates("run_id", keep="last").tail(args.last)
        blocks.append(_history_block(tuple(str(k) for k in key), series))
    print("\n\n".join(blocks))
    return EXIT_OK


def machine_class(frame: pd.DataFrame, prefix: str) -> str:
    """The machine class (``fingerprint``) of ``frame`` that ``prefix`` starts; a prefix
    that matches none, or several, is a UsageError listing the classes."""
    try:
        return match_machine(prefix, frame["fingerprint"].dropna())
    except ValueError as exc:
        raise UsageError(f"--machine: {exc}") from None


INVALID = "invalid"
"""What ``ortperf history`` shows for a stored figure that is no measurement (not finite,
zero or negative: a damaged or hand-edited row)."""


BRANCH_WIDTH = 11
MACHINE_WIDTH = 8
"""Widths of ``ortperf history``'s branch and machine columns (a machine class prefix is
what ``--machine`` takes), so that a row fits 100 columns with its change."""


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - len(ELLIPSIS)] + ELLIPSIS


def _valid(value: Any) -> bool:
    """Whether a stored duration or ratio is a measurement: finite and positive."""
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _history_block(key: tuple[str, ...], series: pd.DataFrame) -> str:
    test, name, kind, api = key
    what = "ratio candidate/reference" if kind == "compare" else "median latency"
    headers = ["run", "started", "commit", "branch", "machine", "ort", "median", "ratio [CI]"]
    headers.append("change")
    rows = []
    previous: float | None = None  # the last valid figure: changes skip invalid rows
    for row in series.to_dict("records"):
        value = _metric(row)
        median = row["median"]
        if _missing(median):
            median_cell = "-"
        else:
            median_cell = format_seconds(median) if _valid(median) else INVALID
        if _missing(row.get("ratio")):
            ratio_cell = "-"
        elif all(_valid(row.get(k)) for k in ("ratio", "low", "high")):
            ratio_cell = _fmt_ratio(row)
        else:
            ratio_cell = INVALID
        change = None
        if _valid(value):
            change = None if previous is None else value / previous - 1.0
            previous = value
        rows.append(
            [
                str(row["run_id"]),
                _fmt_when(row["started"]),
                _fmt_commit(row),
                _cut(escape_control(_text(row["branch"])), BRANCH_WIDTH),  # as shown
                _text(row["fingerprint"])[:MACHINE_WIDTH],
                _text(row["ort_version"]),
                median_cell,
                ratio_cell,
                format_change(change) if change is not None or _valid(value) else INVALID,
            ]
        )
    title = f"{test}  [{name}]  {kind} via {api}: change of the {what}"
    return escape_control(title) + "\n" + table(headers, rows)


def cmd_changes(args: argparse.Namespace) -> int:
    from itertools import groupby

    from pytest_ortperf.files import write_atomic
    from pytest_ortperf.gating.changes import MIN_CHANGE
    from pytest_ortperf.gating.history_changes import history_changes
    from pytest_ortperf.store.read import list_runs

    min_change = MIN_CHANGE if args.min_change is None else args.min_change
    store = _store(args)
    machine = None
    if args.machine is not None:
        machine = machine_class(list_runs(store), args.machine)
    target = Path(args.json) if args.json else None
    if target is not None and not target.parent.is_dir():
        raise UsageError(f"cannot write {target}: no directory {target.parent}")
    found = history_changes(
        store, branch=args.branch, machine=machine, test=args.test, min_change=min_change,
        last=args.last,
    )  # fmt: skip
    if target is not None:
        try:
            write_atomic(target, json.dumps([_change_json(c) for c in found], indent=1) + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write {target}: {_why(exc)}") from None
        print(f"wrote {len(found)} change points to {target}", file=sys.stderr)
    if not found:
        where = "".join(
            f" {what} {value!r}"
            for what, value in (("on branch", args.branch), ("on machine class", machine))
            if value is not None
        )
        print(
            f"no change points of {min_change:.1%} or more in the stored history{where}",
            file=sys.stderr,
        )
        return EXIT_OK
    headers = ["first run after", "commit", "started (UTC)", "before -> after", "change"]
    blocks = []
    machine_seen = None
    for (label, key, branch), group in groupby(found, key=lambda c: (c.machine, c.key, c.branch)):
        changes = list(group)
        test, name, kind, api = key
        on = "no branch" if branch is None else f"branch {branch!r}"
        metric = "ratio" if kind == "compare" else "latency"
        rows = []
        for c in changes:
            step = c.change
            way = "slower" if step.direction == "up" else "faster"
            rows.append(
                [
                    str(step.run_id),
                    (step.commit or "-")[:8],
                    c.started[:16].replace("T", " ") or "-",
                    f"{format_metric(metric, step.before)} -> {format_metric(metric, step.after)}",
                    f"{format_change(step.change)} ({way})",
                ]
            )
        head = f"{test}  [{name}]  {kind} via {api}, {on}, {changes[0].runs} runs"
        head = escape_control(head)
        if label != machine_seen:
            machine_seen = label
            head = f"== {escape_control(label)} ==\n{head}"
        blocks.append(head + "\n" + table(headers, rows))
    print("\n\n".join(blocks))
    return EXIT_OK


def _change_json(c: Any) -> dict[str, Any]:
    """A change point of ``ortperf changes --json``."""
    step = c.change
    return {
        "machine_class": c.fingerprint,
        "machine": c.machine,
        "branch": c.branch,
        "test": c.test,
        "name": c.name,
        "kind": c.kind,
        "api": c.api,
        "run_id": step.run_id,
        "commit": step.commit,
        "started": c.started,
        "before": step.before,
        "after": step.after,
        "change": step.change,
        "direction": step.direction,
        "runs_before": step.runs_before,
        "runs_after": step.runs_after,
        "runs": c.runs,
    }


def cmd_runs(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.read import list_runs

    frame = list_runs(_store(args))
    if frame.empty:
        print("the store holds no runs", file=sys.stderr)
        return EXIT_OK
    if args.last:
        frame = frame.tail(args.last)
    headers = ["run", "started", "took", "commit", "branch", "machine", "ort", "cpu", "results"]
    rows = [
        [
            str(row["run_id"]),
            _fmt_when(row["started"]),
            format_seconds((row["finished"] - row["started"]).total_seconds()),
            _fmt_commit(row),
            _text(row["branch"]),
            _text(row["fingerprint"]),
            _text(row["ort_version"]),
            _text(row["cpu_model"]),
            str(row["measurements"]),
        ]
        for row in frame.to_dict("records")
    ]
    marked = bool(frame["interrupted"].any())
    if marked:  # a column of its own only when there is something to mark
        headers.append("status")
        for row, interrupted in zip(rows, frame["interrupted"], strict=True):
            row.append("interrupted" if interrupted else "complete")
    print(table(headers, rows, width=terminal_width()))
    if marked:
        print(f"\n{INTERRUPTED_NOTE}")
    return EXIT_OK


INTERRUPTED_NOTE = (
    "interrupted: stopped before all its tests ran (Ctrl-C); its results are partial.\n"
    "'latest' and 'latest~N' count complete runs only; `compare` and `history` leave "
    "interrupted\nruns out unless given --include-interrupted."
)


COUNTED = [
    Outcome.REGRESSED, Outcome.INCONCLUSIVE, Outcome.UNSTABLE, Outcome.IMPROVED, Outcome.OK,
]  # fmt: skip
"""The outcomes ``compare`` can give, in the order the tally lists them."""
NOT_GATED = "not gated"
ONLY_ONE = "in one run only"


def _block_ratios(side: dict[str, Any]) -> list[float]:
    """The candidate/reference block ratios of a stored comparison: from ``extra``, else
    recomputed from its samples."""
    from pytest_ortperf.stats import ratio_of_blocks

    extra = side.get("extra")
    if isinstance(extra, dict) and extra.get("block_ratios"):
        return [float(x) for x in extra["block_ratios"]]
    return ratio_of_blocks(side.get("ref_samples") or (), side.get("samples") or ())


def _verdict(a: dict[str, Any], b: dict[str, Any], threshold: float, alpha: float) -> Verdict | str:
    """The verdict of run B's measurement against run A's alone, or why there is none:
    what ``compare`` falls back to where the history up to run A cannot be read
    (:func:`~pytest_ortperf.gating.history_baseline.judge_runs`: runs outside any branch,
    older rows, a latency on another machine class or with other settings).

    Comparisons: B's block ratios against A's (one run: the gate's assumed between-run
    spread); latencies: the unit of replication is the run, so one earlier run leaves B's
    median reported, not gated (``ortperf history`` shows the runs).
    """
    from pytest_ortperf.gating.rules import judge_ratio, ratio_baseline

    try:
        if b["kind"] == "compare":
            baseline_ratios = _block_ratios(a)
            if not baseline_ratios:
                return f"no samples in run {a['run_id']}"
            ratios = _block_ratios(b)
            if not ratios:
                return f"no samples in run {b['run_id']}"
            baseline = ratio_baseline(baseline_ratios)
            return judge_ratio(ratios, baseline, threshold=threshold, alpha=alpha)
        if b["kind"] == "latency":
            if a.get("fingerprint") != b.get("fingerprint"):
                return "other machine"
            if a.get("ort_version") != b.get("ort_version"):
                return "ort_version differs"
            return NOT_GATED  # the legend says why: one run each
    except ValueError as exc:  # samples that are not positive numbers
        return f"unusable samples ({exc})"
    return str(b["kind"])  # memory: reported, never judged


def _side(row: dict[str, Any], suffix: str) -> dict[str, Any]:
    side = {k[: -len(suffix)]: v for k, v in row.items() if k.endswith(suffix)}
    return side | {"kind": row["kind"]}


def _value(side: dict[str, Any]) -> str:
    """The figure compared: the ratio of a comparison, the median latency otherwise."""
    return format_metric("ratio" if side["kind"] == "compare" else "latency", _metric(side))


def _change_cells(verdict: Verdict | str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """``change [interval]``, ``p`` and ``verdict`` cells of a compared pair."""
    if isinstance(verdict, Verdict):
        cell = format_change(verdict.change)
        if math.isfinite(verdict.low) and math.isfinite(verdict.high):
            cell += " " + format_interval(verdict.low, verdict.high)
        p = "-" if verdict.p_value is None else f"{verdict.p_value:.2g}"
        return [cell, p, verdict.outcome.value]
    value_a, value_b = _metric(a), _metric(b)
    finite = math.isfinite(value_a) and math.isfinite(value_b) and value_a != 0
    change = value_b / value_a - 1.0 if finite else None
    return [
        format_change(change),
        "-",
        verdict if verdict == NOT_GATED else f"{NOT_GATED}: {verdict}",
    ]


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_ortperf.gating.history_baseline import judge_runs
    from pytest_ortperf.store.errors import StoreError
    from pytest_ortperf.store.read import interrupted_runs, list_runs, read_results, resolve_run_id

    store = _store(args)
    include = args.include_interrupted
    run_a = resolve_run_id(store, args.run_a, include_interrupted=include)
    run_b = resolve_run_id(store, args.run_b, include_interrupted=include)
    partial = sorted({run_a, run_b} & interrupted_runs(store))
    if partial and not include:
        if len(partial) == 1:
            what = f"run {partial[0]} was interrupted (stopped before all its tests ran): its"
        else:
            what = "runs {} and {} were interrupted (stopped before all their tests ran): their"
            what = what.format(*partial)
        raise UsageError(
            f"{what} results are partial; --include-interrupted compares "
            f"{'it' if len(partial) == 1 else 'them'} anyway"
        )
    a = read_results(store, run=run_a, samples=True).drop_duplicates(KEY, keep="last")
    b = read_results(store, run=run_b, samples=True).drop_duplicates(KEY, keep="last")
    merged = a.merge(b, on=KEY, how="outer", suffixes=("_a", "_b"), indicator=True)

    listed = list_runs(store)

    def judged(key: tuple[str, str, str]) -> Verdict | str | None:
        try:
            verdict = judge_runs(
                store, key, run_a, run_b, threshold=args.threshold, alpha=args.alpha,
                window=args.window, listed=listed,
            )  # fmt: skip
        except StoreError:  # rows the gate cannot read back (older stores): the two runs
            return None
        return NOT_GATED if isinstance(verdict, str) else verdict  # the legend says why

    headers = ["measurement", "kind", f"run {run_a}", f"run {run_b}", "change [interval]"]
    headers += ["p", "verdict"]
    rows = []
    counts = dict.fromkeys([*(o.value for o in COUNTED), NOT_GATED, ONLY_ONE], 0)
    for record in merged.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        side_a, side_b = _side(row, "_a"), _side(row, "_b")
        if row["_merge"] != "both":
            only = run_a if row["_merge"] == "left_only" else run_b
            cells = ["", "-", f"only in run {only}"]
            counts[ONLY_ONE] += 1
        else:
            key = (str(row["test"]), str(row["name"]), str(row["kind"]))
            verdict = judged(key) if key[2] in ("compare", "latency") else None
            if verdict is None:  # not on a branch, smoke, memory...: the two runs alone
                verdict = _verdict(side_a, side_b, args.threshold, args.alpha)
            cells = _change_cells(verdict, side_a, side_b)
            gated = isinstance(verdict, Verdict) and verdict.outcome.value in counts
            counts[verdict.outcome.value if gated else NOT_GATED] += 1  # type: ignore[union-attr]
        rows.append(
            [
                f"{row['test']}::{row['name']}",
                str(row["kind"]),
                _value(side_a) if row["_merge"] != "right_only" else "-",
                _value(side_b) if row["_merge"] != "left_only" else "-",
                *cells,
            ]
        )
    if rows:
        width = terminal_width()
        print(table(headers, fit_first_column(headers, rows, width), width=width))
    else:
        print(f"runs {run_a} and {run_b} hold no measurements")
    tally = ", ".join(f"{n} {outcome}" for outcome, n in counts.items() if n)
    print(
        f"\nrun {run_b} vs run {run_a}: {tally or 'nothing in common'}\n"
        f"threshold {args.threshold * 100:g}%, alpha {args.alpha:g}, intervals at "
        f"{(1 - 2 * args.alpha) * 100:g}%: run {run_b} against the history up to run "
        f"{run_a}\n(at most {args.window} runs on its branch and machine class), as the "
        f"gate's history baseline judges;\nlatencies are not gated with fewer than "
        f"{MIN_HISTORY_RUNS} such runs"
    )
    for run in partial:
        print(f"run {run} was interrupted: its results are partial")
    return EXIT_REGRESSED if counts[Outcome.REGRESSED.value] else EXIT_OK


def _flatten(frame: pd.DataFrame) -> pd.DataFrame:
    """Nested values (dicts, lists, tuples) as JSON text, timestamps as ISO text."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object:
            out[col] = [
                json.dumps(v, sort_keys=True) if isinstance(v, (dict, list, tuple)) else v
                for v in out[col]
            ]
    for col in ("started", "finished"):
        if col in out.columns:
            out[col] = [ts.isoformat() for ts in out[col]]
    return out


def cmd_export(args: argparse.Namespace) -> int:
    from pytest_ortperf.files import replacing, write_atomic
    from pytest_ortperf.store.read import read_results

    if args.format == "parquet":
        if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
            raise UsageError("parquet export needs pyarrow: pip install pyarrow")
        if not args.output:
            raise UsageError("parquet is binary: give a file with -o/--output")
    target = Path(args.output) if args.output else None
    if target is not None and not target.parent.is_dir():
        raise UsageError(f"cannot write {target}: no directory {target.parent}")
    frame = read_results(_store(args), test=args.test, name=args.name, samples=args.samples)
    if args.format == "csv":
        text = _flatten(frame).to_csv(index=False)
    elif args.format == "json":
        text = frame.to_json(orient="records", date_format="iso", indent=1) or "[]"
    else:
        text = None
    if target is None:
        assert text is not None
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return EXIT_OK
    # Whole or not at all: a full disk leaves no empty or partial file, and the old one.
    try:
        if text is None:
            with replacing(target) as tmp:
                _flatten(frame).to_parquet(tmp, index=False)
        else:
            write_atomic(target, text)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {_why(exc)}") from None
    print(f"wrote {len(frame)} measurements to {target}", file=sys.stderr)
    return EXIT_OK


def cmd_machines(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.read import list_runs
    from pytest_ortperf.text import machine_label

    frame = list_runs(_store(args))
    frame = frame[~frame["interrupted"].astype(bool)]
    if frame.empty:
        print("the store holds no complete runs", file=sys.stderr)
        return EXIT_OK
    headers = ["machine class", "runs", "branches", "first seen", "last seen", "last commit"]
    rows = []
    groups = frame.fillna({"fingerprint": "-"}).groupby("fingerprint", sort=False)
    for fingerprint, group in groups:
        last = group.iloc[-1]
        branches = sorted({str(b) for b in group["branch"].dropna()})
        label = machine_label(None if fingerprint == "-" else str(fingerprint),
                              last["cpu_model"], last["cores"])  # fmt: skip
        rows.append(
            [
                label,
                str(len(group)),
                ", ".join(branches) or "-",
                _fmt_when(group["started"].iloc[0]),
                _fmt_when(last["started"]),
                _fmt_commit(last),
            ]
        )
    rows.sort(key=lambda row: row[4], reverse=True)  # the most recently seen first
    print(table(headers, rows, width=terminal_width()))
    return EXIT_OK


def _spool_dir(args: argparse.Namespace) -> Path:
    """``--spool``, else ``$ORTPERF_SPOOL``, else the nearest ``.ortperf/spool`` from the
    current directory upward (as :func:`find_store` finds the store)."""
    from pytest_ortperf.store.spool import DEFAULT_SPOOL, SPOOL_ENV, resolve_spool

    if args.spool or os.environ.get(SPOOL_ENV, "").strip():
        return resolve_spool(args.spool, Path.cwd())
    found, _ = find_store(Path.cwd(), DEFAULT_SPOOL)
    return found if found is not None else Path.cwd() / DEFAULT_SPOOL


def cmd_sync(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.spool import SpoolError, pending, sync

    directory = _spool_dir(args)
    try:
        if not pending(directory):
            print(f"nothing to sync: no spooled runs in {directory}")
            return EXIT_OK
        done = sync(_store(args), directory, any_store=args.any_store)
    except SpoolError as exc:
        raise UsageError(str(exc)) from None
    for path, run_id in done.written:
        print(f"{path.name}: stored as run {run_id}")
    for path, meant in done.other_store:
        print(f"{path.name}: left for {meant} (--any-store writes it here)", file=sys.stderr)
    for _path, why in done.damaged:  # why names the file and where it was set aside
        print(f"ortperf: {why}", file=sys.stderr)
    n = len(done.written)
    print(f"{n} spooled run{'' if n == 1 else 's'} written")
    if done.error is not None:
        raise UsageError(f"{done.error}; the other spooled runs stay for the next sync")
    return EXIT_USAGE if done.damaged else EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.write import prune

    n_runs, n_meas = prune(_store(args), args.keep)
    print(f"removed {n_runs} runs ({n_meas} measurements); kept the newest {args.keep}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from pytest_ortperf.files import write_atomic
    from pytest_ortperf.reports.html import build_html
    from pytest_ortperf.reports.writer import report_input_from_store

    data = report_input_from_store(_store(args), args.run, args.last)
    target = Path(args.output)
    try:
        write_atomic(target, build_html(data))
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {_why(exc)}") from None
    print(f"wrote the report of run {data.run_id} to {target}", file=sys.stderr)
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# Parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


MIN_WINDOW = 1
MAX_WINDOW = 1000
"""Bounds of ``compare --window`` (those of ``--ortperf-history-window``)."""


def _window(text: str) -> int:
    value = _positive_int(text)
    if not MIN_WINDOW <= value <= MAX_WINDOW:
        raise argparse.ArgumentTypeError(f"must be {MIN_WINDOW} to {MAX_WINDOW}, got {value}")
    return value


def _fraction(text: str) -> float:
    """``--threshold``: the plugin's rule (``units.threshold_problem``): a fraction below 1,
    or a percentage up to 1000%. Argparse prefixes the option: ``argument --threshold: ...``."""
    try:
        value = parse_fraction(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    problem = threshold_problem(text, value)
    if problem is not None:
        raise argparse.ArgumentTypeError(
            f"{text.strip()} {problem}" if problem.startswith("means") else problem
        )
    return value


def _alpha(text: str) -> float:
    """``--alpha``: a one-sided significance level in (0, 0.5), ``0.01`` or ``1%``."""
    try:
        value = parse_fraction(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < value < 0.5:
        raise argparse.ArgumentTypeError(f"must be above 0 and below 0.5, got {text!r}")
    return value


Subparsers = Any  # argparse's _SubParsersAction is private


def _add_history(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "history",
        parents=[common],
        help="medians and ratios of stored measurements over runs",
        description="Show how each measurement changed over runs, newest last: the median "
        "latency, the candidate/reference ratio with its confidence interval for "
        "comparisons, and the relative change from the previous run.",
    )
    p.add_argument("test", nargs="?", help="only tests whose node id contains this text")
    p.add_argument("--name", help="only measurements with exactly this name")
    p.add_argument(
        "--last", type=_positive_int, default=10, metavar="K", help="last K runs (default 10)"
    )
    p.add_argument("--branch", help="only runs on this git branch")
    p.add_argument(
        "--machine",
        metavar="CLASS",
        help="only runs on this machine class: its fingerprint or a prefix of it "
        "(`ortperf machines` lists them)",
    )
    _add_include_interrupted(p)
    p.set_defaults(func=cmd_history)


def _add_changes(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "changes",
        parents=[common],
        help="steps in the history of each measurement, per machine class",
        description="Find the steps (change points) in the stored history of each "
        "measurement on each machine class: a penalized piecewise-constant fit of the "
        "per-run medians (latencies) or ratios (comparisons), oldest run first, that "
        "ignores single outliers. Each step names the first run after it and its commit, "
        "the level before and after, and the change. Informational: exits 0.",
    )
    p.add_argument("test", nargs="?", help="only tests whose node id contains this text")
    p.add_argument("--branch", help="only runs on this git branch")
    p.add_argument(
        "--machine",
        metavar="CLASS",
        help="only this machine class: its fingerprint or a prefix of it "
        "(`ortperf machines` lists them)",
    )
    p.add_argument(
        "--min-change",
        type=_fraction,
        default=None,
        metavar="FRACTION",
        help="smallest step reported, 0.05 or 5%% (default 2%%)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the change points as JSON")
    p.add_argument(
        "--last",
        type=_positive_int,
        default=CHANGE_POINT_RUNS,
        metavar="K",
        help=f"search the newest K complete runs (default {CHANGE_POINT_RUNS})",
    )
    p.set_defaults(func=cmd_changes)


def _add_machines(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "machines",
        parents=[common],
        help="the machine classes that stored runs, with run counts and when last seen",
        description="List the machine classes of the stored complete runs: the hardware "
        "fingerprint (CPU model, cores, memory, OS, architecture) with the CPU in words, "
        "how many runs each stored, on which branches, and when each was first and last "
        "seen. Give a class (or a prefix of it) to `ortperf history --machine`.",
    )
    p.set_defaults(func=cmd_machines)


def _add_sync(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "sync",
        parents=[common],
        help="write the runs spooled while the store was unreachable",
        description="Write the runs that `pytest --ortperf` spooled because the store could "
        "not be written (a database server down or unreachable) to the store, oldest first, "
        "each exactly once (runs carry a uid made when they started), removing each spool "
        "file once its run is stored. Runs spooled for another store are left unless "
        "--any-store. A file that is not a readable run, or whose run the store cannot "
        "take, is named and moved to the spool's set-aside/ directory, and the sync goes on. "
        "Exit 0 when every run was written, 2 when the store failed (the files stay) or a "
        "file was set aside.",
    )
    p.add_argument(
        "--spool",
        metavar="DIR",
        help="the spool directory (default: $ORTPERF_SPOOL, else the nearest .ortperf/spool "
        "from the current directory up to the project root)",
    )
    p.add_argument(
        "--any-store",
        action="store_true",
        help="also write runs spooled for another store (say, the database moved)",
    )
    p.set_defaults(func=cmd_sync)


def _add_include_interrupted(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--include-interrupted",
        action="store_true",
        help="also use runs stopped before all their tests ran (Ctrl-C; `ortperf runs` "
        "marks them): their results are partial, so they are left out by default",
    )


def _add_runs(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "runs",
        parents=[common],
        help="list stored runs with commit and machine",
        description="List the stored runs, oldest first: id (for `ortperf compare`), start "
        "time, git commit (* = uncommitted changes), machine fingerprint and ORT version.",
    )
    p.add_argument("--last", type=_positive_int, default=0, metavar="K", help="only the last K")
    p.set_defaults(func=cmd_runs)


def _add_compare(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "compare",
        parents=[common],
        help="compare two runs with the gate's rules; exit 1 if anything regressed",
        description="Judge run B against run A, measurement by measurement, as the pytest "
        "gate with a history baseline would: against the newest --window complete runs up "
        "to run A on its branch and machine class, with the gate's statistics. "
        "Comparisons: run B's block ratios against the pooled runs (with fewer than 5, "
        "against run A alone, as a baseline file written from it); latencies: run B's "
        "median against the runs' medians (not gated with fewer than 5), only when "
        "machine, ORT version and session settings match. Regressed: the estimated change "
        "exceeds the threshold and is significant at alpha; inconclusive: beyond the "
        "threshold but not significant, or too noisy to tell. Exit status 1 when something "
        "regressed, 0 otherwise (inconclusive included), 2 on usage or store errors, 3 on "
        "an internal error. 'latest' and 'latest~N' count complete runs only; an "
        "interrupted run (stopped before all its tests ran) is refused unless "
        "--include-interrupted.",
    )
    p.add_argument("run_a", metavar="RUN_A", help="baseline run: an id, 'latest' or 'latest~N'")
    p.add_argument("run_b", metavar="RUN_B", help="run to judge: an id, 'latest' or 'latest~N'")
    p.add_argument(
        "--threshold",
        type=_fraction,
        default=0.05,
        help="relative slowdown that counts as a regression, e.g. 0.05 or 5%% (default 0.05)",
    )
    p.add_argument(
        "--alpha",
        type=_alpha,
        default=0.01,
        help="one-sided significance level of the rank tests, as ini ortperf_alpha "
        "(default 0.01); intervals are at confidence 1 - 2 * alpha",
    )
    p.add_argument(
        "--window",
        type=_window,
        default=10,
        help=f"runs up to run A pooled as its history, {MIN_WINDOW} to {MAX_WINDOW} "
        "(default 10, as --ortperf-history-window)",
    )
    _add_include_interrupted(p)
    p.set_defaults(func=cmd_compare)


def _add_export(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "export",
        parents=[common],
        help="write all stored measurements as CSV, JSON or Parquet",
        description="Export one row per measurement with its run and environment columns.",
    )
    p.add_argument("--format", choices=["csv", "json", "parquet"], default="csv")
    p.add_argument("-o", "--output", metavar="FILE", help="file to write (default: stdout)")
    p.add_argument("--test", help="only tests whose node id contains this text")
    p.add_argument("--name", help="only measurements with exactly this name")
    p.add_argument("--samples", action="store_true", help="include the raw timing samples")
    p.set_defaults(func=cmd_export)


def _add_prune(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "prune",
        parents=[common],
        help="delete old runs, keeping the newest K",
        description="Delete all runs but the newest K, with their measurements and profiles.",
    )
    p.add_argument("--keep", type=_positive_int, required=True, metavar="K")
    p.set_defaults(func=cmd_prune)


def _add_report(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "report",
        parents=[common],
        help="write the HTML report of a stored run",
        description="Write one self-contained HTML file for a stored run: its measurements, "
        "ratios, latency distributions, profiles and the history of the last K runs. "
        "Verdicts are not stored: they are only in reports written during the run "
        "(pytest --ortperf --ortperf-report=FILE.html).",
    )
    p.add_argument("-o", "--output", required=True, metavar="FILE.html", help="file to write")
    p.add_argument("--run", default="latest", help="an id, 'latest' or 'latest~N' (default latest)")
    p.add_argument(
        "--last",
        type=_positive_int,
        default=10,
        metavar="K",
        help="history over the last K runs (default 10)",
    )
    p.set_defaults(func=cmd_report)


_SIZE = re.compile(r"[0-9]+")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _dim(text: str) -> tuple[str, int]:
    name, sep, size = text.partition("=")
    if not sep or not name or not _SIZE.fullmatch(size.strip()):
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE such as batch=1, got {text!r}")
    return name, int(size)


def _shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``--shape INPUT=D1xD2...``: the whole shape of one input (as ``shapes=`` of
    ``ort_feeds``); argparse prefixes the option to an error."""
    name, sep, dims = text.rpartition("=")
    if not sep or not name or not dims.strip():
        raise argparse.ArgumentTypeError(
            f"expected INPUT=D1xD2... such as x=1x3x224x224, got {text!r}"
        )
    parts = [d.strip() for d in dims.split("x")]
    bad = [d for d in parts if not _SIZE.fullmatch(d)]
    if bad:
        raise argparse.ArgumentTypeError(
            f"input {name!r}: {bad[0]!r} is not a size (a whole number, 0 or more) in "
            f"{text!r}; expected INPUT=D1xD2... such as x=1x3x224x224"
        )
    return name, tuple(int(d) for d in parts)


class PinnedValue(NamedTuple):
    """``--value INPUT=V1,V2,...`` as parsed: numbers, converted to the input's dtype once
    the model is loaded (:func:`_pinned_array`)."""

    name: str
    numbers: tuple[int | float, ...]
    scalar: bool


def _number(text: str) -> int | float:
    text = text.strip()
    if _INTEGER.fullmatch(text):
        return int(text)
    return float(text)  # ValueError: not a number ("1e-3", "nan" and "inf" are numbers)


def _pinned_value(text: str) -> PinnedValue:
    """``--value INPUT=V`` (a scalar) or ``INPUT=V1,V2,...`` (a list): the input's value
    (as ``values=`` of ``ort_feeds``); argparse prefixes the option to an error."""
    name, sep, items = text.rpartition("=")
    if not sep or not name or not items.strip():
        raise argparse.ArgumentTypeError(
            f"expected INPUT=VALUE or INPUT=V1,V2,... such as k=3, got {text!r}"
        )
    numbers = []
    for item in items.split(","):
        try:
            numbers.append(_number(item))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"input {name!r}: {item.strip()!r} is not a number in {text!r}; expected "
                "INPUT=VALUE or INPUT=V1,V2,... such as k=3"
            ) from None
    return PinnedValue(name, tuple(numbers), scalar="," not in items)


def _pinned_array(
    spec: InputSpec, pinned: PinnedValue, shape: tuple[int, ...] | None
) -> np.ndarray[Any, Any]:
    """``--value`` of ``spec`` as an array of its dtype: shaped as ``--shape`` says, else as
    the declared shape when it is static (a scalar fills it, a list of as many numbers is
    reshaped), else a scalar or a 1-D list. A number the dtype cannot hold is an error."""
    import numpy as np

    from pytest_ortperf.measuring.feeds import FeedError

    given = f"--value {pinned.name}={','.join(str(n) for n in pinned.numbers)}"
    try:
        dtype = spec.dtype
    except FeedError:
        raise UsageError(
            f"{given}: input {spec.name!r} has type {spec.type}, which --value cannot give"
        ) from None
    if dtype.kind not in "biuf":
        raise UsageError(
            f"{given}: input {spec.name!r} has type {spec.type}; --value gives numbers"
        )
    for n in pinned.numbers:
        if dtype.kind == "f":
            ok = not math.isfinite(n) or math.isfinite(float(np.asarray(n, dtype=dtype)))
            why = f"beyond the range of {dtype}"
        elif dtype.kind == "b":
            ok, why = n in (0, 1), "not 0 or 1 (a boolean)"
        else:
            info = np.iinfo(dtype)
            whole = isinstance(n, int) or n.is_integer()
            ok = whole and info.min <= n <= info.max
            why = f"not a whole number from {info.min} to {info.max}"
        if not ok:
            raise UsageError(f"{given}: {n} is {why}: input {spec.name!r} is {spec.type}")
    array = np.asarray(pinned.numbers, dtype=dtype)
    declared = [d for d in spec.shape if isinstance(d, int) and d >= 0]
    static = tuple(declared) if len(declared) == len(spec.shape) else None
    target = shape if shape is not None else static
    if target is None:
        return array[0] if pinned.scalar else array
    if pinned.scalar:
        return np.full(target, array[0], dtype=dtype)
    if array.size == math.prod(target):
        return array.reshape(target)
    if shape is not None:
        dims = "x".join(str(d) for d in shape)
        raise UsageError(
            f"{given}: {array.size} numbers, but --shape {pinned.name}={dims} holds "
            f"{math.prod(shape)}"
        )
    return array  # the declared shape decides: make_feeds says what it expects


USAGE = {
    "--dim": "--dim NAME=SIZE",
    "--shape": "--shape INPUT=D1xD2...",
    "--value": "--value INPUT=V1,V2,...",
}
"""The profile options that set inputs, as an error that names one spells them."""

_REPR = r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"


def _name(match: re.Match[str]) -> str:
    import ast

    return str(ast.literal_eval(match.group(1)))


def cli_spelling(message: str) -> str:
    """An error of ``make_feeds`` in the words of ``ortperf profile``: ``dims=``,
    ``shapes=`` and ``values=`` become ``--dim``, ``--shape`` and ``--value``, followed by
    the usage of each option named."""
    rules: list[tuple[str, Callable[[re.Match[str]], str]]] = [
        (rf"\bdims=\{{{_REPR}: N\}}", lambda m: f"--dim {_name(m)}=SIZE"),
        (rf"\bshapes=\{{{_REPR}: \(\.\.\.\)\}}", lambda m: f"--shape {_name(m)}=D1xD2..."),
        (rf"\bvalues=\{{{_REPR}: \.\.\.\}}", lambda m: f"--value {_name(m)}=..."),
        (r"^(dims|shapes|values) names", lambda m: f"--{m.group(1)[:-1]} names"),
        (r"\b(dims|shapes|values)=", lambda m: f"--{m.group(1)[:-1]}"),
        (r"\bsmaller dims or shapes\b", lambda m: "smaller --dim or --shape sizes"),
    ]
    for pattern, spelled in rules:
        message = re.sub(pattern, spelled, message)
    named = [usage for option, usage in USAGE.items() if option in message]
    return f"{message} (usage: {', '.join(named)})" if named else message


def cmd_profile(args: argparse.Namespace) -> int:
    import pandas as pd

    from pytest_ortperf.measuring.feeds import FeedError, input_specs, make_feeds
    from pytest_ortperf.measuring.session import OrtSession
    from pytest_ortperf.profiling.run import profile_session

    try:
        session = OrtSession.create(
            args.model, optimization=args.optimization, threads=args.threads
        )
    except (RuntimeError, ValueError) as exc:  # ORT could not load it
        raise UsageError(str(exc)) from None
    shapes = dict(args.shape)
    specs = {spec.name: spec for spec in input_specs(session.sess)}
    values: dict[str, Any] = {}
    for pinned in args.value:
        spec = specs.get(pinned.name)  # an unknown input: make_feeds names the known ones
        values[pinned.name] = (
            pinned.numbers if spec is None else _pinned_array(spec, pinned, shapes.get(spec.name))
        )
    try:
        feeds = make_feeds(
            list(specs.values()), dims=dict(args.dim), shapes=shapes, values=values, seed=args.seed
        )
    except FeedError as exc:
        raise UsageError(cli_spelling(str(exc))) from None
    try:
        profile = profile_session(session, feeds, runs=args.runs, warmup=args.warmup)
    except ValueError as exc:  # --runs 0
        raise UsageError(str(exc)) from None
    except Exception as exc:
        if type(exc).__module__.startswith("onnxruntime"):  # the model fails to run
            raise UsageError(f"onnxruntime could not run {session.label}: {exc}") from None
        raise
    by_op = profile.by_op()[["op_type", "provider", "mean_us", "share", "count_per_run"]]
    with pd.option_context("display.width", 100, "display.max_rows", 200):
        print(f"{session.label}: {args.runs} runs, optimization={args.optimization}")
        print(by_op.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
        runs = profile.runs()
        print(
            f"per run: wall {runs['wall_us'].median():.1f} us, kernels "
            f"{runs['kernel_us'].median():.1f} us, framework {runs['overhead_us'].median():.1f} us"
        )
    if args.trace:
        profile.to_chrome_trace(args.trace)
        print(f"wrote the trace to {args.trace}", file=sys.stderr)
    if args.plot:
        if importlib.util.find_spec("matplotlib") is None:
            raise UsageError("--plot needs matplotlib: pip install 'pytest-ortperf[plots]'")
        from pytest_ortperf.profiling.plots import plot_by_op

        plot_by_op(profile).savefig(args.plot)
        print(f"wrote the plot to {args.plot}", file=sys.stderr)
    return EXIT_OK


def _add_profile(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "profile",
        help="profile an ONNX model with random inputs (per-op kernel times)",
        description="Run a model with random inputs under ORT's profiler (on its own "
        "session, warm-up excluded) and print the time per op type. Nothing is stored; the "
        "profile file ORT writes is removed.",
    )
    p.add_argument("model", help="path to the .onnx file")
    p.add_argument(
        "--dim", action="append", type=_dim, default=[], metavar="NAME=SIZE",
        help="size of a symbolic dim, e.g. --dim batch=1 (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--shape", action="append", type=_shape, default=[], metavar="INPUT=D1xD2...",
        help="whole shape of an input, e.g. --shape x=1x3x224x224: for dims with no name "
        "(repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--value", action="append", type=_pinned_value, default=[], metavar="INPUT=V1,V2,...",
        help="pin an input to numbers instead of random ones, e.g. --value k=3: a scalar or a "
        "comma list, converted to the input's dtype; a scalar fills a static shape, a list is "
        "reshaped to --shape (repeatable)",
    )  # fmt: skip
    p.add_argument("--runs", type=_positive_int, default=20, help="profiled runs (default 20)")
    p.add_argument("--warmup", type=_positive_int, default=3, help="warm-up runs (default 3)")
    p.add_argument(
        "--optimization", default="all", choices=["disable", "basic", "extended", "all"],
        help="ORT graph optimization level (default all)",
    )  # fmt: skip
    p.add_argument("--threads", type=_positive_int, default=1, help="intra-op threads (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--trace", metavar="FILE.json", help="also write a Chrome/Perfetto trace")
    p.add_argument("--plot", metavar="FILE.png", help="also save the per-op chart (plots extra)")
    p.set_defaults(func=cmd_profile)


@dataclass(frozen=True)
class ABResult:
    """An A/B of two environments on one model: the comparison (ratio B/A), its verdict
    without baseline, and what changed in the optimized graphs and the profiles."""

    a: str
    b: str
    versions: tuple[str, str]
    comparison: Comparison
    verdict: Verdict
    histograms: tuple[dict[str, int], dict[str, int]]
    structure: tuple[str, ...]
    """One line per op type whose count differs in the optimized graphs, fusions named."""
    profile: tuple[str, ...]
    """Per-op-type profile difference A -> B (empty when not profiled)."""
    pairs: tuple[float, ...] = ()
    """The ratio B/A each worker-process pair read (its Hodges-Lehmann estimate)."""

    @property
    def regressed(self) -> bool:
        return self.verdict.outcome is Outcome.REGRESSED

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": {"environment": self.a, "onnxruntime": self.versions[0],
                  "op_histogram": self.histograms[0]},
            "b": {"environment": self.b, "onnxruntime": self.versions[1],
                  "op_histogram": self.histograms[1]},
            "comparison": self.comparison.to_dict(),
            "verdict": self.verdict.to_dict(),
            "structure": list(self.structure),
            "profile": list(self.profile),
            "pairs": list(self.pairs),
        }  # fmt: skip

    def lines(self) -> list[str]:
        """The report in words: versions, ratio and interval, verdict, outputs, graphs,
        profiles."""
        from pytest_ortperf.units import format_ratio_interval

        c = self.comparison
        a, b = self.versions
        out = [
            f"A: {self.a} (onnxruntime {a}), median {format_seconds(c.reference.median)}",
            f"B: {self.b} (onnxruntime {b}), median {format_seconds(c.candidate.median)}",
            f"B / A: {format_ratio_interval(c.ratio, c.low, c.high)} "
            f"({c.confidence:.0%} interval, {len(c.block_ratios)} block pairs"
            + (f" from {len(self.pairs)} worker-process pairs)" if self.pairs else ")"),
        ]
        if len(self.pairs) > 1:
            read = ", ".join(f"{r:.3f}" for r in self.pairs)
            out.append(f"each process pair read B / A = {read}")
        out.append(f"verdict: {self.verdict.message}")
        if c.output_diffs:
            worst = max(c.output_diffs, key=lambda d: d.max_abs)
            out.append(
                f"outputs agree: {len(c.output_diffs)} compared, largest difference "
                f"{worst.max_abs:.3g} abs, {worst.max_rel:.3g} rel ({worst.output})"
            )
        if self.structure:
            out.append("optimized graphs differ, A -> B:")
            out += [f"  {line}" for line in self.structure]
        else:
            nodes = sum(self.histograms[0].values())
            what = "node" if nodes == 1 else "nodes"
            out.append(f"optimized graphs: same op types and counts ({nodes} {what})")
        if self.profile:
            out.append("profiles, A -> B (taken in each worker, outside the timed runs):")
            out += [f"  {line}" for line in self.profile]
        return out


AB_PROCESSES = 4
"""Worker-process pairs an A/B measures by default (``ortperf ab --processes``)."""


def ab(
    model: Any,
    a: str | os.PathLike[str] | Sequence[str],
    b: str | os.PathLike[str] | Sequence[str],
    *,
    dims: Mapping[str, int] | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    feeds: Mapping[str, Any] | None = None,
    providers: Sequence[str] | None = None,
    threads: int = 1,
    budget_s: float = 2.0,
    threshold: float = 0.05,
    alpha: float = 0.01,
    api: str = "iobinding",
    atol: float = 1e-4,
    rtol: float = 1e-3,
    profile_runs: int = 20,
    seed: int = 0,
    cache: Path | None = None,
    timeout_s: float = 60.0,
    processes: int = AB_PROCESSES,
) -> ABResult:
    """A/B of ``model`` in environments ``a`` and ``b`` (requirements or interpreter
    paths): feeds generated once here (or ``feeds``) and sent to every worker, outputs
    checked, then ``processes`` pairs of fresh worker processes (one of A, one of B each,
    started in parallel) measured in the same ABBA rounds for ``budget_s``. Each pair
    gives one estimate of B/A; the ratio is their mean and its interval comes from their
    spread (t on ``processes - 1`` degrees of freedom, never narrower than the blocks'
    own error), so a difference between processes widens it instead of reading as a
    regression. The ratio is judged against ``threshold`` without baseline; the
    optimized graphs' op types and the profiles of both are compared (profiles outside
    the timed runs; ``profile_runs=0``: none). What ``ortperf ab`` runs; ``timeout_s``
    bounds each wait for a worker's answer. ``processes`` is at most
    :data:`~pytest_ortperf.gating.ab.MAX_PROCESSES`; 1 measures one pair and assumes a 1%
    spread between processes."""
    import contextlib
    import dataclasses

    from pytest_ortperf.gating.ab import MAX_PROCESSES, histogram_changes, judge_ab_pairs
    from pytest_ortperf.measuring.engine import EngineConfig
    from pytest_ortperf.measuring.feeds import make_feeds
    from pytest_ortperf.recorder import (
        check_outputs_ab,
        comparison,
        merge_runs,
        profile_lines,
        profile_runs_for,
        warn_unsettled,
    )
    from pytest_ortperf.remote.sessions import (
        RemoteEnvironment,
        RemoteSession,
        arm_result,
        measure_pairs,
        start_sessions,
    )

    if isinstance(processes, bool) or not isinstance(processes, int):
        raise ValueError(f"processes must be a whole number, got {processes!r}")
    if not 1 <= processes <= MAX_PROCESSES:
        raise ValueError(f"processes must be between 1 and {MAX_PROCESSES}, got {processes}")
    from pytest_ortperf.measuring.session import load_model_bytes

    _, label = load_model_bytes(model)  # a missing file fails here, before any worker
    with contextlib.ExitStack() as stack:
        envs = [
            stack.enter_context(RemoteEnvironment(spec, cache=cache, timeout_s=timeout_s))
            for spec in (a, b)
        ]

        def maker(env: RemoteEnvironment, arm: str) -> Callable[[], RemoteSession]:
            # the model as given (a path is read by each session, and named by it in errors)
            return lambda: env.session(
                model, name=f"{label} [{arm}]", providers=providers, threads=threads
            )

        arms = ((envs[0], "A"), (envs[1], "B"))
        started = start_sessions([maker(env, arm) for _ in range(processes) for env, arm in arms])
        pairs = [(started[2 * j], started[2 * j + 1]) for j in range(processes)]
        ref, cand = pairs[0]
        if feeds is None:
            feeds = make_feeds(ref.get_inputs(), dims=dims, shapes=shapes, seed=seed)
        what = f"A/B of {label}: onnxruntime {cand.version} (B) vs {ref.version} (A)"
        diffs = check_outputs_ab(ref, cand, feeds, api=api, atol=atol, rtol=rtol, what=what)
        config = EngineConfig(budget_s=budget_s)
        samples = measure_pairs(pairs, feeds, api, config)
        warn_unsettled(label, *(s for pair in samples for s in pair))
        parts = []
        for j, ((r, c), (s_ref, s_cand)) in enumerate(zip(pairs, samples, strict=True)):
            first = j == 0  # the record's session info (op types) is the first pair's
            parts.append(
                comparison(
                    arm_result("ortperf ab", f"{label}:reference", api, s_ref, r, first),
                    arm_result("ortperf ab", f"{label}:candidate", api, s_cand, c, first),
                    label,
                    0.95,
                    tuple(diffs),
                )
            )
        verdict = judge_ab_pairs([p.block_ratios for p in parts], threshold=threshold,
                                 alpha=alpha)  # fmt: skip
        merged = merge_runs(parts) if len(parts) > 1 else parts[0]
        # The record's ratio and interval are the verdict's (over the process pairs).
        result = dataclasses.replace(
            merged, ratio=verdict.current, low=1.0 + verdict.low, high=1.0 + verdict.high,
            confidence=1.0 - 2.0 * alpha, measured=True,
        )  # fmt: skip
        hists = (ref.op_histogram(), cand.op_histogram())
        per_call = max(result.reference.median, result.candidate.median)
        runs = profile_runs_for(per_call, profile_runs)
        profile = profile_lines(ref, cand, feeds, runs=runs) if profile_runs else []
        ratios = tuple(p.ratio for p in parts)
        return ABResult(
            envs[0].label, envs[1].label, (ref.version, cand.version), result, verdict,
            hists, tuple(histogram_changes(*hists)), tuple(profile), ratios,
        )  # fmt: skip


def _load_npz(path: str) -> dict[str, Any]:
    """``--feeds``: an .npz's arrays, headers checked before reading (a FeedError naming
    the file otherwise, as ``ort_feeds(from_path=)`` gives)."""
    from pytest_ortperf.measuring.feeds import FeedError
    from pytest_ortperf.measuring.recorded_feeds import read_npz

    try:
        return read_npz(path)
    except FeedError as exc:
        raise UsageError(f"--feeds {exc}") from None


def cmd_ab(args: argparse.Namespace) -> int:
    from pytest_ortperf.files import write_atomic
    from pytest_ortperf.measuring.feeds import FeedError
    from pytest_ortperf.recorder import OutputMismatch
    from pytest_ortperf.remote.sessions import WorkerError
    from pytest_ortperf.remote.venvs import EnvironmentSetupError

    target = Path(args.json) if args.json else None
    for given in (args.json, args.html):
        if given and not Path(given).parent.is_dir():
            raise UsageError(f"cannot write {given}: no directory {Path(given).parent}")
    started = time.time()
    providers = [p.strip() for p in args.providers.split(",") if p.strip()] or None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = ab(
                args.model, args.a, args.b, dims=dict(args.dim), shapes=dict(args.shape),
                feeds=_load_npz(args.feeds) if args.feeds else None, providers=providers,
                threads=args.threads, budget_s=args.budget, threshold=args.threshold,
                alpha=args.alpha, profile_runs=args.profile_runs, processes=args.processes,
            )  # fmt: skip
    except KeyboardInterrupt:
        # Ctrl-C: the workers are closed on the way out (the sessions' context), no
        # traceback; 130 is the shell's status for a SIGINT.
        print("ortperf: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except FeedError as exc:
        raise UsageError(cli_spelling(str(exc))) from None
    except (EnvironmentSetupError, WorkerError, OutputMismatch, ValueError) as exc:
        raise UsageError(str(exc)) from None
    for line in result.lines():
        print(escape_control(line))
    for warning in caught:
        print(f"ortperf: warning: {escape_control(str(warning.message))}", file=sys.stderr)
    if target is not None:
        try:
            write_atomic(target, json.dumps(result.to_dict(), indent=1) + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write {target}: {_why(exc)}") from None
        print(f"wrote the A/B to {target}", file=sys.stderr)
    if args.html:
        _write_ab_html(Path(args.html), result, started)
    return EXIT_REGRESSED if result.regressed else EXIT_OK


def _write_ab_html(target: Path, result: ABResult, started: float) -> None:
    """The A/B as the HTML report of a run of its one comparison, its verdict and, as
    notes, the versions, outputs, optimized graphs and profiles."""
    from pytest_ortperf.files import write_atomic
    from pytest_ortperf.machine import collect_environment
    from pytest_ortperf.reports.html import ReportInput, build_html
    from pytest_ortperf.results import Judgement

    record = result.comparison
    data = ReportInput(
        records=(record,),
        judgements=(Judgement(record.test, record.name, (result.verdict,)),),
        environment=collect_environment(),
        started=started,
        title=f"ortperf ab: {record.name}",
        notes=tuple(result.lines()),
        threshold=result.verdict.threshold,
    )
    try:
        write_atomic(target, build_html(data))
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {_why(exc)}") from None
    print(f"wrote the report to {target}", file=sys.stderr)


def _add_ab(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "ab",
        help="A/B a model across two onnxruntime versions or environments",
        description="Run MODEL in two environments (each a pip requirement such as "
        "onnxruntime==1.31.1, created once in the cache ($ORTPERF_ENV_CACHE, default "
        "~/.cache/pytest-ortperf/envs), or the path of a Python interpreter or venv), each in "
        "a worker process, on the same random inputs; check that the outputs agree, time "
        "blocks interleaved in ABBA order, and print the ratio B/A with its interval, the "
        "op types of both optimized graphs and the per-op-type profile difference. Exit "
        "status 1 when B is slower than A by more than the threshold.",
    )
    p.add_argument("model", help="path to the .onnx file")
    p.add_argument("--a", required=True, metavar="REQ_OR_PATH", help="environment A (old)")
    p.add_argument("--b", required=True, metavar="REQ_OR_PATH", help="environment B (new)")
    p.add_argument(
        "--dim", action="append", type=_dim, default=[], metavar="NAME=SIZE",
        help="size of a symbolic dim, e.g. --dim batch=1 (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--shape", action="append", type=_shape, default=[], metavar="INPUT=D1xD2...",
        help="whole shape of an input, e.g. --shape x=1x3x224x224 (repeatable)",
    )  # fmt: skip
    p.add_argument("--feeds", metavar="FILE.npz", help="inputs from a .npz (one array per input)")
    p.add_argument(
        "--providers", default="", metavar="EP[,EP...]",
        help="execution providers, comma-separated (default: CPUExecutionProvider)",
    )  # fmt: skip
    p.add_argument("--threads", type=_positive_int, default=1, help="intra-op threads (default 1)")
    p.add_argument(
        "--budget", type=float, default=2.0, metavar="S",
        help="seconds of timed blocks, both arms together (default 2)",
    )  # fmt: skip
    p.add_argument(
        "--threshold", type=_fraction, default=0.05, metavar="FRACTION",
        help="largest slowdown of B tolerated, e.g. 5%% or 0.05 (default 5%%)",
    )  # fmt: skip
    p.add_argument(
        "--alpha", type=_alpha, default=0.01,
        help="one-sided significance of a regression (default 0.01)",
    )  # fmt: skip
    p.add_argument(
        "--profile-runs", type=_positive_int, default=20, metavar="N",
        help="profiled runs per profile, outside the timed ones; two profiles per "
        "environment, the least disturbed kept (default 20; 0: no profiles)",
    )  # fmt: skip
    p.add_argument(
        "--processes", type=_ab_processes, default=AB_PROCESSES, metavar="K",
        help="pairs of worker processes (one of A, one of B each), measured interleaved; "
        "the interval comes from the spread between them (default "
        f"{AB_PROCESSES}, at most 16; 1: one pair, a 1%% spread assumed)",
    )  # fmt: skip
    p.add_argument("--json", metavar="FILE", help="also write the A/B as JSON")
    p.add_argument("--html", metavar="FILE.html", help="also write the A/B as an HTML report")
    p.set_defaults(func=cmd_ab)


def _ab_processes(text: str) -> int:
    from pytest_ortperf.gating.ab import MAX_PROCESSES

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_PROCESSES:
        raise argparse.ArgumentTypeError(f"between 1 and {MAX_PROCESSES}, got {value}")
    return value


COMMANDS: list[Callable[[Subparsers, argparse.ArgumentParser], None]] = [
    _add_history,
    _add_runs,
    _add_compare,
    _add_export,
    _add_prune,
    _add_report,
    _add_profile,
    _add_machines,
    _add_sync,
    _add_changes,
    _add_ab,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``ortperf`` parser; each command sets ``func`` to its handler."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        default=None,
        metavar="PATH_OR_URL",
        help="results store: a file or SQLAlchemy URL (default: $ORTPERF_STORE, else the "
        "nearest .ortperf/results.sqlite from the current directory up to the project root, "
        "as pytest finds its rootdir)",
    )
    parser = argparse.ArgumentParser(
        prog="ortperf",
        description="Browse the performance results that `pytest --ortperf` stored, "
        "or profile a model outside pytest.",
        epilog=f"{EXIT_STATUS}\n\nRun `ortperf COMMAND --help` for the options of a command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(sub, common)
    return parser


def _quiet_stdout() -> None:
    """After a broken pipe: what is left in stdout's buffer goes nowhere, so the flush at
    exit cannot fail ("Exception ignored ... BrokenPipeError")."""
    try:
        fileno = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fileno)
    finally:
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ortperf`` command; returns the exit status (:data:`EXIT_STATUS`)."""
    from pytest_ortperf.store.connection import resolve_store
    from pytest_ortperf.store.errors import StoreError
    from pytest_ortperf.store.secrets import redact_url

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.func

    def shown(text: str) -> str:
        # A driver's message may quote the store URL: its credentials never show.
        return redact_url(text, resolve_store(getattr(args, "store", None), Path.cwd()))

    try:
        status = handler(args)
        sys.stdout.flush()  # a broken pipe shows here, not at exit
        return status
    except BrokenPipeError:  # `ortperf export | head`: the reader has all it wanted
        _quiet_stdout()
        return EXIT_OK
    except (StoreError, UsageError) as exc:
        print(f"ortperf: error: {shown(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # a file named on the command line: missing, unreadable...
        full = "disk full: " if _why(exc).startswith("disk full") else ""
        print(f"ortperf: error: {full}{shown(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        print(
            f"ortperf: internal error: {shown(f'{type(exc).__name__}: {exc}')}\n"
            "This is a bug in pytest-ortperf; please report it with the traceback below.",
            file=sys.stderr,
        )
        print(shown(traceback.format_exc()), file=sys.stderr, end="")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
