"""What the recorder times: a target's calls, the control workload, session records."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pytest_ortperf.measuring.calls import (
    APIS,
    Call,
    OrtBinding,
    binding_call,
    default_api,
    hide_rejected,
    make_call,
)
from pytest_ortperf.measuring.engine import TimingEngine
from pytest_ortperf.measuring.recorded_feeds import FeedPool, rotating
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.results import SessionInfo

Feeds = Mapping[str, np.ndarray[Any, Any]]
Target = OrtSession | OrtBinding

CONTROL_NAME = "ortperf-control"
"""Label of the control workload a normalized latency is measured against
(:func:`pytest_ortperf.models.control`)."""


def calls(
    target: Target, feeds: Feeds | None, api: str | None
) -> tuple[Call, Callable[[], list[Any]], str, OrtSession]:
    """A target's timed call, what gives its outputs, the API it runs through and its
    session. A binding runs through ``iobinding``; a session needs ``feeds`` and runs
    through ``api`` (default: the session's), a pool of recorded sets rotating one set per
    call."""
    __tracebackhide__ = hide_rejected
    if isinstance(target, OrtBinding):
        if api not in (None, "iobinding"):
            raise ValueError(f"a binding target is timed with api='iobinding', not {api!r}")
        call, outputs = binding_call(target)
        return call, outputs, "iobinding", target.session
    if not isinstance(target, OrtSession):
        raise TypeError(
            "target must be a session from ort_session or a binding from ort_binding, "
            f"got {type(target).__name__}"
        )
    if feeds is None:
        raise ValueError(f"feeds are required to time session {target.label!r}")
    api = api or default_api(target)
    if api not in APIS:
        raise ValueError(f"api={api!r} is not one of {', '.join(APIS)}")
    call, outputs = make_call(target, feeds, api)
    if isinstance(feeds, FeedPool) and len(feeds.sets) > 1:  # one recorded set per call
        rest = [make_call(target, s, api)[0] for s in feeds.sets[1:]]
        call = rotating([call, *rest])
    return call, outputs, api, target


@functools.cache
def control_workload(threads: int, spinning: bool) -> tuple[Call, OrtSession]:
    """The control workload's call and session, with a target's threads and spinning (so
    machine load hits both alike); built once per process for each such pair."""
    from pytest_ortperf.measuring.feeds import input_specs, make_feeds
    from pytest_ortperf.models import control

    session = OrtSession.create(control(), threads=threads, spinning=spinning, name=CONTROL_NAME)
    feeds = make_feeds(input_specs(session.sess))
    return make_call(session, feeds, "iobinding")[0], session


def warmed(engine: TimingEngine, *sessions: OrtSession) -> TimingEngine:
    """``engine`` with the warm-up bound of the providers the sessions run on (longer on
    CUDA and TensorRT, whose first runs search algorithms and build engines)."""
    providers = dict.fromkeys(p for s in sessions for p in s.sess.get_providers())
    return engine.for_providers(tuple(providers))


def session_info(session: OrtSession, structure: bool) -> SessionInfo:
    """The session's record; with ``structure``, its op histogram and node placement."""
    info = session.info(with_histogram=structure)
    if not structure:
        return info
    from pytest_ortperf.profiling.ep_assignment import session_placement

    placement = tuple((n, op, p) for n, (op, p) in session_placement(session).items())
    return dataclasses.replace(info, placement=placement)
