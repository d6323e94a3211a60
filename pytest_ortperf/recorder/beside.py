"""A local session's latency judged beside the baseline's own model (issue 23; the
statistics and words: :mod:`pytest_ortperf.gating.beside`).

At ``--ortperf-update`` (:func:`kept`): the latency's recipe, its model bytes (and custom-op
libraries) put into the artifact store, and an A/A ratio baseline of two fresh sessions of
the model measured interleaved. At a check (:func:`judged_beside`), by the recipe today:

- identical to the baseline's: ``unchanged``, measured for history at
  :data:`~pytest_ortperf.gating.gate.FIGURE_ONLY_BUDGET` of the budget (or, with
  ``--ortperf-skip-unchanged``, run once and not measured) and never failed;
- changed, and the baseline's session can be rebuilt (its model's bytes in the artifact
  store, or in git's history by the blob id the recipe keeps; its custom-op libraries:
  today's where their hashes match, else the baseline's own builds from the artifact
  store; its providers available): today's
  session measured interleaved with it, the ratio judged; where the baseline ran on
  another onnxruntime, its arm runs in a worker of that version and today's in a worker
  of this one (:mod:`pytest_ortperf.recorder.beside_remote`);
- else: today's mode (normalized or absolute), its verdict naming what was missing.

Only a local ``OrtSession`` measured by the real engine has a recipe, and a binding of
one as ``ort_binding`` makes it by default (its session and feeds, timed through
``iobinding``): a binding on another device or with run options, a remote session, or an
engine that injects its figures (``ScriptedEngine``), keeps today's modes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ortperf.gating.baseline_schema import RECIPE
from pytest_ortperf.gating.beside import (
    KEEP_ARTIFACTS,
    MODE,
    BesideGate,
    as_compare_entry,
    beside_fields,
    beside_verdict,
    fallback_verdicts,
    unchanged_verdict,
)
from pytest_ortperf.gating.gate import FIGURE_ONLY_BUDGET, Decision
from pytest_ortperf.measuring.calls import OrtBinding
from pytest_ortperf.measuring.engine import Engine, StopRule, TimingEngine, smoke
from pytest_ortperf.measuring.records import latency_result, merge_runs
from pytest_ortperf.measuring.session import OrtSession, ProviderUnavailable
from pytest_ortperf.recorder.beside_settings import ArtifactWarning
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.deciding import Measure, decide
from pytest_ortperf.recorder.pairs import measure_pair
from pytest_ortperf.recorder.targets import Feeds, Target, calls, session_info
from pytest_ortperf.results import Comparison, LatencyResult, Verdict

if TYPE_CHECKING:
    from pytest_ortperf.measuring.recipe import CustomOpsLibrary, Recipe


def applies(ctx: Context, target: Target) -> bool:
    """Whether this latency keeps or uses a recipe (see the module)."""
    return (
        ctx.beside is not None
        and ctx.measured
        and (type(target) is OrtSession or (type(target) is OrtBinding and target.plain))
        and isinstance(ctx.engine, Engine)
    )


def unbound(target: Target, feeds: Feeds | None) -> tuple[OrtSession, Feeds | None]:
    """The session and feeds a target is judged by: a plain binding's (:attr:`OrtBinding.
    plain`, timed through ``iobinding``, which binds them the same way) or the session's."""
    if isinstance(target, OrtBinding):
        return target.session, target.feeds
    return target, feeds


# --------------------------------------------------------------------------- update


def kept(
    ctx: Context, session: OrtSession, feeds: Feeds | None, api: str, name: str
) -> dict[str, Any]:
    """What a baseline entry keeps besides the record: the recipe and the A/A ratio
    baseline (empty where no recipe can be made); the model's bytes go to the artifact
    store (a failure warns, the update goes on)."""
    from pytest_ortperf.measuring.recipe import Recipe, RecipeError
    from pytest_ortperf.store.artifacts import ArtifactError
    from pytest_ortperf.store.artifacts_git import blob_id
    from pytest_ortperf.store.errors import StoreError

    assert ctx.beside is not None
    try:
        recipe = Recipe.of_session(session, feeds or {})
        recipe = dataclasses.replace(recipe, model_git=blob_id(session.model_bytes))
    except RecipeError as exc:
        warnings.warn(ArtifactWarning(f"{session.label}: no recipe kept ({exc})"), stacklevel=4)
        return {}
    try:
        store = ctx.beside.store()
        store.put(session.model_bytes, sha256=recipe.model_sha256)
        for library in session.settings.custom_ops:
            with open(library, "rb") as fh:
                store.put(fh.read())
    except (ArtifactError, StoreError, OSError) as exc:
        warnings.warn(
            ArtifactWarning(
                f"{session.label}: artifact not kept ({exc}); its checks fall back to the "
                f"{ctx.latency_mode} latency"
            ),
            stacklevel=4,
        )
    k = max(ctx.baseline_runs, 1)
    engine = ctx.engine.scaled(1.0 / k)
    parts = [_pair(ctx, session, session, feeds, api, engine, None, name) for _ in range(k)]
    return {RECIPE: recipe.to_dict(), **beside_fields(merge_runs(parts).to_dict())}


def _pair(
    ctx: Context,
    reference: OrtSession,
    candidate: OrtSession,
    feeds: Feeds | None,
    api: str,
    engine: TimingEngine,
    stop: StopRule | None,
    label: str,
) -> Comparison:
    """Fresh sessions of ``reference`` and ``candidate`` measured interleaved."""
    ref, cand = reference.derive(), candidate.derive()
    timed = [calls(ref, feeds, api)[0], calls(cand, feeds, api)[0]]
    return measure_pair(
        ctx, ref, cand, timed, api=api, label=label, engine=engine, stop=stop,
        confidence=0.95, structure=False,
    )  # fmt: skip


# --------------------------------------------------------------------------- check


@dataclass(frozen=True)
class Judged:
    """How a gated latency was judged: its decision and the payload's extra fields."""

    decision: Decision[LatencyResult]
    extra: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """What a check found of a target against its entry's recipe: ``unchanged``; or the
    baseline's session rebuilt here (``baseline``), or its model's bytes to run in a
    worker of the baseline's onnxruntime (``remote``: its recipe, ``data``), with what
    ``changed``; or why not (``reason``, which names what changed too)."""

    unchanged: bool = False
    baseline: OrtSession | None = None
    remote: Recipe | None = None
    data: bytes = b""
    model_sha256: str = ""
    changed: tuple[str, ...] = ()
    reason: str = ""
    libraries: tuple[str, ...] = ()
    """The custom-op libraries of the baseline's arm in a worker (``remote``)."""

    def side_by_side(
        self,
        ctx: Context,
        session: OrtSession,
        feeds: Feeds | None,
        api: str,
        name: str,
        entry: Mapping[str, Any],
        *,
        brief: str = "",
    ) -> Decision[Comparison] | str:
        """The side-by-side decision (``brief``: a first measurement only, why), or why
        there is none (a reason to fall back)."""
        aa = as_compare_entry(entry)
        if aa is None:
            return self.reason or "the baseline has no A/A ratio to judge beside"
        if self.baseline is not None:
            return side_by_side(ctx, self.baseline, session, feeds, api, name, aa, brief=brief)
        if self.remote is None:
            return self.reason
        from pytest_ortperf.recorder.beside_remote import remote_side_by_side

        try:
            return remote_side_by_side(
                ctx, self.remote, self.data, self.libraries, session, feeds, api, name, aa,
                brief=brief,
            )  # fmt: skip
        except Exception as exc:  # an environment not made, a worker that failed
            return (
                f"the baseline's {self.remote.onnxruntime} could not run its model here "
                f"({type(exc).__name__}: {exc}); changed: {', '.join(self.changed)}"
            )


def plan(
    ctx: Context, session: OrtSession, feeds: Feeds | None, name: str, entry: Mapping[str, Any]
) -> Plan:
    """How ``session`` is judged against ``entry``'s recipe (see :class:`Plan`); a damaged
    artifact, or a session ORT refuses, is warned about too (a missing one only said)."""
    from pytest_ortperf.measuring.recipe import Recipe, RecipeError
    from pytest_ortperf.store.artifacts import ArtifactMissing

    try:
        before = Recipe.from_dict(entry[RECIPE])
    except RecipeError as exc:
        return Plan(reason=f"the baseline's recipe is unusable ({exc})")
    try:
        now = Recipe.of_session(session, feeds or {})
    except RecipeError as exc:
        return Plan(reason=f"no recipe of today's session ({exc})")
    if now.digest == before.digest:
        return Plan(unchanged=True)
    changed = tuple(str(d) for d in before.differences(now))
    try:
        libraries = baseline_libraries(ctx, before, now, session)
        if before.onnxruntime != now.onnxruntime:  # run in a worker of that version
            data = _artifact(ctx, before)
            return Plan(remote=before, data=data, model_sha256=before.model_sha256,
                        changed=changed, libraries=libraries)  # fmt: skip
        baseline = _rebuilt(ctx, before, session, libraries)
    except Exception as exc:  # an artifact missing or damaged, a session ORT refuses
        reason = _describe(exc)
        missing = isinstance(exc, ArtifactMissing) or (
            isinstance(exc, LibraryUnavailable) and exc.missing
        )
        if not missing:  # damage is said even where it passes
            warnings.warn(ArtifactWarning(f"{name}: {reason}"), stacklevel=6)
    else:
        return Plan(baseline=baseline, model_sha256=before.model_sha256, changed=changed)
    return Plan(reason=f"{reason}; changed: {', '.join(changed)}")


def judged_beside(
    ctx: Context,
    session: OrtSession,
    feeds: Feeds | None,
    api: str,
    name: str,
    entry: Mapping[str, Any] | None,
    measure: Measure[LatencyResult],
) -> Judged | None:
    """The decision of a gated latency whose entry has a recipe (None: it has none, and
    the usual gate judges it)."""
    assert ctx.beside is not None and ctx.gate is not None
    if entry is None or entry.get(RECIPE) is None:
        return None
    found = plan(ctx, session, feeds, name, entry)
    if found.unchanged:
        return _unchanged(ctx, session, feeds, api, name, entry, measure)
    decision = found.side_by_side(ctx, session, feeds, api, name, entry, brief=ctx.fails_already)
    if isinstance(decision, str):
        return _fallback(ctx, measure, entry, decision)
    verdicts = [beside_verdict(v, found.model_sha256, found.changed) for v in decision.verdicts]
    first = None if decision.first is None else list(decision.first)
    today = dataclasses.replace(decision.record.candidate, name=name)
    extra = {MODE: "beside", "beside_ratio": decision.record.ratio}
    return Judged(Decision(today, verdicts, first), extra)


def side_by_side(
    ctx: Context,
    baseline: OrtSession,
    session: OrtSession,
    feeds: Feeds | None,
    api: str,
    name: str,
    aa: Mapping[str, Any],
    *,
    brief: str = "",
) -> Decision[Comparison]:
    """Today's session measured interleaved with the baseline's through the gate's
    procedure (``brief``: its first measurement only, :meth:`Gate.decide`), judged by the
    ratio rule against the A/A baseline ``aa``."""
    assert ctx.gate is not None

    def measure(engine: TimingEngine, stop: StopRule | None, fresh: bool) -> Comparison:
        return _pair(ctx, baseline, session, feeds, api, engine, stop, name)

    return BesideGate.of(ctx.gate).decide(measure, ctx.engine, aa, merge_runs, brief=brief)


def candidate_beside(
    ctx: Context,
    candidate: OrtSession,
    feeds: Feeds | None,
    api: str,
    label: str,
    entry: Mapping[str, Any] | None,
    *,
    brief: str = "",
) -> tuple[list[Verdict], str]:
    """A gated compare's candidate judged beside the baseline's candidate, where it
    changed since (issue 23, item 3: "did my change make it slower?"): the verdicts to
    add, or why it could not be (empty where nothing changed or no recipe was kept).
    ``brief``: why a first measurement is enough (the compare already fails)."""
    if entry is None or entry.get(RECIPE) is None:
        return [], ""
    found = plan(ctx, candidate, feeds, label, entry)
    if found.unchanged:
        return [], ""
    decision = found.side_by_side(ctx, candidate, feeds, api, label, entry, brief=brief)
    if isinstance(decision, str):
        return [], decision
    return [
        beside_verdict(v, found.model_sha256, found.changed, whose="candidate")
        for v in decision.verdicts
    ], ""  # fmt: skip


def _unchanged(
    ctx: Context,
    session: OrtSession,
    feeds: Feeds | None,
    api: str,
    name: str,
    entry: Mapping[str, Any],
    measure: Measure[LatencyResult],
) -> Judged:
    """Nothing hashed changed: measured briefly (for history) or, skipping, run once."""
    assert ctx.beside is not None and ctx.gate is not None
    if ctx.beside.skip_unchanged:
        samples = smoke(calls(session, feeds, api)[0], ctx.engine.clock)
        info = session_info(session, False)
        record = latency_result(ctx.test, name, api, samples, info, False)
        extra = {MODE: "unchanged", "not_measured": True}
        settings = ctx.gate.settings
        verdict = unchanged_verdict([], threshold=settings.threshold, alpha=settings.alpha)
        return Judged(Decision(record, [verdict]), extra)
    started = ctx.gate.clock()
    record = measure(ctx.engine.scaled(FIGURE_ONLY_BUDGET), None, False)
    figure = unchanged_verdict(ctx.gate.judge(record.to_dict(), entry), n=len(record.samples))
    return Judged(Decision(record, ctx.gate.timed([figure], started, 1)), {MODE: "unchanged"})


def _fallback(
    ctx: Context, measure: Measure[LatencyResult], entry: Mapping[str, Any], reason: str
) -> Judged:
    """Today's mode judges the latency; its verdicts name why (``reason``)."""
    decision = decide(ctx, measure, entry)
    verdicts = fallback_verdicts(decision.verdicts, reason)
    mode = f"{ctx.latency_mode} ({reason})"
    return Judged(Decision(decision.record, verdicts, decision.first), {MODE: mode})


class LibraryUnavailable(Exception):
    """The baseline's build of a custom-op library cannot be read back (``missing``: the
    artifact store holds none; else it is damaged or unreadable); the message names the
    library."""

    def __init__(self, library: CustomOpsLibrary, how: str, why: object, *, missing: bool) -> None:
        super().__init__(
            f"the baseline's custom-op library {library.name or '?'} (sha256 "
            f"{library.sha256[:12]}) changed since and its old build {how} ({why}), so the "
            "baseline's session cannot be rebuilt"
        )
        self.missing = missing


def baseline_libraries(
    ctx: Context, before: Recipe, now: Recipe, today: OrtSession
) -> tuple[str, ...]:
    """The custom-op libraries the baseline's session registers, in its order: today's
    file where its hash is one of the baseline's, else the baseline's own build, kept in
    the artifact store at the update and written into this run's scratch space (removed at
    exit; ORT loads a library by path). Raises :class:`LibraryUnavailable` naming a build
    that cannot be read back."""
    if before.custom_ops == now.custom_ops:
        return today.settings.custom_ops
    todays = {c.sha256: p for c, p in zip(now.custom_ops, today.settings.custom_ops, strict=True)}
    return tuple(todays.get(c.sha256) or _written_back(ctx, c) for c in before.custom_ops)


def _written_back(ctx: Context, library: CustomOpsLibrary) -> str:
    """The path of ``library``'s build from the artifact store, in the scratch space."""
    from pytest_ortperf import scratch
    from pytest_ortperf.files import replacing
    from pytest_ortperf.store.artifacts import ArtifactError, ArtifactMissing
    from pytest_ortperf.store.errors import StoreError

    assert ctx.beside is not None
    # The name comes from the baseline file: only its last part, never a path elsewhere.
    name = Path(library.name).name
    try:
        data = ctx.beside.store().get(library.sha256)
        path = (
            scratch.run_dir()
            / "custom-ops"
            / library.sha256
            / (name if name not in ("", ".", "..") else "library")
        )
        if not path.is_file() or path.stat().st_size != len(data):
            with replacing(path) as tmp:
                tmp.write_bytes(data)
    except ArtifactError as exc:
        gone = isinstance(exc, ArtifactMissing)
        how = "is not in the artifact store" if gone else "is unusable"
        raise LibraryUnavailable(library, how, exc, missing=gone) from None
    except (StoreError, OSError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise LibraryUnavailable(library, "could not be read back", why, missing=False) from None
    return str(path)


OR_COMMIT = "(or commit the model file: a check reads it back from git's history)"
"""The other way to keep a model, as a fallback verdict says it."""


def _describe(exc: BaseException) -> str:
    from pytest_ortperf.store.artifacts import ArtifactCorrupt, ArtifactError, ArtifactMissing

    if isinstance(exc, LibraryUnavailable):
        return f"{exc}; {KEEP_ARTIFACTS}" if exc.missing else str(exc)
    if isinstance(exc, ArtifactMissing):
        return f"the baseline's model is missing: {exc}; {KEEP_ARTIFACTS} {OR_COMMIT}"
    if isinstance(exc, ArtifactCorrupt):
        return f"the baseline's model is unusable: {exc}"
    if isinstance(exc, ArtifactError):
        return f"the baseline's model could not be read: {exc}"
    if isinstance(exc, ProviderUnavailable):
        return f"the baseline's execution provider is not available here ({exc})"
    return f"the baseline's session could not be rebuilt ({type(exc).__name__}: {exc})"


def _artifact(ctx: Context, before: Recipe) -> bytes:
    """The baseline's model's bytes, verified: from the artifact store, else (a committed
    model) from git's history, then kept in the store for the next check
    (:mod:`pytest_ortperf.store.artifacts_git`)."""
    from pytest_ortperf.store.artifacts import ArtifactError, ArtifactMissing
    from pytest_ortperf.store.artifacts_git import read_blob
    from pytest_ortperf.store.errors import StoreError

    assert ctx.beside is not None
    store = ctx.beside.store()
    try:
        return store.get(before.model_sha256, size=before.model_size)
    except ArtifactMissing as exc:
        if not before.model_git:
            raise
        missing = exc
    try:
        data = read_blob(
            before.model_git, sha256=before.model_sha256, size=before.model_size,
            repo=ctx.beside.rootdir,
        )  # fmt: skip
    except ArtifactMissing as exc:
        raise ArtifactMissing(f"{missing}, nor in git ({exc})") from None
    # Used all the same: a store that cannot keep it has git read it again next time.
    with contextlib.suppress(ArtifactError, StoreError, OSError):
        store.put(data, sha256=before.model_sha256)
    return data


def _rebuilt(
    ctx: Context, before: Recipe, today: OrtSession, libraries: tuple[str, ...]
) -> OrtSession:
    """The baseline's session: its model's bytes from the artifact store with its
    settings and custom-op ``libraries`` (:func:`baseline_libraries`)."""
    data = _artifact(ctx, before)
    keywords = before.session.keywords()
    label = f"baseline:{before.model_name or today.label}"
    return OrtSession.create(data, name=label, custom_ops=libraries, **keywords)
