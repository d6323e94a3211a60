"""Run a session with ORT's profiler on.

Profiling always happens on a session of its own, derived from the measured one: profiled
runs are slower and must never be mixed into latency samples. The profile file is written in
a private temporary directory that is removed before returning, even on failure.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf.profiling.parse import Profile, read_profile

if TYPE_CHECKING:
    from pytest_ortperf.measuring.session import ModelLike, OrtSession

__all__ = ["profile_session"]


def profile_session(
    session: OrtSession | ModelLike,
    feeds: Mapping[str, Any],
    *,
    runs: int = 10,
    warmup: int = 3,
) -> Profile:
    """Profile ``runs`` calls of a session (after ``warmup`` calls left out of the profile).

    ``session`` is an :class:`~pytest_ortperf.measuring.session.OrtSession` (its settings
    are reused on a new, profiling session) or a model (path, bytes,
    ``onnx.ModelProto``) run with default settings.
    """
    from pytest_ortperf.measuring.ortvalues import run_plain
    from pytest_ortperf.measuring.session import OrtSession

    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0, got runs={runs}, warmup={warmup}")
    base = session if isinstance(session, OrtSession) else OrtSession.create(session)
    inputs = dict(feeds)
    with tempfile.TemporaryDirectory(prefix="ortperf-profile-") as tmp:
        # A unique prefix inside a private directory: ORT names files by the second only.
        prefix = os.path.join(tmp, "ort")
        profiling = base.derive(options={"enable_profiling": True, "profile_file_prefix": prefix})
        try:
            for _ in range(warmup + runs):
                run_plain(profiling.sess, inputs)  # bfloat16 feeds too
        finally:
            # end_profiling() writes the file now; without it the session would write one
            # when destroyed, possibly after the directory is gone.
            written = profiling.sess.end_profiling()
            del profiling
        path = Path(written) if written else None
        if path is None or not path.is_file():
            found = sorted(Path(tmp).glob("*.json"))
            if not found:
                raise RuntimeError(f"onnxruntime wrote no profile file under {tmp}")
            path = found[-1]
        profile = read_profile(path, keep_events=True)
    # Keep the profile independent of the deleted file.
    profile.source = None
    if profile.n_runs != warmup + runs:
        raise RuntimeError(
            f"expected {warmup + runs} model_run events in the profile, found {profile.n_runs}"
        )
    return profile.select_runs(warmup)
