"""The warning of a target whose warm-up bound ran out before its block times settled."""

from __future__ import annotations

import os
import sys
import warnings
import weakref

from pytest_ortperf.measuring.engine import Samples, unsettled_warning
from pytest_ortperf.recorder.context import Context

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""The plugin's own files: the warning points at the first frame outside them."""

_WARNED: weakref.WeakKeyDictionary[Context, set[tuple[str, str, int]]] = weakref.WeakKeyDictionary()
"""Per test (its recorder's context): the unsettled warnings given, by target and line."""


def warn_unsettled(name: str, *arms: Samples) -> None:
    """A :class:`~pytest_ortperf.measuring.engine.WarmupWarning` (shown in pytest's warnings
    summary) when a target's warm-up bound ran out before its block times settled.

    Attributed to the first caller outside this package (the test's line), and given once
    per target and line in a test, however many runs measured it."""
    if all(s.settled for s in arms):
        return
    frame = sys._getframe(1)
    level = 2  # the caller of this function
    owner = None  # the test's context, when its recorder measured this
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        PACKAGE
    ):
        if owner is None:
            owner = next((v for v in frame.f_locals.values() if isinstance(v, Context)), None)
        frame = frame.f_back
        level += 1
    if owner is not None:
        given = _WARNED.setdefault(owner, set())
        key = (name, frame.f_code.co_filename, frame.f_lineno)
        if key in given:
            return
        given.add(key)
    warnings.warn(unsettled_warning(name), stacklevel=level)
