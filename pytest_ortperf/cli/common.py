"""What every ``ortperf`` command shares: exit codes, the usage error, finding the store,
and option types built on the shared value checks (:mod:`pytest_ortperf.values`)."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_ortperf import values

if TYPE_CHECKING:
    import pandas as pd

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
"""The columns that name one measurement of a run."""

Subparsers = Any  # argparse's _SubParsersAction is private
Register = Callable[[Subparsers, argparse.ArgumentParser], None]
"""A command's ``add(subparsers, common)``: adds its parser, ``func`` its handler."""


class UsageError(Exception):
    """A problem with what the user asked for: one line on stderr, exit status 2."""


def why(exc: OSError) -> str:
    """An OSError in words; a full disk says so."""
    text = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        return f"disk full ({text})"
    return text


def writable(given: str | None) -> Path | None:
    """The output file named by an option, its directory checked before any work."""
    if not given:
        return None
    target = Path(given)
    if not target.parent.is_dir():
        raise UsageError(f"cannot write {target}: no directory {target.parent}")
    return target


def write_text(target: Path, text: str) -> None:
    """``text`` written to ``target`` whole or not at all; a failure is a UsageError."""
    from pytest_ortperf.files import write_atomic

    try:
        write_atomic(target, text)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {why(exc)}") from None


# -------------------------------------------------------------------------- the store


ROOT_MARKERS = ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", ".git")
"""Files that mark a project's root, as pytest finds its rootdir: the upward search for
the default store checks such a directory and goes no higher."""


def find_store(start: Path, relative: str | None = None) -> tuple[Path | None, list[Path]]:
    """The default store (``DEFAULT_STORE``, or the ``relative`` path given) nearest
    ``start``: looked for in ``start``, then each parent, up to the first directory holding
    a :data:`ROOT_MARKERS` file (checked too) or the filesystem root. Returns the store
    (None when there is none) and the directories searched."""
    from pytest_ortperf.store.location import DEFAULT_STORE

    searched = []
    for directory in [start, *start.parents]:
        searched.append(directory)
        candidate = directory / (relative or DEFAULT_STORE)
        if candidate.exists():
            return candidate, searched
        if any((directory / marker).exists() for marker in ROOT_MARKERS):
            break
    return None, searched


def store_of(args: argparse.Namespace) -> str:
    """The store to read: ``--store``, else ``$ORTPERF_STORE``, else the nearest
    ``.ortperf/results.sqlite`` from the current directory upward (:func:`find_store`).
    Unless given with ``--store``, the store used is named on stderr (credentials masked)."""
    from pytest_ortperf.store.location import DEFAULT_STORE, STORE_ENV, resolve_store
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


def machine_class(frame: pd.DataFrame, prefix: str) -> str:
    """The machine class (``fingerprint``) of ``frame`` that ``prefix`` starts; a prefix
    that matches none, or several, is a UsageError listing the classes."""
    from pytest_ortperf.text import match_machine

    try:
        return match_machine(prefix, frame["fingerprint"].dropna())
    except ValueError as exc:
        raise UsageError(f"--machine: {exc}") from None


# ------------------------------------------------------------------------ option types

T = TypeVar("T")


def option(check: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse ``type`` from a value check: a refused value is argparse's usage error,
    which names the option (``argument --alpha: must be ...``)."""

    def parse(text: str) -> T:
        try:
            return check(text)
        except values.BadValue as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def counted(least: int, most: int, unit: str) -> Callable[[str], int]:
    """An argparse ``type`` of a whole number of ``unit`` from ``least`` to ``most``."""
    return option(lambda text: values.count(text, least, most, unit))


SECONDS = option(values.seconds)
THRESHOLD = option(values.threshold)
ALPHA = option(values.alpha)
RUNS = counted(1, values.MAX_RUNS, "runs")
"""``--last K``: at least one run, at most :data:`~pytest_ortperf.values.MAX_RUNS`."""
THREADS = counted(0, values.MAX_THREADS, "threads")
"""``--threads``: 0 (onnxruntime's default) to :data:`~pytest_ortperf.values.MAX_THREADS`."""


def add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads", type=THREADS, default=1,
        help=f"intra-op threads, 0 (onnxruntime's default) to {values.MAX_THREADS} (default 1)",
    )  # fmt: skip


def add_include_interrupted(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--include-interrupted",
        action="store_true",
        help="also use runs stopped before all their tests ran (Ctrl-C; `ortperf runs` "
        "marks them): their results are partial, so they are left out by default",
    )


def add_machine(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--machine",
        metavar="CLASS",
        help=f"{what}: its fingerprint or a prefix of it (`ortperf machines` lists them)",
    )
