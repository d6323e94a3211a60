"""``ortperf runs`` and ``ortperf machines``: the stored runs, and the machine classes
that stored them."""

from __future__ import annotations

import argparse
import sys

import pytest_ortperf.cli.tables as tables
from pytest_ortperf import values
from pytest_ortperf.cli.common import EXIT_OK, Subparsers, counted, store_of
from pytest_ortperf.units import format_seconds

INTERRUPTED_NOTE = (
    "interrupted: stopped before all its tests ran (Ctrl-C); its results are partial.\n"
    "'latest' and 'latest~N' count complete runs only; `compare` and `history` leave "
    "interrupted\nruns out unless given --include-interrupted."
)


def cmd_runs(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.read import list_runs

    frame = list_runs(store_of(args))
    if frame.empty:
        print("the store holds no runs", file=sys.stderr)
        return EXIT_OK
    if args.last:
        frame = frame.tail(args.last)
    headers = ["run", "started", "took", "commit", "branch", "machine", "ort", "cpu", "results"]
    rows = [
        [
            str(row["run_id"]),
            tables.when(row["started"]),
            format_seconds((row["finished"] - row["started"]).total_seconds()),
            tables.commit(row),
            tables.text(row["branch"]),
            tables.text(row["fingerprint"]),
            tables.text(row["ort_version"]),
            tables.text(row["cpu_model"]),
            str(row["measurements"]),
        ]
        for row in frame.to_dict("records")
    ]
    marked = bool(frame["interrupted"].any())
    if marked:  # a column of its own only when there is something to mark
        headers.append("status")
        for row, interrupted in zip(rows, frame["interrupted"], strict=True):
            row.append("interrupted" if interrupted else "complete")
    print(tables.table(headers, rows, width=tables.terminal_width()))
    if marked:
        print(f"\n{INTERRUPTED_NOTE}")
    return EXIT_OK


def cmd_machines(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.read import list_runs
    from pytest_ortperf.text import machine_label

    frame = list_runs(store_of(args))
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
                tables.when(group["started"].iloc[0]),
                tables.when(last["started"]),
                tables.commit(last),
            ]
        )
    rows.sort(key=lambda row: row[4], reverse=True)  # the most recently seen first
    print(tables.table(headers, rows, width=tables.terminal_width()))
    return EXIT_OK


def add_runs(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "runs",
        parents=[common],
        help="list stored runs with commit and machine",
        description="List the stored runs, oldest first: id (for `ortperf compare`), start "
        "time, git commit (* = uncommitted changes), machine fingerprint and ORT version.",
    )
    p.add_argument(
        "--last", type=counted(0, values.MAX_RUNS, "runs"), default=0, metavar="K",
        help="only the last K (default 0: all)",
    )  # fmt: skip
    p.set_defaults(func=cmd_runs)


def add_machines(sub: Subparsers, common: argparse.ArgumentParser) -> None:
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
