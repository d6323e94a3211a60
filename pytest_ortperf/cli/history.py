"""``ortperf history`` and ``ortperf changes``: each measurement over the stored runs."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING, Any

import pytest_ortperf.cli.tables as tables
from pytest_ortperf.cli.common import (
    EXIT_OK,
    KEY,
    RUNS,
    THRESHOLD,
    Subparsers,
    add_include_interrupted,
    add_machine,
    machine_class,
    store_of,
    writable,
    write_text,
)
from pytest_ortperf.gating.settings import CHANGE_POINT_RUNS
from pytest_ortperf.reports.terminal import ELLIPSIS
from pytest_ortperf.text import escape_control
from pytest_ortperf.units import format_change, format_metric, format_seconds

if TYPE_CHECKING:
    import pandas as pd

INVALID = "invalid"
"""What ``ortperf history`` shows for a stored figure that is no measurement (not finite,
zero or negative: a damaged or hand-edited row)."""


BRANCH_WIDTH = 11
MACHINE_WIDTH = 8
"""Widths of ``ortperf history``'s branch and machine columns (a machine class prefix is
what ``--machine`` takes), so that a row fits 100 columns with its change."""


def cmd_history(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.read import read_results

    frame = read_results(
        store_of(args),
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
        value = tables.metric(row)
        median = row["median"]
        if tables.missing(median):
            median_cell = "-"
        else:
            median_cell = format_seconds(median) if _valid(median) else INVALID
        if tables.missing(row.get("ratio")):
            ratio_cell = "-"
        elif all(_valid(row.get(k)) for k in ("ratio", "low", "high")):
            ratio_cell = tables.ratio(row)
        else:
            ratio_cell = INVALID
        change = None
        if _valid(value):
            change = None if previous is None else value / previous - 1.0
            previous = value
        rows.append(
            [
                str(row["run_id"]),
                tables.when(row["started"]),
                tables.commit(row),
                _cut(escape_control(tables.text(row["branch"])), BRANCH_WIDTH),  # as shown
                tables.text(row["fingerprint"])[:MACHINE_WIDTH],
                tables.text(row["ort_version"]),
                median_cell,
                ratio_cell,
                format_change(change) if change is not None or _valid(value) else INVALID,
            ]
        )
    title = f"{test}  [{name}]  {kind} via {api}: change of the {what}"
    return escape_control(title) + "\n" + tables.table(headers, rows)


def cmd_changes(args: argparse.Namespace) -> int:
    from itertools import groupby

    from pytest_ortperf.gating.changes import MIN_CHANGE
    from pytest_ortperf.gating.history_changes import history_changes
    from pytest_ortperf.store.read import list_runs

    min_change = MIN_CHANGE if args.min_change is None else args.min_change
    store = store_of(args)
    machine = None
    if args.machine is not None:
        machine = machine_class(list_runs(store), args.machine)
    target = writable(args.json)
    found = history_changes(
        store, branch=args.branch, machine=machine, test=args.test, min_change=min_change,
        last=args.last,
    )  # fmt: skip
    if target is not None:
        write_text(target, json.dumps([_change_json(c) for c in found], indent=1) + "\n")
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
        blocks.append(head + "\n" + tables.table(headers, rows))
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


def add_history(sub: Subparsers, common: argparse.ArgumentParser) -> None:
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
    p.add_argument("--last", type=RUNS, default=10, metavar="K", help="last K runs (default 10)")
    p.add_argument("--branch", help="only runs on this git branch")
    add_machine(p, "only runs on this machine class")
    add_include_interrupted(p)
    p.set_defaults(func=cmd_history)


def add_changes(sub: Subparsers, common: argparse.ArgumentParser) -> None:
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
    add_machine(p, "only this machine class")
    p.add_argument(
        "--min-change",
        type=THRESHOLD,
        default=None,
        metavar="FRACTION",
        help="smallest step reported, 0.05 or 5%% (default 2%%)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the change points as JSON")
    p.add_argument(
        "--last",
        type=RUNS,
        default=CHANGE_POINT_RUNS,
        metavar="K",
        help=f"search the newest K complete runs (default {CHANGE_POINT_RUNS})",
    )
    p.set_defaults(func=cmd_changes)
