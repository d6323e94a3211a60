"""``ortperf sync``: write the runs spooled while the store was unreachable."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pytest_ortperf.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    Subparsers,
    UsageError,
    find_store,
    store_of,
)


def _spool_dir(args: argparse.Namespace) -> Path:
    """``--spool``, else ``$ORTPERF_SPOOL``, else the nearest ``.ortperf/spool`` from the
    current directory upward (as :func:`~pytest_ortperf.cli.common.find_store` finds the
    store)."""
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
        done = sync(store_of(args), directory, any_store=args.any_store)
    except SpoolError as exc:
        raise UsageError(str(exc)) from None
    for path, run_id in done.written:
        print(f"{path.name}: stored as run {run_id}")
    for path, meant in done.other_store:
        print(f"{path.name}: left for {meant} (--any-store writes it here)", file=sys.stderr)
    for _path, reason in done.damaged:  # names the file and where it was set aside
        print(f"ortperf: {reason}", file=sys.stderr)
    n = len(done.written)
    print(f"{n} spooled run{'' if n == 1 else 's'} written")
    if done.error is not None:
        raise UsageError(f"{done.error}; the other spooled runs stay for the next sync")
    return EXIT_USAGE if done.damaged else EXIT_OK


def add_sync(sub: Subparsers, common: argparse.ArgumentParser) -> None:
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
