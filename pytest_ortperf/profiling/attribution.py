"""Which op types moved: each arm's share of kernel time, from short profiles taken outside
the timed runs, set against the shares stored with the baseline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.profiling.run import profile_session

Feeds = Mapping[str, Any]


def op_shares(session: OrtSession, feeds: Feeds, runs: int = 10) -> dict[str, float]:
    """Each op type's share of kernel time, from a short profile on a separate session."""
    by_op = profile_session(session, feeds, runs=runs, warmup=3).by_op()
    shares = by_op.groupby("op_type")["share"].sum()
    return {str(op): round(float(share), 4) for op, share in shares.items()}


def attribution(
    arms: Mapping[str, OrtSession],
    feeds: Feeds,
    stored: Mapping[str, Mapping[str, float]] | None,
) -> list[str]:
    """Which op types moved: each arm profiled now (outside the timed runs), its shares of
    kernel time against the ``stored`` ones (``{role: {op type: share}}``, kept with the
    baseline); without stored shares, the candidate's profile against the reference's."""
    try:
        now = {role: op_shares(session, feeds) for role, session in arms.items()}
    except Exception as exc:  # attribution must never hide the verdict it explains
        return [f"  (no attribution: profiling failed: {type(exc).__name__}: {exc})"]
    if not stored:
        base = profile_session(arms["reference"], feeds, runs=10)
        cand = profile_session(arms["candidate"], feeds, runs=10)
        lines = base.compare(cand).summary_lines()
        return [
            "  where the time goes now, reference -> candidate (no shares in the baseline):"
        ] + [f"    {line}" for line in lines]
    lines = ["  op types whose share of kernel time moved most, baseline -> now:"]
    for role in ("candidate", "reference"):
        before, after = stored.get(role, {}), now[role]
        moves = sorted(
            ((op, before.get(op, 0.0), after.get(op, 0.0)) for op in set(before) | set(after)),
            key=lambda m: -abs(m[2] - m[1]),
        )
        for op, b, a in moves[:3]:
            if abs(a - b) >= 0.005:
                lines.append(f"    {role} {op}: {b:.1%} -> {a:.1%}")
    return lines
