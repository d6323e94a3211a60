"""The ``ortperf`` command: browse, compare, export and prune the results store.

Exit status: 0 success, 1 ``compare`` found a regression, 2 usage or store error.
New subcommands register a ``_add_<name>(subparsers, common)`` function in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf.reports.terminal import format_table
from pytest_ortperf.units import format_change, format_seconds, parse_fraction

if TYPE_CHECKING:
    import pandas as pd

EXIT_OK = 0
EXIT_REGRESSED = 1
EXIT_USAGE = 2

STORE_ENV = "ORTPERF_STORE"
KEY = ["test", "name", "kind", "api"]


class UsageError(Exception):
    """A problem with what the user asked for: one line on stderr, exit status 2."""


# --------------------------------------------------------------------------------------------
# Formatting


def _fmt_ratio(row: Any) -> str:
    ratio = row.get("ratio")
    if ratio is None or (isinstance(ratio, float) and math.isnan(ratio)):
        return "-"
    return f"{ratio:.3f} [{row['low']:.3f}, {row['high']:.3f}]"


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


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows aligned under their headers, cut to 100 columns (see ``report.format_table``)."""
    return "\n".join(format_table(headers, rows))


def _metric(row: Any) -> float:
    """The value a change is judged on: the ratio of a comparison, else the median."""
    return float(row["ratio"] if row["kind"] == "compare" else row["median"])


# --------------------------------------------------------------------------------------------
# Commands


def _store(args: argparse.Namespace) -> str:
    from pytest_ortperf.store import resolve_store

    resolved = resolve_store(args.store, Path.cwd())
    if resolved is None:
        raise UsageError("--store none: storing is disabled, there is nothing to read")
    return resolved


def cmd_history(args: argparse.Namespace) -> int:
    from pytest_ortperf.store import read_results

    frame = read_results(_store(args), test=args.test, name=args.name)
    if frame.empty:
        print("no stored measurements match", file=sys.stderr)
        return EXIT_OK
    blocks = []
    for key, group in frame.groupby(KEY, sort=False):
        series = group.drop_duplicates("run_id", keep="last").tail(args.last)
        blocks.append(_history_block(tuple(str(k) for k in key), series))
    print("\n\n".join(blocks))
    return EXIT_OK


def _history_block(key: tuple[str, ...], series: pd.DataFrame) -> str:
    test, name, kind, api = key
    what = "ratio candidate/reference" if kind == "compare" else "median latency"
    headers = ["run", "started", "commit", "machine", "ort", "median", "ratio [CI]", "change"]
    rows = []
    previous: float | None = None
    for row in series.to_dict("records"):
        value = _metric(row)
        change = None if previous is None or previous == 0 else value / previous - 1.0
        previous = value
        rows.append(
            [
                str(row["run_id"]),
                _fmt_when(row["started"]),
                _fmt_commit(row),
                _text(row["fingerprint"]),
                _text(row["ort_version"]),
                format_seconds(row["median"]),
                _fmt_ratio(row),
                format_change(change),
            ]
        )
    title = f"{test}  [{name}]  {kind} via {api}: change of the {what}"
    return title + "\n" + table(headers, rows)


def cmd_runs(args: argparse.Namespace) -> int:
    from pytest_ortperf.store import list_runs

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
    print(table(headers, rows))
    return EXIT_OK


def _verdict(a: Any, b: Any, threshold: float) -> tuple[str, float]:
    change = _metric(b) / _metric(a) - 1.0 if _metric(a) else math.nan
    if b["kind"] != "compare" and a["fingerprint"] != b["fingerprint"]:
        return "not gated: other machine", change
    if change > threshold:
        return "REGRESSED", change
    if change < -threshold:
        return "improved", change
    return "ok", change


