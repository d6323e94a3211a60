"""Profiles of remote sessions: taken in their workers, outside any timed run, the least
disturbed of a few kept, and what moved between two arms in words (``ortperf ab``, and
the recorder's comparisons of ``ort_env`` sessions)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_ortperf.profiling.parse import Profile
    from pytest_ortperf.remote.sessions import RemoteSession

Feeds = Mapping[str, Any]

PROFILE_ROUNDS = 2
"""Profiles taken of each arm, alternately (A B B A): the least disturbed one of each
(the lowest kernel time per run) is compared. One profile of a few runs of a small model
read 40% apart from the next one of the same session on a busy machine."""


PROFILE_SECONDS = 0.05
"""Seconds of (unprofiled) calls a profile covers at least: a few runs of a model of
microseconds say little (200 runs of a 13 us attention block read within 3-8% from one
profile to the next here, 20 runs within 40%)."""

MAX_PROFILE_RUNS = 1000
"""The most runs :func:`profile_runs_for` sizes a profile to (a larger ``minimum`` wins)."""


def profile_runs_for(seconds_per_call: float, minimum: int) -> int:
    """Runs of a profile: at least ``minimum``, and enough for :data:`PROFILE_SECONDS`."""
    if not seconds_per_call > 0:
        return minimum
    return max(minimum, min(MAX_PROFILE_RUNS, int(PROFILE_SECONDS / seconds_per_call)))


def remote_profile(session: RemoteSession, feeds: Feeds, *, runs: int, warmup: int = 3) -> Profile:
    """A profile of ``runs`` calls of a remote session, taken in its worker on a separate
    profiling session (outside any timed run), parsed here; its file is removed."""
    from pytest_ortperf.profiling.parse import read_profile

    with tempfile.TemporaryDirectory(prefix="ortperf-profile-") as tmp:
        path = session.profile_to(Path(tmp), feeds, runs=runs, warmup=warmup)
        profile = read_profile(path, keep_events=True)
    profile.source = None
    return profile.select_runs(warmup)


def least_disturbed(
    sessions: Sequence[RemoteSession], feeds: Feeds, runs: int, rounds: int = PROFILE_ROUNDS
) -> list[Profile]:
    """Each session's profile with the lowest kernel time per run, of ``rounds`` taken in
    alternating order (each round reverses the previous one)."""
    from pytest_ortperf.remote.interleave import order

    taken: list[list[Profile]] = [[] for _ in sessions]
    for r in range(rounds):
        for i in order(r, len(sessions)):
            taken[i].append(remote_profile(sessions[i], feeds, runs=runs))
    return [min(profiles, key=lambda p: p.kernel_us_per_run()) for profiles in taken]


def profile_lines(
    reference: RemoteSession, candidate: RemoteSession, feeds: Feeds, *, runs: int = 20
) -> list[str]:
    """Which op types got slower or faster, reference -> candidate: each profiled in its
    own worker, outside the timed runs (time per run of each op type, and counts), the
    least disturbed of :data:`PROFILE_ROUNDS` profiles of each."""
    from pytest_ortperf.profiling.parse import compare_profiles

    base, other = least_disturbed([reference, candidate], feeds, runs)
    diff = compare_profiles(base, other)
    frame = diff.by_op
    lines = [f"kernel time per run: {diff.base_kernel_us:.1f} -> {diff.optimized_kernel_us:.1f} us"]
    moved = (frame["optimized_us"] - frame["base_us"]).abs().sort_values(ascending=False)
    for pos in moved.index[:8]:
        row = frame.loc[pos]
        before, after = float(row["base_us"]), float(row["optimized_us"])
        if before == after:
            continue
        change = f" ({after / before - 1:+.1%})" if before > 0 else " (new)"
        count = f", count {row['change']}" if row["change"] else ""
        lines.append(f"  {row['op_type']}: {before:.1f} -> {after:.1f} us/run{change}{count}")
    return lines
