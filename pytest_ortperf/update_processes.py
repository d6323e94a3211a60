"""``--ortperf-update-processes N``: each baseline taken in N processes.

A baseline's runs in one process share what that process got (memory layout, the cores it
ran on), which no session pair inside it can show, and every later check is judged against
that one offset. With N > 1 the update's own process runs the selected tests as usual;
then N - 1 fresh pytest processes, one after the other, run them again with the same
arguments. Each of those writes its gated records to a part file in this run's scratch
directory (:mod:`pytest_ortperf.scratch`) in place of the baseline files, the store and
the reports. The runs of each ``compare`` and normalized latency are then merged, process
after process (:func:`~pytest_ortperf.measuring.records.merge_processes`), and the entry
keeps how many runs each process took (``processes``).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_ortperf import scratch
from pytest_ortperf.config import OrtperfConfig
from pytest_ortperf.files import write_atomic

PART_OPTION = "--ortperf-update-part"
"""The hidden option that makes a pytest process one of the further processes."""
USABLE_EXITS = (0, 1, 5)
"""Exit statuses whose part counts: all passed, some failed (they are not in the part:
only passed tests' records are), none collected."""
TAIL_LINES = 15
"""Lines of a failed process's output an error shows."""

Payload = dict[str, Any]


class UpdateProcessError(Exception):
    """A further process of the update gave no records: the baselines are not written."""


class UpdateInterrupted(UpdateProcessError):
    """Ctrl-C while a further process ran (it is stopped): the baselines are not written."""


NOT_FORWARDED = {"--basetemp": True, "--pdb": False, "--trace": False}
"""Options of this process that a further one does not get (whether each takes a value):
its own temporary directory, never this one's; no debugger without a terminal."""


def _forwarded(args: list[str]) -> list[str]:
    """``args`` without :data:`NOT_FORWARDED` options (``--opt=value`` or ``--opt value``)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name, eq, _ = arg.partition("=")
        if name in NOT_FORWARDED:
            skip = NOT_FORWARDED[name] and not eq
            continue
        out.append(arg)
    return out


def _launcher(args: list[str]) -> list[str]:
    """How this process was started, so a further one runs the same code: this command
    line's interpreter flags and script (the ``pytest`` script, or ``-m pytest``) where it
    ends with ``args``, else ``python -m pytest`` (pytest started from Python code)."""
    argv = [str(a) for a in getattr(sys, "orig_argv", [])]
    if args and len(argv) > len(args) and argv[-len(args) :] == args:
        return [sys.executable, *argv[1 : -len(args)]]
    return [sys.executable, "-m", "pytest"]


def write_part(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Write a further process's gated records (their dict form) to ``path``, atomically."""
    write_atomic(Path(path), json.dumps({"records": [dict(r) for r in records]}))


def read_part(path: Path) -> list[Payload]:
    """The records a further process wrote to ``path``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    records = data.get("records") if isinstance(data, dict) else None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path}: not a part file of ortperf records")
    return records


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no output)"
    return "\n".join(lines[-TAIL_LINES:]) or "(no output)"


def further_processes(
    config: pytest.Config, processes: int, say: Callable[[str], None]
) -> list[list[Payload]]:
    """Run the selected tests again in ``processes - 1`` fresh pytest processes, one after
    the other, and return the records each wrote. ``say`` gets a line as each starts.

    Raises :class:`UpdateProcessError`, naming the process, its command and the end of its
    output, when one exits abnormally or writes no records (or on Ctrl-C, after stopping
    it). Nothing is left behind: the part files and logs live in a scratch directory
    removed on the way out."""
    directory = scratch.mkdtemp("update-")
    given = [str(a) for a in config.invocation_params.args]
    start, args = _launcher(given), _forwarded(given)
    parts: list[list[Payload]] = []
    try:
        for index in range(2, processes + 1):
            part, log = directory / f"part-{index}.json", directory / f"process-{index}.log"
            command = [*start, *args, f"{PART_OPTION}={part}"]
            what = f"process {index} of {processes}"
            say(f"ortperf: taking the baselines again in {what} ...")
            started = time.monotonic()
            try:
                with log.open("wb") as out:
                    status = subprocess.run(
                        command,
                        cwd=config.invocation_params.dir,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        check=False,
                    ).returncode
            except KeyboardInterrupt:  # subprocess.run stopped it
                raise UpdateInterrupted(f"interrupted while {what} ran") from None
            if status not in USABLE_EXITS or not part.exists():
                raise UpdateProcessError(
                    f"{what} (`{shlex.join(command)}`) exited with status {status} and wrote "
                    f"no records; the end of its output:\n{_tail(log)}"
                )
            try:
                parts.append(read_part(part))
            except (OSError, ValueError) as exc:
                raise UpdateProcessError(f"{what}: its records cannot be read: {exc}") from None
            say(f"ortperf: {what} took {time.monotonic() - started:.1f} s")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return parts


def _key(payload: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(payload.get(k)) for k in ("kind", "test", "name", "api"))


def mergeable(payload: Mapping[str, Any]) -> bool:
    """A measured compare or normalized latency: what a baseline keeps the runs of, per
    process."""
    kind = payload.get("kind")
    return bool(payload.get("measured")) and (
        kind == "compare" or (kind == "latency" and bool(payload.get("control")))
    )


def merge_process_records(
    own: Sequence[Mapping[str, Any]],
    others: Sequence[Sequence[Mapping[str, Any]]],
    alpha: float,
) -> list[Payload]:
    """This process's gated records (``own``) with the runs the further processes
    (``others``) took of each: a compare or normalized latency gets every process's runs
    (in process order), ``processes`` (the runs each took) and the smallest slowdown the
    pooled runs can detect at ``alpha``; any other record, or one no other process
    recorded (its test failed there), stays this process's alone. The A/A ratio baseline
    a record keeps to be judged beside its model is pooled over the processes the same way."""
    from pytest_ortperf.gating.gate import DETECTS, detects_of
    from pytest_ortperf.measuring.records import merge_processes, run_sizes
    from pytest_ortperf.results import PROCESSES, Comparison, LatencyResult, record_from_dict

    found = [{_key(p): p for p in part} for part in others]
    merged: list[Payload] = []
    for payload in own:
        key = _key(payload)
        same = [f[key] for f in found if key in f]  # this record in each further process
        parts = [payload, *(p for p in same if mergeable(p))] if mergeable(payload) else []
        if len(parts) < 2:
            merged.append(_beside_merged(dict(payload), same))
            continue
        records = [record_from_dict(p) for p in parts]
        comparisons = [r for r in records if isinstance(r, Comparison)]
        latencies = [r for r in records if isinstance(r, LatencyResult)]
        whole: Comparison | LatencyResult = (
            merge_processes(comparisons) if comparisons else merge_processes(latencies)
        )
        processes = [len(run_sizes(r)) for r in (comparisons or latencies)]
        detects = detects_of(whole, alpha)
        extra = {} if detects is None else {DETECTS: detects}
        merged.append(
            _beside_merged({**payload, **whole.to_dict(), PROCESSES: processes, **extra}, same)
        )
    return merged


def _beside_merged(payload: Payload, same: Sequence[Mapping[str, Any]]) -> Payload:
    """``payload`` with the A/A ratio baseline it keeps to be judged beside its model
    (:mod:`pytest_ortperf.gating.beside`) pooled with those of ``same`` (the record as the
    further processes took it), where any kept one
    (:func:`~pytest_ortperf.gating.beside.merge_beside`)."""
    from pytest_ortperf.gating.baseline_schema import BESIDE, BESIDE_RATIOS
    from pytest_ortperf.gating.beside import merge_beside

    def kept(p: Mapping[str, Any]) -> bool:
        return bool(p.get(BESIDE) and p.get(BESIDE_RATIOS))

    if not kept(payload):
        return payload
    parts = [payload, *(p for p in same if kept(p))]
    return {**payload, **merge_beside(parts)} if len(parts) > 1 else payload


def in_further_processes(
    config: pytest.Config,
    settings: OrtperfConfig,
    gated: list[Payload],
    notes: list[str],
) -> tuple[list[Payload], bool]:
    """``gated`` (this process's gated records) with the runs the update's further
    processes took of each, and whether a pooled entry cannot see the run's threshold.
    Says in ``notes`` how long they took, which tests got fewer processes (their test
    failed there) and which pooled entries are blind. Raises :class:`UpdateProcessError`
    when a further process failed."""
    from pytest_ortperf.gating.baseline import some_keys
    from pytest_ortperf.gating.gate import DETECTS, blind_baseline_message
    from pytest_ortperf.results import PROCESSES

    processes = settings.update_processes
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)

    started = time.monotonic()
    others = further_processes(config, processes, say)
    gate = settings.gate
    merged = merge_process_records(gated, others, gate.alpha)
    pooled = [p for p in merged if mergeable(p)]
    short = [f"{p['test']}::{p['name']}" for p in pooled
             if len(p.get(PROCESSES) or [1]) < processes]  # fmt: skip
    notes.append(
        f"baselines taken in {processes} processes (the further ones took "
        f"{time.monotonic() - started:.0f} s)"
        + (f"; in fewer, where their test failed: {some_keys(short)}" if short else "")
    )
    blind = False
    for p in pooled:
        detects = p.get(DETECTS)
        if p.get(PROCESSES) and detects is not None and detects > gate.threshold:
            runs = len(p.get("runs") or ())
            name = f"{p['test']}::{p['name']}"
            message = blind_baseline_message(name, detects, gate.threshold, runs)
            notes.append(f"{message} (its {processes} processes pooled)")
            blind = True
    return merged, blind