def _side(row: dict[str, Any], suffix: str) -> dict[str, Any]:
    side = {k[: -len(suffix)]: v for k, v in row.items() if k.endswith(suffix)}
    return side | {"kind": row["kind"]}


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_ortperf.store import read_results, resolve_run_id

    store = _store(args)
    run_a = resolve_run_id(store, args.run_a)
    run_b = resolve_run_id(store, args.run_b)
    a = read_results(store, run=run_a).drop_duplicates(KEY, keep="last")
    b = read_results(store, run=run_b).drop_duplicates(KEY, keep="last")
    merged = a.merge(b, on=KEY, how="outer", suffixes=("_a", "_b"), indicator=True)
    headers = ["test", "name", "kind", f"median {run_a}", f"median {run_b}"]
    headers += [f"ratio {run_a}", f"ratio {run_b}", "change", "verdict"]
    rows, counts = [], {"REGRESSED": 0, "improved": 0, "ok": 0}
    for record in merged.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        side_a = _side(row, "_a")
        side_b = _side(row, "_b")
        if row["_merge"] == "left_only":
            verdict, change = f"only in run {run_a}", math.nan
        elif row["_merge"] == "right_only":
            verdict, change = f"only in run {run_b}", math.nan
        else:
            verdict, change = _verdict(side_a, side_b, args.threshold)
            counts[verdict] = counts.get(verdict, 0) + 1
        rows.append(
            [
                str(row["test"]),
                str(row["name"]),
                str(row["kind"]),
                format_seconds(side_a["median"]),
                format_seconds(side_b["median"]),
                _fmt_ratio(side_a),
                _fmt_ratio(side_b),
                format_change(change),
                verdict,
            ]
        )
    print(table(headers, rows))
    print(
        f"\nrun {run_b} vs run {run_a}: {counts['REGRESSED']} regressed, "
        f"{counts['improved']} improved, {counts['ok']} within {args.threshold:.1%} "
        "(ratios for comparisons, medians for latencies on the same machine)"
    )
    return EXIT_REGRESSED if counts["REGRESSED"] else EXIT_OK


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
    from pytest_ortperf.store import read_results

    if args.format == "parquet":
        if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
            raise UsageError("parquet export needs pyarrow: pip install pyarrow")
        if not args.output:
            raise UsageError("parquet is binary: give a file with -o/--output")
    frame = read_results(_store(args), test=args.test, name=args.name, samples=args.samples)
    target = args.output
    try:
        if args.format == "csv":
            text = _flatten(frame).to_csv(index=False)
        elif args.format == "json":
            text = frame.to_json(orient="records", date_format="iso", indent=1) or "[]"
        else:
            _flatten(frame).to_parquet(target, index=False)
            text = None
        if text is not None:
            if target:
                Path(target).write_text(text, encoding="utf-8")
            else:
                sys.stdout.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    if target:
        print(f"wrote {len(frame)} measurements to {target}", file=sys.stderr)
    return EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    from pytest_ortperf.store import prune

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
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
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


def _fraction(text: str) -> float:
    try:
        value = parse_fraction(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"threshold {exc}") from None
    if value >= 10.0:
        raise argparse.ArgumentTypeError(f"threshold must be a fraction like 0.05, got {text}")
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
    p.set_defaults(func=cmd_history)


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
        help="compare two runs; exit 1 if anything regressed",
        description="Compare run B with run A, measurement by measurement. Comparisons are "
        "judged on their candidate/reference ratio, latencies on their median (only when "
        "both runs are on the same machine). Exit status 1 when something got slower than "
        "the threshold, 0 otherwise.",
    )
    p.add_argument("run_a", metavar="RUN_A", help="baseline run: an id, 'latest' or 'latest~N'")
    p.add_argument("run_b", metavar="RUN_B", help="run to judge: an id, 'latest' or 'latest~N'")
    p.add_argument(
        "--threshold",
        type=_fraction,
        default=0.05,
        help="relative slowdown that counts as a regression, e.g. 0.05 or 5%% (default 0.05)",
    )
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


def _dim(text: str) -> tuple[str, int]:
    name, sep, size = text.partition("=")
    if not sep or not name or not size.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE such as batch=1, got {text!r}")
    return name, int(size)


def cmd_profile(args: argparse.Namespace) -> int:
    import pandas as pd

    from pytest_ortperf.feeds import FeedError, input_specs, make_feeds
    from pytest_ortperf.ort_session import OrtSession
    from pytest_ortperf.profiling.run import profile_session

    session = OrtSession.create(args.model, optimization=args.optimization, threads=args.threads)
    try:
        feeds = make_feeds(input_specs(session.sess), dims=dict(args.dim), seed=args.seed)
    except FeedError as exc:
        raise UsageError(f"{exc} (here: --dim NAME=SIZE)") from None
    profile = profile_session(session, feeds, runs=args.runs, warmup=args.warmup)
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


COMMANDS: list[Callable[[Subparsers, argparse.ArgumentParser], None]] = [
    _add_history,
    _add_runs,
    _add_compare,
    _add_export,
    _add_prune,
    _add_report,
    _add_profile,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``ortperf`` parser; each command sets ``func`` to its handler."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        default=os.environ.get(STORE_ENV),
        metavar="PATH_OR_URL",
        help="results store: a file or SQLAlchemy URL (default: $ORTPERF_STORE or "
        ".ortperf/results.sqlite in the current directory)",
    )
    parser = argparse.ArgumentParser(
        prog="ortperf",
        description="Browse the performance results that `pytest --ortperf` stored, "
        "or profile a model outside pytest.",
        epilog="Run `ortperf COMMAND --help` for the options of a command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ortperf`` command; returns the exit status."""
    from pytest_ortperf.store import StoreError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.func
    try:
        return handler(args)
    except (StoreError, UsageError, ValueError, OSError, RuntimeError) as exc:
        print(f"ortperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `ortperf export | head`
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
