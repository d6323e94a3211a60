"""A short Markdown body for a pull-request comment (``--ortperf-pr-comment=FILE``).

Quiet when all is well: one line (``ortperf: 12 measurements, no regression (threshold 5%)
on <machine class>``), with the outcomes nobody has to act on counted at its end
(``; 1 inconclusive, 2 new``). When a gated metric regressed or improved, a table lists
those verdicts with their change, interval, machine class and the op types that moved.

Listed: ``regressed`` and ``improved`` verdicts, and under a strict run (``--ortperf-strict``,
ini ``ortperf_strict``) also the ``inconclusive``, ``unstable`` and ``new`` ones, since they
fail it. Without strict those pass and are only counted: they come and go between runs, and
a comment that lists them would not stay quiet.

Pure formatting, no I/O: the writer (:mod:`pytest_ortperf.reports.writer`) writes the file,
CI posts it with its own tools. Test ids, names, op types and the machine's CPU model are
untrusted text, escaped by :mod:`pytest_ortperf.reports.markdown`'s helpers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ortperf.reports.markdown import ICONS, md_code, md_text
from pytest_ortperf.reports.rows import (
    Key,
    verdict_confidence,
    verdict_interval,
    verdict_point_change,
    verdict_value,
    verdicts_by_key,
)
from pytest_ortperf.results import Judgement, Outcome, Record, Verdict
from pytest_ortperf.text import machine_label
from pytest_ortperf.units import format_confidence

MAX_ROWS = 30
"""Verdicts listed at most; the rest are counted below the table."""
MAX_CHARS = 65_536
"""The longest comment written, in characters: GitHub refuses a longer comment body.
Rows that would pass it are left out and counted below the table, and a text cell longer
than :data:`MAX_CELL` is cut."""
MAX_CELL = 200
"""Characters of a test id, measurement name, op-type move or machine class shown at most
(before escaping); a longer one is cut and ends with ``…``."""
MAX_OPS = 6
"""Op-type moves shown at most per verdict."""
STRICT_FAILS = (Outcome.INCONCLUSIVE, Outcome.UNSTABLE, Outcome.NEW)
"""Outcomes listed (as failures) only in a strict run."""
HEADER = (
    "| outcome | test | measurement | metric | change | interval | machine class "
    "| op types that moved |"
)


@dataclass(frozen=True)
class _Listed:
    test: str
    name: str
    verdict: Verdict


def machine_class(environment: Mapping[str, Any]) -> str:
    """The run's machine class in words (:func:`~pytest_ortperf.units.machine_label`) from
    its environment (:func:`~pytest_ortperf.machine.collect_environment`)."""
    from pytest_ortperf.machine import machine_fingerprint

    cores = environment.get("logical_cores")
    return machine_label(
        environment.get("fingerprint") or machine_fingerprint(environment),
        environment.get("cpu_model"),
        int(cores) if isinstance(cores, int) else None,
    )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def op_moves(verdict: Verdict, attribution: Sequence[str] = ()) -> list[str]:
    """What moved, for one verdict: a structure verdict's op-type changes (its message),
    else the lines of the regression's attribution
    (:func:`~pytest_ortperf.profiling.attribution.attribution`) without their headings."""
    if verdict.metric == "structure":
        return [verdict.message] if verdict.outcome is Outcome.REGRESSED else []
    return [s for line in attribution if (s := line.strip()) and not s.endswith(":")]


def _ops_cell(moves: Sequence[str]) -> str:
    if not moves:
        return "-"
    shown = "; ".join(md_code(_cut(m), table=True) for m in moves[:MAX_OPS])
    more = len(moves) - MAX_OPS
    return shown + (f"; {more} more" if more > 0 else "")


def _row(item: _Listed, machine: str, attribution: Sequence[str]) -> str:
    v = item.verdict
    if v.metric == "structure":
        change, interval = verdict_value(v), ""
    else:
        change, interval = verdict_point_change(v), verdict_interval(v)
        confidence = verdict_confidence(v)
        if interval and confidence is not None:
            interval += f" {format_confidence(confidence)}"
    cells = [
        f"{ICONS.get(v.outcome, '')} **{md_text(v.outcome)}**",
        md_code(_cut(item.test), table=True),
        md_text(_cut(item.name)),
        md_text(v.metric),
        md_text(change or "-"),
        md_text(interval or "-"),
        machine,
        _ops_cell(op_moves(v, attribution)),
    ]
    return "| " + " | ".join(cells) + " |"


def pr_comment(
    records: Sequence[Record],
    judgements: Sequence[Judgement] = (),
    *,
    machine: str,
    threshold: float,
    strict: bool = False,
    attributions: Mapping[Key, Sequence[str]] | None = None,
) -> str:
    """The comment's Markdown (ends with a newline): :func:`gate_comment`, then the
    latency budgets (:func:`budget_comment`) in the room left."""
    body = gate_comment(
        records, judgements, machine=machine, threshold=threshold, strict=strict,
        attributions=attributions,
    )  # fmt: skip
    return body + budget_comment(records, MAX_CHARS - len(body))


def budget_comment(records: Sequence[Record], room: int) -> str:
    """The latency budgets (``slo=``) in at most ``room`` characters: one line of counts
    (``Latency budgets: 3 met``), and a table of the violated ones, which failed their
    tests (only the line where the table would not fit); empty without budgets."""
    from pytest_ortperf.gating.slo import table_row
    from pytest_ortperf.results import SLO_OUTCOMES

    judged = [(r, v) for r in records for v in getattr(r, "slo", ())]
    if not judged:
        return ""
    counts = {o: sum(v.outcome == o for _, v in judged) for o in SLO_OUTCOMES}
    line = ", ".join(f"{n} {o.replace('_', ' ')}" for o, n in counts.items() if n)
    lines = ["", f"Latency budgets: {'**' + line + '**' if counts['violated'] else line}"]
    violated = [(r, v) for r, v in judged if v.outcome == "violated"]
    if violated:
        header = "| verdict | test | measurement | figure | estimate | bounds | budget | headroom |"
        lines += ["", header, "|---" * 8 + "|"]
    for r, v in violated[:MAX_ROWS]:
        cells = table_row("", v)
        head = ["❌ **violated**", md_code(_cut(r.test), table=True), md_text(_cut(r.name))]
        shown = [md_text(c) for c in (cells[1], cells[3], cells[4], cells[5], cells[6])]
        lines.append("| " + " | ".join(head + shown) + " |")
    if len(violated) > MAX_ROWS:
        lines += ["", f"{len(violated) - MAX_ROWS} more violated budgets: see the CI log."]
    text = "\n".join(lines) + "\n"
    return text if len(text) <= room else "\n".join(lines[:2]) + "\n"


def gate_comment(
    records: Sequence[Record],
    judgements: Sequence[Judgement] = (),
    *,
    machine: str,
    threshold: float,
    strict: bool = False,
    attributions: Mapping[Key, Sequence[str]] | None = None,
) -> str:
    """The gate's part of the comment (ends with a newline): one line when nothing
    regressed or improved, else that line and a table of those verdicts.

    ``machine``: the run's machine class (:func:`machine_class`); ``threshold``: the run's
    gate threshold; ``strict``: the run fails inconclusive and new verdicts too (they are
    then listed); ``attributions``: (test, name) -> the attribution lines of a regression
    (what the failure message shows)."""
    attributions = attributions or {}
    machine = _cut(machine)
    measured = list(dict.fromkeys((r.test, r.name) for r in records))
    judged = verdicts_by_key(judgements)
    listed: list[_Listed] = []
    counts: dict[Outcome, int] = {}
    for key in measured:
        for v in judged.get(key, ()):
            if v.outcome in (Outcome.REGRESSED, Outcome.IMPROVED) or (
                strict and v.outcome in STRICT_FAILS
            ):
                listed.append(_Listed(key[0], key[1], v))
            elif v.outcome is not Outcome.OK:
                counts[v.outcome] = counts.get(v.outcome, 0) + 1
    listed.sort(key=lambda item: item.verdict.outcome.rank)  # stable: measured order within
    where = f"(threshold {_percent(threshold)}) on {md_text(machine)}"
    n = len(measured)
    what = f"{n} measurement{'' if n == 1 else 's'}"
    others = ", ".join(f"{counts[o]} {md_text(o)}" for o in Outcome if o in counts)
    tail = f"; {others}" if others else ""
    if not judged or not measured:
        return f"ortperf: {what}, none gated on {md_text(machine)}{tail}\n"
    if not listed:
        return f"ortperf: {what}, no regression {where}{tail}\n"
    by_outcome: dict[Outcome, int] = {}
    for item in listed:
        by_outcome[item.verdict.outcome] = by_outcome.get(item.verdict.outcome, 0) + 1
    parts = [(o, f"{by_outcome[o]} {md_text(o)}") for o in Outcome if o in by_outcome]
    headline = ", ".join(f"**{p}**" if o is Outcome.REGRESSED else p for o, p in parts)
    cell = md_text(machine)  # escapes | too: safe in a table cell
    lines = [f"ortperf: {headline} of {what} {where}{tail}", "", HEADER, "|---" * 8 + "|"]
    tail_lines = (
        ["", "Improvements can become the baseline: `pytest --ortperf --ortperf-update`."]
        if Outcome.IMPROVED in by_outcome
        else []
    )
    # room for the rows: the limit less the lines around them and the "more" line
    room = MAX_CHARS - sum(len(line) + 1 for line in lines + tail_lines) - 200
    shown = 0
    for item in listed[:MAX_ROWS]:
        row = _row(item, cell, attributions.get((item.test, item.name), ()))
        if len(row) + 1 > room:
            break
        lines.append(row)
        room -= len(row) + 1
        shown += 1
    if shown < len(listed):
        why = "" if shown == MAX_ROWS else f" (a comment holds at most {MAX_CHARS} characters)"
        lines += ["", f"{len(listed) - shown} more not listed here{why}: see the CI log."]
    return "\n".join(lines + tail_lines) + "\n"
