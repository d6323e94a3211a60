"""What the timing benchmarks here share: skipped unless ``--ortperf`` measures, and their
progress printed past pytest's capture."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_ortperf.config import OrtperfConfig
    from pytest_ortperf.measuring.engine import Engine
    from pytest_ortperf.measuring.session import OrtSession


def timing_settings(request: pytest.FixtureRequest) -> OrtperfConfig:
    """The run's ortperf settings; skips the benchmark when ``--ortperf`` is not given."""
    from pytest_ortperf.state import STATE_KEY

    settings = request.config.stash[STATE_KEY].settings
    if not settings.enabled:
        pytest.skip("a timing benchmark: run it with --ortperf")
    return settings


def narrator(capsys: pytest.CaptureFixture[str]) -> Callable[[str], None]:
    """A ``say(text)`` that prints to stderr at once, whatever pytest captures."""

    def say(text: str) -> None:
        with capsys.disabled():
            print(text, file=sys.stderr, flush=True)

    return say


def conditions(variable: str) -> list[str]:
    """The conditions environment variable ``variable`` names, comma-separated: ``quiet``,
    ``noisy`` or both (the default), in that order of mention."""
    phases = [p.strip() for p in os.environ.get(variable, "quiet,noisy").split(",")]
    assert set(phases) <= {"quiet", "noisy"}, f"{variable}: quiet, noisy or both"
    return phases


def in_condition(phase: str) -> contextlib.AbstractContextManager[object]:
    """Nothing for ``quiet``; for ``noisy``, one process spinning on a core and one
    streaming memory beside the block (:func:`noise.noisy_neighbours`)."""
    from noise import noisy_neighbours

    if phase == "noisy":
        return noisy_neighbours(spinners=1, streamers=1)
    return contextlib.nullcontext()


def pair_log_ratio(
    engine: Engine, first: OrtSession, second: OrtSession, feeds: Any, api: str = "iobinding"
) -> float:
    """The log of ``second``'s time over ``first``'s on one session pair: their calls
    through ``api`` interleaved by ``engine``, the paired ratio of their blocks."""
    import math

    from pytest_ortperf.measuring.calls import make_call
    from pytest_ortperf.stats import paired_ratio, ratio_of_blocks

    a, b = engine.interleave([make_call(s, feeds, api)[0] for s in (first, second)])
    return math.log(paired_ratio(ratio_of_blocks(a.values, b.values)).ratio)
