"""``ortperf export`` and ``ortperf report``: stored measurements as data files, a stored
run as an HTML report."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_ortperf.cli.common import (
    EXIT_OK,
    RUNS,
    Subparsers,
    UsageError,
    store_of,
    why,
    writable,
    write_text,
)

if TYPE_CHECKING:
    import pandas as pd


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
    from pytest_ortperf.files import replacing
    from pytest_ortperf.store.read import read_results

    if args.format == "parquet":
        if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
            raise UsageError("parquet export needs pyarrow: pip install pyarrow")
        if not args.output:
            raise UsageError("parquet is binary: give a file with -o/--output")
    target = writable(args.output)
    frame = read_results(store_of(args), test=args.test, name=args.name, samples=args.samples)
    if args.format == "csv":
        text = _flatten(frame).to_csv(index=False)
    elif args.format == "json":
        text = frame.to_json(orient="records", date_format="iso", indent=1) or "[]"
    else:
        text = None
    if target is None:
        assert text is not None
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return EXIT_OK
    # Whole or not at all: a full disk leaves no empty or partial file, and the old one.
    if text is None:
        try:
            with replacing(target) as tmp:
                _flatten(frame).to_parquet(tmp, index=False)
        except OSError as exc:
            raise UsageError(f"cannot write {target}: {why(exc)}") from None
    else:
        write_text(target, text)
    print(f"wrote {len(frame)} measurements to {target}", file=sys.stderr)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from pytest_ortperf.reports.html import build_html
    from pytest_ortperf.reports.writer import report_input_from_store

    data = report_input_from_store(store_of(args), args.run, args.last)
    target = Path(args.output)
    write_text(target, build_html(data))
    print(f"wrote the report of run {data.run_id} to {target}", file=sys.stderr)
    return EXIT_OK


def add_export(sub: Subparsers, common: argparse.ArgumentParser) -> None:
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


def add_report(sub: Subparsers, common: argparse.ArgumentParser) -> None:
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
        "--last", type=RUNS, default=10, metavar="K",
        help="history over the last K runs (default 10)",
    )  # fmt: skip
    p.set_defaults(func=cmd_report)
