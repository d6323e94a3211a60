"""``ortperf ab``: one model across two onnxruntime versions or environments
(:func:`pytest_ortperf.remote.ab.ab`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf import values
from pytest_ortperf.cli.common import (
    ALPHA,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSED,
    SECONDS,
    THRESHOLD,
    Subparsers,
    UsageError,
    add_threads,
    counted,
    writable,
    write_text,
)
from pytest_ortperf.cli.inputs import add_dim_and_shape, cli_spelling
from pytest_ortperf.gating.settings import DEFAULT_ALPHA
from pytest_ortperf.remote.ab import AB_PROCESSES
from pytest_ortperf.text import escape_control

if TYPE_CHECKING:
    from pytest_ortperf.remote.ab import ABResult


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
    from pytest_ortperf.measuring.feeds import FeedError
    from pytest_ortperf.measuring.outputs import OutputMismatch
    from pytest_ortperf.remote.ab import ab
    from pytest_ortperf.remote.sessions import WorkerError
    from pytest_ortperf.remote.venvs import EnvironmentSetupError

    target = writable(args.json)
    html = writable(args.html)
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
        write_text(target, json.dumps(result.to_dict(), indent=1) + "\n")
        print(f"wrote the A/B to {target}", file=sys.stderr)
    if html is not None:
        _write_html(html, result, started)
    return EXIT_REGRESSED if result.regressed else EXIT_OK


def _write_html(target: Path, result: ABResult, started: float) -> None:
    """The A/B as the HTML report of a run of its one comparison, its verdict and, as
    notes, the versions, outputs, optimized graphs and profiles."""
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
    write_text(target, build_html(data))
    print(f"wrote the report to {target}", file=sys.stderr)


def add_ab(sub: Subparsers, common: argparse.ArgumentParser) -> None:
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
    add_dim_and_shape(p, "whole shape of an input, e.g. --shape x=1x3x224x224 (repeatable)")
    p.add_argument("--feeds", metavar="FILE.npz", help="inputs from a .npz (one array per input)")
    p.add_argument(
        "--providers", default="", metavar="EP[,EP...]",
        help="execution providers, comma-separated (default: CPUExecutionProvider)",
    )  # fmt: skip
    add_threads(p)
    p.add_argument(
        "--budget", type=SECONDS, default=2.0, metavar="S",
        help="seconds of timed blocks, both arms together, at most "
        f"{values.MAX_BUDGET_S:g} (default 2)",
    )  # fmt: skip
    p.add_argument(
        "--threshold", type=THRESHOLD, default=0.05, metavar="FRACTION",
        help="largest slowdown of B tolerated, e.g. 5%% or 0.05 (default 5%%)",
    )  # fmt: skip
    p.add_argument(
        "--alpha", type=ALPHA, default=DEFAULT_ALPHA,
        help=f"one-sided significance of a regression, {values.MIN_ALPHA:g} to below "
        f"{values.MAX_ALPHA:g} (default {DEFAULT_ALPHA:g})",
    )  # fmt: skip
    p.add_argument(
        "--profile-runs", type=counted(0, values.MAX_PROFILED_RUNS, "runs"), default=20,
        metavar="N",
        help="profiled runs per profile, outside the timed ones; two profiles per "
        "environment, the least disturbed kept (default 20; 0: no profiles; at most "
        f"{values.MAX_PROFILED_RUNS})",
    )  # fmt: skip
    p.add_argument(
        "--processes", type=counted(1, values.MAX_PROCESSES, "worker-process pairs"),
        default=AB_PROCESSES, metavar="K",
        help="pairs of worker processes (one of A, one of B each), measured interleaved; "
        "the interval comes from the spread between them (default "
        f"{AB_PROCESSES}, at most {values.MAX_PROCESSES}; 1: one pair, a 1%% spread assumed)",
    )  # fmt: skip
    p.add_argument("--json", metavar="FILE", help="also write the A/B as JSON")
    p.add_argument("--html", metavar="FILE.html", help="also write the A/B as an HTML report")
    p.set_defaults(func=cmd_ab)
