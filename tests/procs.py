"""Processes of the test run, read from ``/proc`` (no psutil): what a test checks was left
behind (workers, launches). Used by the tests of the upgrade gate, cold start and the
latency judged beside the baseline's model."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def parents(*, zombies: bool = False) -> dict[int, int]:
    """Every process's parent, by process id (zombies only when asked)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # After the command name (which may hold spaces and parentheses): state, ppid.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if zombies or fields[0] != "Z":
            found[int(entry.name)] = int(fields[1])
    return found


def children(pid: int | None = None, *, zombies: bool = False) -> set[int]:
    """Live child processes of ``pid`` (None: this process); zombies too when asked."""
    parent = os.getpid() if pid is None else pid
    return {p for p, ppid in parents(zombies=zombies).items() if ppid == parent}


def descendants(pid: int) -> set[int]:
    """Live processes below ``pid``: its children, their children, ..."""
    table = parents()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in table.items() if parent in frontier} - found
        found |= frontier
    return found


def interruptible() -> None:
    """``preexec_fn`` for a child a test interrupts: SIGINT back to its default, so that the
    child's Python turns it into ``KeyboardInterrupt`` even when this test run was started
    with SIGINT ignored (a background job of a non-interactive shell passes that on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
