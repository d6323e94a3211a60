"""What the timing benchmarks here share: skipped unless ``--ortperf`` measures, and their
progress printed past pytest's capture."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_ortperf.config import OrtperfConfig


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
