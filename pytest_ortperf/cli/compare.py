"""``ortperf compare``: run B judged against run A, as the gate would."""

from __future__ import annotations

import argparse
import math
from typing import Any

import pytest_ortperf.cli.tables as tables
from pytest_ortperf import values
from pytest_ortperf.cli.common import (
    ALPHA,
    EXIT_OK,
    EXIT_REGRESSED,
    KEY,
    THRESHOLD,
    Subparsers,
    UsageError,
    add_include_interrupted,
    counted,
    store_of,
)
from pytest_ortperf.cli.ids import fit_first_column
from pytest_ortperf.gating.settings import DEFAULT_ALPHA, MIN_HISTORY_RUNS
from pytest_ortperf.gating.two_runs import NOT_GATED
from pytest_ortperf.results import Outcome, Verdict
from pytest_ortperf.units import format_change, format_interval, format_metric

COUNTED = [
    Outcome.REGRESSED, Outcome.INCONCLUSIVE, Outcome.UNSTABLE, Outcome.IMPROVED, Outcome.OK,
]  # fmt: skip
"""The outcomes ``compare`` can give, in the order the tally lists them."""
ONLY_ONE = "in one run only"

MIN_WINDOW = 1
"""The fewest runs ``--window`` pools: with fewer than
:data:`~pytest_ortperf.gating.settings.MIN_HISTORY_RUNS`, a comparison is judged against run
A alone (the pytest option refuses them: they never gate there)."""


def _side(row: dict[str, Any], suffix: str) -> dict[str, Any]:
    side = {k[: -len(suffix)]: v for k, v in row.items() if k.endswith(suffix)}
    return side | {"kind": row["kind"]}


def _value(side: dict[str, Any]) -> str:
    """The figure compared: the ratio of a comparison, the median latency otherwise."""
    return format_metric("ratio" if side["kind"] == "compare" else "latency", tables.metric(side))


def _change_cells(verdict: Verdict | str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """``change [interval]``, ``p`` and ``verdict`` cells of a compared pair."""
    if isinstance(verdict, Verdict):
        cell = format_change(verdict.change)
        if math.isfinite(verdict.low) and math.isfinite(verdict.high):
            cell += " " + format_interval(verdict.low, verdict.high)
        p = "-" if verdict.p_value is None else f"{verdict.p_value:.2g}"
        return [cell, p, verdict.outcome.value]
    value_a, value_b = tables.metric(a), tables.metric(b)
    finite = math.isfinite(value_a) and math.isfinite(value_b) and value_a != 0
    change = value_b / value_a - 1.0 if finite else None
    return [
        format_change(change),
        "-",
        verdict if verdict == NOT_GATED else f"{NOT_GATED}: {verdict}",
    ]


def _refuse_interrupted(partial: list[int]) -> None:
    if len(partial) == 1:
        what = f"run {partial[0]} was interrupted (stopped before all its tests ran): its"
    else:
        what = "runs {} and {} were interrupted (stopped before all their tests ran): their"
        what = what.format(*partial)
    raise UsageError(
        f"{what} results are partial; --include-interrupted compares "
        f"{'it' if len(partial) == 1 else 'them'} anyway"
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_ortperf.gating.history_baseline import judge_runs
    from pytest_ortperf.gating.two_runs import judge_two_runs
    from pytest_ortperf.store.errors import StoreError
    from pytest_ortperf.store.read import (
        interrupted_runs,
        list_runs,
        read_results,
        resolve_run_id,
    )

    store = store_of(args)
    include = args.include_interrupted
    run_a = resolve_run_id(store, args.run_a, include_interrupted=include)
    run_b = resolve_run_id(store, args.run_b, include_interrupted=include)
    partial = sorted({run_a, run_b} & interrupted_runs(store))
    if partial and not include:
        _refuse_interrupted(partial)
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
                verdict = judge_two_runs(side_a, side_b, threshold=args.threshold, alpha=args.alpha)
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
        width = tables.terminal_width()
        print(tables.table(headers, fit_first_column(headers, rows, width), width=width))
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


def add_compare(sub: Subparsers, common: argparse.ArgumentParser) -> None:
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
        type=THRESHOLD,
        default=0.05,
        help="relative slowdown that counts as a regression, e.g. 0.05 or 5%% (default 0.05)",
    )
    p.add_argument(
        "--alpha",
        type=ALPHA,
        default=DEFAULT_ALPHA,
        help="one-sided significance level of the rank tests, as ini ortperf_alpha, "
        f"{values.MIN_ALPHA:g} to below {values.MAX_ALPHA:g} (default {DEFAULT_ALPHA:g}); "
        "intervals are at confidence 1 - 2 * alpha",
    )
    p.add_argument(
        "--window",
        type=counted(MIN_WINDOW, values.MAX_HISTORY_WINDOW, "runs"),
        default=10,
        help=f"runs up to run A pooled as its history, {MIN_WINDOW} to "
        f"{values.MAX_HISTORY_WINDOW} (default 10, as --ortperf-history-window)",
    )
    add_include_interrupted(p)
    p.set_defaults(func=cmd_compare)
