"""``ortperf prune``: delete old runs from the store."""

from __future__ import annotations

import argparse

from pytest_ortperf import values
from pytest_ortperf.cli.common import EXIT_OK, Subparsers, counted, store_of


def cmd_prune(args: argparse.Namespace) -> int:
    from pytest_ortperf.store.write import prune

    n_runs, n_meas = prune(store_of(args), args.keep)
    print(f"removed {n_runs} runs ({n_meas} measurements); kept the newest {args.keep}")
    return EXIT_OK


def add_prune(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "prune",
        parents=[common],
        help="delete old runs, keeping the newest K",
        description="Delete all runs but the newest K, with their measurements and profiles.",
    )
    p.add_argument(
        "--keep", type=counted(0, values.MAX_RUNS, "runs"), required=True, metavar="K",
        help=f"runs to keep, 0 to {values.MAX_RUNS} (0: delete every run)",
    )  # fmt: skip
    p.set_defaults(func=cmd_prune)
