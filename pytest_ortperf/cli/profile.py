"""``ortperf profile``: per-op kernel times of a model on random inputs, outside pytest."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

from pytest_ortperf import values
from pytest_ortperf.cli.common import EXIT_OK, Subparsers, UsageError, add_threads, counted
from pytest_ortperf.cli.inputs import add_dim_and_shape, cli_spelling, pinned_array, pinned_value


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
    pinned: dict[str, Any] = {}
    for value in args.value:
        spec = specs.get(value.name)  # an unknown input: make_feeds names the known ones
        pinned[value.name] = (
            value.numbers if spec is None else pinned_array(spec, value, shapes.get(spec.name))
        )
    try:
        feeds = make_feeds(
            list(specs.values()), dims=dict(args.dim), shapes=shapes, values=pinned, seed=args.seed
        )
    except FeedError as exc:
        raise UsageError(cli_spelling(str(exc))) from None
    try:
        profile = profile_session(session, feeds, runs=args.runs, warmup=args.warmup)
    except ValueError as exc:
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


def add_profile(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "profile",
        help="profile an ONNX model with random inputs (per-op kernel times)",
        description="Run a model with random inputs under ORT's profiler (on its own "
        "session, warm-up excluded) and print the time per op type. Nothing is stored; the "
        "profile file ORT writes is removed.",
    )
    p.add_argument("model", help="path to the .onnx file")
    add_dim_and_shape(
        p,
        "whole shape of an input, e.g. --shape x=1x3x224x224: for dims with no name (repeatable)",
    )
    p.add_argument(
        "--value", action="append", type=pinned_value, default=[], metavar="INPUT=V1,V2,...",
        help="pin an input to numbers instead of random ones, e.g. --value k=3: a scalar or a "
        "comma list, converted to the input's dtype; a scalar fills a static shape, a list is "
        "reshaped to --shape (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--runs", type=counted(1, values.MAX_PROFILED_RUNS, "runs"), default=20,
        help=f"profiled runs, 1 to {values.MAX_PROFILED_RUNS} (default 20)",
    )  # fmt: skip
    p.add_argument(
        "--warmup", type=counted(0, values.MAX_WARMUP_RUNS, "runs"), default=3,
        help=f"warm-up runs, 0 to {values.MAX_WARMUP_RUNS} (default 3)",
    )  # fmt: skip
    p.add_argument(
        "--optimization", default="all", choices=["disable", "basic", "extended", "all"],
        help="ORT graph optimization level (default all)",
    )  # fmt: skip
    add_threads(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--trace", metavar="FILE.json", help="also write a Chrome/Perfetto trace")
    p.add_argument("--plot", metavar="FILE.png", help="also save the per-op chart (plots extra)")
    p.set_defaults(func=cmd_profile)
