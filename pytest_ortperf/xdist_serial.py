"""A pytest-xdist scheduler that runs every test on one worker (imported only under xdist)."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling


class SerialScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """Every test in one scope, so one worker runs them all while the others stay idle."""

    def _split_scope(self, nodeid: str) -> str:
        return "ortperf-serial"
