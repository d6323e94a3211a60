"""The baseline's model beside today's when the baseline ran on another onnxruntime: its
arm in a worker of that version (the upgrade gate's environments,
:class:`~pytest_ortperf.remote.sessions.RemoteEnvironment`), today's in a worker of this
environment, so that neither arm runs in the test's process while the other does not.

The environment of the baseline's version is made in the environment cache on first use
(:mod:`pytest_ortperf.remote.venvs`: the package registry, once), as ``ort_env`` makes it.
The A/A ratio baseline the verdict is judged against was measured in-process at the
update; the check's own pairs are worker pairs, their spread pooled as usual.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_ortperf.gating.beside import BesideGate
from pytest_ortperf.gating.gate import Decision
from pytest_ortperf.measuring.engine import StopRule, config_of
from pytest_ortperf.measuring.records import merge_runs
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.remote import measure_ab
from pytest_ortperf.recorder.targets import Feeds
from pytest_ortperf.results import Comparison

if TYPE_CHECKING:
    from pytest_ortperf.measuring.recipe import Recipe


def remote_side_by_side(
    ctx: Context,
    before: Recipe,
    data: bytes,
    libraries: tuple[str, ...],
    session: OrtSession,
    feeds: Feeds | None,
    api: str,
    name: str,
    aa: Mapping[str, Any],
    *,
    brief: str = "",
) -> Decision[Comparison]:
    """Today's session and the baseline's (``data``, with the baseline's settings and
    custom-op ``libraries``, on its ``before.onnxruntime``), each in a worker, measured
    interleaved through the gate's procedure (``brief``: its first measurement only) and
    judged against the A/A baseline ``aa``.
    Raises what setting up the environment or a worker raises (the caller falls back,
    naming it)."""
    from pytest_ortperf.remote.interleave import start_sessions
    from pytest_ortperf.remote.sessions import RemoteEnvironment, RemoteSession

    assert ctx.gate is not None
    envs = [RemoteEnvironment(before.onnxruntime)]
    try:
        envs.append(RemoteEnvironment(sys.executable))
        old, now = envs
        reference = old.session(
            data, name=f"baseline:{before.model_name or session.label}",
            custom_ops=libraries, **before.session.keywords(),
        )  # fmt: skip
        candidate = now.session(
            session.model_bytes, name=session.label, **session.settings.keywords()
        )

        def measure(engine: Any, stop: StopRule | None, fresh: bool) -> Comparison:
            pair: list[RemoteSession] = [reference, candidate]
            if fresh:  # a later pair: fresh workers, started side by side
                pair = start_sessions([reference.derive, candidate.derive])
            try:
                return measure_ab(
                    pair[0], pair[1], feeds or {}, config=config_of(engine), name=name,
                    test=ctx.test, api=api, stop=stop,
                )  # fmt: skip
            finally:
                if fresh:
                    for worker in pair:
                        worker.close()

        return BesideGate.of(ctx.gate).decide(measure, ctx.engine, aa, merge_runs, brief=brief)
    finally:
        for env in envs:
            env.close()
