"""The ``ortperf`` command: browse, compare, export and prune the results store, profile
a model, A/B it across two environments.

Exit status (:data:`~pytest_ortperf.cli.common.EXIT_STATUS`): 0 success, 1 ``compare`` or
``ab`` found a regression, 2 usage or input error (bad arguments, a store missing, corrupt
or unreadable, an output that cannot be written), 3 internal error (a bug: a short message
and the traceback on stderr).

One thin module per command group, each with its parsers beside its handlers; real work
lives in the families (the store, the gate, ``remote.ab``):

- ``common``: exit codes, the usage error, finding the store, option types over the shared
  value checks (:mod:`pytest_ortperf.values`)
- ``tables``, ``ids``: printing stored rows; ids shortened to fit a column
- ``runs``: ``runs``, ``machines``; ``history``: ``history``, ``changes``
- ``compare``: ``compare``; ``export``: ``export``, ``report``
- ``prune``: ``prune``; ``sync``: ``sync``
- ``inputs``: ``--dim``, ``--shape``, ``--value``; ``profile``: ``profile``; ``ab``: ``ab``

A new command adds its ``add_<name>(subparsers, common)`` to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_ortperf.cli.ab import add_ab
from pytest_ortperf.cli.common import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSED,
    EXIT_STATUS,
    EXIT_USAGE,
    Register,
    UsageError,
    why,
)
from pytest_ortperf.cli.compare import add_compare
from pytest_ortperf.cli.export import add_export, add_report
from pytest_ortperf.cli.history import add_changes, add_history
from pytest_ortperf.cli.profile import add_profile
from pytest_ortperf.cli.prune import add_prune
from pytest_ortperf.cli.runs import add_machines, add_runs
from pytest_ortperf.cli.sync import add_sync

__all__ = [
    "COMMANDS",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REGRESSED",
    "EXIT_STATUS",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

COMMANDS: list[Register] = [
    add_history,
    add_runs,
    add_compare,
    add_export,
    add_prune,
    add_report,
    add_profile,
    add_machines,
    add_sync,
    add_changes,
    add_ab,
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
    from pytest_ortperf.store.errors import StoreError
    from pytest_ortperf.store.location import resolve_store
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
        full = "disk full: " if why(exc).startswith("disk full") else ""
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
