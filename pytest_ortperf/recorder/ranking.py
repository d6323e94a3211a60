"""``ortperf.rank`` and ``ortperf.api_sweep`` of local sessions: several targets measured
interleaved, one row each, sorted by median."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_ortperf.measuring.calls import Call, make_call, usable_apis
from pytest_ortperf.measuring.engine import smoke
from pytest_ortperf.measuring.outputs import verify_outputs
from pytest_ortperf.measuring.session import OrtSession, watches_cpu
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.targets import Feeds, calls, warmed
from pytest_ortperf.recorder.unsettled import warn_unsettled

if TYPE_CHECKING:
    import pandas as pd


def ranking_frame(rows: Sequence[Mapping[str, Any]], measured: bool) -> pd.DataFrame:
    """The rows of a ranking (one per variant: its summary) sorted by median, each with
    its ratio to the fastest. Smoke mode times one call each: nothing to rank on, and
    the ``measured`` column (and ``frame.attrs["measured"]``) says so."""
    import pandas as pd

    frame = pd.DataFrame(list(rows)).sort_values("median", ignore_index=True)
    frame["ratio_to_fastest"] = frame["median"] / frame["median"].iloc[0]
    frame["measured"] = measured
    frame.attrs["measured"] = measured
    return frame


def rank(
    ctx: Context,
    variants: Mapping[str, OrtSession],
    feeds: Feeds,
    *,
    name: str,
    api: str,
    check_outputs: bool,
    atol: float,
    rtol: float,
) -> pd.DataFrame:
    """See :meth:`pytest_ortperf.recorder.Recorder.rank` (local sessions)."""
    pairs = {key: calls(s, feeds, api) for key, s in variants.items()}
    if check_outputs:
        (first_key, first), *rest = pairs.items()
        first_out = first[1]()
        for key, (_, outputs, _, session) in rest:
            verify_outputs(
                session.output_names,
                first_out,
                outputs(),
                atol=atol,
                rtol=rtol,
                what=f"rank {name!r}: {key!r} vs {first_key!r}",
            )
    return table(ctx, name, {key: (call, api, sess) for key, (call, _, _, sess) in pairs.items()})


def api_sweep(ctx: Context, session: OrtSession, feeds: Feeds, *, name: str) -> pd.DataFrame:
    """See :meth:`pytest_ortperf.recorder.Recorder.api_sweep`."""
    apis = usable_apis(session)
    timed = {api: (make_call(session, feeds, api)[0], api, session) for api in apis}
    return table(ctx, name, timed)


def table(
    ctx: Context, name: str, timed: Mapping[str, tuple[Call, str, OrtSession]]
) -> pd.DataFrame:
    """Each keyed call measured interleaved with the others and recorded as
    ``"<name>:<key>"``: their ranking."""
    keys = list(timed)
    if ctx.measured:
        sessions = [timed[k][2] for k in keys]
        all_samples = warmed(ctx.engine, *sessions).interleave(
            [timed[k][0] for k in keys], watch_cpu=watches_cpu(*sessions)
        )
        warn_unsettled(name, *all_samples)
    else:
        all_samples = [smoke(timed[k][0], ctx.engine.clock) for k in keys]
    rows = []
    for key, samples in zip(keys, all_samples, strict=True):
        _, api, session = timed[key]
        result = ctx.result(f"{name}:{key}", api, samples, session)
        ctx.recording.record(result)
        rows.append({"variant": key, "api": api, **result.summary.to_dict()})
    return ranking_frame(rows, ctx.measured)
