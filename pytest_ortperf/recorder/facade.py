"""The ``ortperf`` fixture object: each public method hands its measurement to the module
of its kind (:mod:`pytest_ortperf.recorder`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from pytest_ortperf.gating.gate import Gate
from pytest_ortperf.gating.settings import GateSettings
from pytest_ortperf.measuring.calls import hide_rejected
from pytest_ortperf.measuring.engine import TimingEngine
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.recorder.cold_start import cold_start as measure_cold_start
from pytest_ortperf.recorder.cold_start import compare_cold_start as compare_cold_starts
from pytest_ortperf.recorder.context import Context
from pytest_ortperf.recorder.latency import check_max_slowdown
from pytest_ortperf.recorder.latency import compare as compare_local
from pytest_ortperf.recorder.latency import latency as measure_latency
from pytest_ortperf.recorder.per_call import per_call as measure_per_call
from pytest_ortperf.recorder.profiles import memory as measure_memory
from pytest_ortperf.recorder.profiles import profile as take_profile
from pytest_ortperf.recorder.ranking import api_sweep as sweep_apis
from pytest_ortperf.recorder.ranking import rank as rank_local
from pytest_ortperf.recorder.recording import Recording
from pytest_ortperf.recorder.remote import compare as compare_remote
from pytest_ortperf.recorder.remote import rank as rank_remote
from pytest_ortperf.recorder.targets import Feeds, Target
from pytest_ortperf.recorder.throughput import throughput as measure_throughput
from pytest_ortperf.results import ColdStartResult, Comparison, LatencyResult, MemoryResult, Record

if TYPE_CHECKING:
    import pandas as pd

    from pytest_ortperf.profiling.parse import Profile
    from pytest_ortperf.results import PerCallResult, ThroughputResult

T = TypeVar("T")


class _Shared(Generic[T]):
    """An attribute of the recorder kept on its :class:`Context` (where the modules of each
    kind read it), so that setting it on the recorder (``ortperf.engine = ...``) holds."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _Shared[T]: ...
    @overload
    def __get__(self, obj: Recorder, owner: type) -> T: ...
    def __get__(self, obj: Recorder | None, owner: type) -> T | _Shared[T]:
        if obj is None:
            return self
        return cast(T, getattr(obj.context, self.name))

    def __set__(self, obj: Recorder, value: T) -> None:
        setattr(obj.context, self.name, value)


class Recorder:
    """Measures latencies and comparisons, attaches them to the running test.

    In smoke mode (``measured=False``: plain ``pytest``) every measurement runs its target
    once, checks outputs, and records nothing. With a ``gate`` (``--ortperf`` without
    ``--ortperf-update``), ``latency`` and ``compare`` are judged against the baseline and a
    regression fails the test.
    """

    engine: _Shared[TimingEngine] = _Shared()
    gate: _Shared[Gate | None] = _Shared()
    profile_arms: _Shared[bool] = _Shared()
    """Profile both arms of each compare (outside the timed runs) and keep each op
    type's share of kernel time with the record: ``--ortperf-update`` stores them in
    the baseline, so a later regression can say which op types moved."""
    baseline_runs: _Shared[int] = _Shared()
    """Independent runs a measurement is taken as (``--ortperf-update``: several, each
    on fresh sessions, their spread the baseline's between-run variance)."""
    latency_mode: _Shared[str] = _Shared()
    """``normalized`` (a latency is measured interleaved with the control workload) or
    ``absolute``."""
    baseline_settings: _Shared[GateSettings] = _Shared()
    """Threshold and alpha a baseline taken here must be able to see
    (:func:`~pytest_ortperf.gating.gate.detects_of`)."""
    fail_blind: _Shared[bool] = _Shared()
    """Fail the test when its baseline stays too noisy to see the threshold
    (``--ortperf-fail-blind``)."""
    cold_launcher: _Shared[Callable[[Path, str, float], Any] | None] = _Shared()
    """What starts one cold-start process (None: :func:`pytest_ortperf.measuring.coldstart.launch`);
    tests set a :class:`pytest_ortperf.testing.ScriptedLauncher` to inject figures."""
    marker_slo: _Shared[Any] = _Shared()
    """The marker's ``slo=`` (set by the fixture): the budget of each measurement of the
    kind its form fits that gives no ``slo=`` of its own."""

    def __init__(
        self,
        *,
        test: str,
        measured: bool,
        engine: TimingEngine,
        user_properties: list[tuple[str, object]],
        gate: Gate | None = None,
        profile_arms: bool = False,
        baseline_runs: int = 1,
        latency_mode: str = "normalized",
        baseline_settings: GateSettings | None = None,
        fail_blind: bool = False,
    ) -> None:
        self.recording = Recording(test, measured, user_properties)
        self.context = Context(
            recording=self.recording, engine=engine, gate=gate, profile_arms=profile_arms,
            baseline_runs=baseline_runs, latency_mode=latency_mode,
            baseline_settings=baseline_settings or GateSettings(), fail_blind=fail_blind,
        )  # fmt: skip

    @property
    def test(self) -> str:
        return self.recording.test

    @property
    def measured(self) -> bool:
        return self.recording.measured

    @property
    def records(self) -> list[Record]:
        """Every record this test made."""
        return self.recording.records

    @property
    def failures(self) -> list[str]:
        """Failures of this test, raised together once the test body has run (so a
        failing measurement does not keep the next ones from being measured and stored)."""
        return self.recording.failures

    def latency(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        api: str | None = None,
        name: str | None = None,
        slo: Any = None,
    ) -> LatencyResult:
        """Seconds per call of a binding, or of a session with feeds through ``api``
        (default ``run``). Measured interleaved with the control workload when latencies
        are normalized (the default): the gate then judges target over control. ``slo``:
        a budget of the median, ``"5 ms"`` (:mod:`pytest_ortperf.gating.slo`)."""
        __tracebackhide__ = hide_rejected
        return measure_latency(self.context, target, feeds, api=api, name=name, slo=slo)

    def compare(
        self,
        reference: OrtSession,
        candidate: OrtSession,
        feeds: Feeds,
        *,
        name: str | None = None,
        api: str = "iobinding",
        check_outputs: bool = True,
        atol: float = 1e-4,
        rtol: float = 1e-3,
        confidence: float = 0.95,
        max_slowdown: float | None = None,
    ) -> Comparison:
        """Candidate vs reference, measured interleaved; outputs checked first.

        The ratio is candidate/reference per call (below 1: the candidate is faster), the
        Hodges-Lehmann estimate of the paired block ratios with its distribution-free
        interval at ``confidence``. Sessions of ``ort_env`` (remote sessions: both arms in
        worker processes) are measured by :mod:`pytest_ortperf.remote.sessions`. With
        ``max_slowdown`` (0.05: 5%), the comparison is also judged without any baseline:
        the candidate may not be slower than the reference by more than that.
        """
        __tracebackhide__ = hide_rejected
        from pytest_ortperf.remote.sessions import is_remote

        check_max_slowdown(max_slowdown)
        kind = compare_remote if is_remote(reference, candidate) else compare_local
        return kind(
            self.context, reference, candidate, feeds, name=name, api=api,
            check_outputs=check_outputs, atol=atol, rtol=rtol, confidence=confidence,
            max_slowdown=max_slowdown,
        )  # fmt: skip

    def profile(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        name: str | None = None,
        runs: int = 10,
        warmup: int = 3,
    ) -> Profile:
        """Per-node kernel timings of ``runs`` runs on a separate profiling session (never
        mixed into latency samples). Under ``--ortperf`` its per-op summary is stored with
        the measurement of the same ``name`` in this test."""
        return take_profile(self.context, target, feeds, name=name, runs=runs, warmup=warmup)

    def memory(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        api: str | None = None,
        name: str | None = None,
        runs: int = 5,
        arena: bool = True,
    ) -> MemoryResult:
        """Peak memory of the process during each of ``runs`` calls (Linux: the kernel's
        high-water mark, reset before each call where permitted) and, with ``arena`` (ORT
        >= 1.32, measured runs only), ORT's own peak bytes in use from a short profile on a
        separate session. ``name`` defaults to ``"<model>:memory"``. Gated with a
        tolerance (:mod:`pytest_ortperf.gating.memory_rule`): ``memory.growth`` and
        ``memory.arena_peak``. In smoke mode: one run, no profile."""
        return measure_memory(
            self.context, target, feeds, api=api, name=name, runs=runs, arena=arena
        )

    def cold_start(
        self,
        model: Any,
        feeds: Feeds,
        *,
        name: str | None = None,
        shape_feeds: Feeds | bool | None = None,
        launches: int | None = None,
        timeout: float | None = None,
        budget: float | None = None,
        slo: Any = None,
        **session_keywords: Any,
    ) -> ColdStartResult:
        """Session creation, first run, and first run at a new input shape, each launch
        a fresh Python process (see :mod:`pytest_ortperf.measuring.coldstart`). ``model`` is what
        ``ort_session`` takes, with its keywords (``providers``, ``optimization``,
        ``threads``, ``spinning``, ``options``, ``custom_ops``), or a session from it.
        ``shape_feeds``: feeds at the other shape (None: every dynamic dim doubled;
        False: no new-shape figure). Figures are gated against earlier runs' medians (as
        absolute latencies are); compare two models with :meth:`compare_cold_start`.
        ``slo``: budgets of the figures' medians, ``{"create": "2 s"}`` (at least the
        launches that can decide them are taken)."""
        __tracebackhide__ = hide_rejected
        return measure_cold_start(
            self.context, model, feeds, name=name, shape_feeds=shape_feeds, launches=launches,
            timeout=timeout, budget=budget, slo=slo, session_keywords=session_keywords,
        )  # fmt: skip

    def compare_cold_start(
        self,
        reference: Any,
        candidate: Any,
        feeds: Feeds,
        *,
        name: str | None = None,
        shape_feeds: Feeds | bool | None = None,
        launches: int | None = None,
        timeout: float | None = None,
        budget: float | None = None,
        confidence: float = 0.95,
        **session_keywords: Any,
    ) -> dict[str, Comparison]:
        """Cold starts of two models, their launches interleaved (reference, candidate,
        reference, ...): one :class:`~pytest_ortperf.results.Comparison` per figure
        (``create``, ``first_run``, ``new_shape`` where the models have a dynamic dim),
        its samples the per-launch seconds and its ratio candidate/reference, each
        recorded as ``"<name>:<figure>"`` and gated as any comparison is. Session keywords
        apply to both models (or pass sessions from ``ort_session``)."""
        __tracebackhide__ = hide_rejected
        return compare_cold_starts(
            self.context, reference, candidate, feeds, name=name, shape_feeds=shape_feeds,
            launches=launches, timeout=timeout, budget=budget, confidence=confidence,
            session_keywords=session_keywords,
        )  # fmt: skip

    def rank(
        self,
        variants: Mapping[str, OrtSession],
        feeds: Feeds,
        *,
        name: str = "rank",
        api: str = "iobinding",
        check_outputs: bool = True,
        atol: float = 1e-4,
        rtol: float = 1e-3,
    ) -> pd.DataFrame:
        """Several sessions measured interleaved: a DataFrame sorted by median with each
        variant's ratio to the fastest. Outputs are checked against the first variant.

        Its ``measured`` column (and ``frame.attrs["measured"]``) is False in smoke mode,
        where each variant ran once: medians and ``ratio_to_fastest`` are then no
        measurement, as for the other results."""
        if len(variants) < 2:
            raise ValueError("rank needs at least two variants")
        from pytest_ortperf.remote.sessions import is_remote

        kind = rank_remote if is_remote(*variants.values()) else rank_local
        return kind(
            self.context, variants, feeds, name=name, api=api, check_outputs=check_outputs,
            atol=atol, rtol=rtol,
        )  # fmt: skip

    def api_sweep(self, session: OrtSession, feeds: Feeds, *, name: str = "api") -> pd.DataFrame:
        """The same model through every run API (see :mod:`pytest_ortperf.measuring.calls`),
        measured interleaved: one row per API, sorted by median, ratios to the fastest.

        Its ``measured`` column (and ``frame.attrs["measured"]``) is False in smoke mode,
        where each API ran once: medians and ``ratio_to_fastest`` are then no
        measurement, as for the other results. A bfloat16 model leaves out the APIs that
        pass numpy arrays (``run``, ``run_c``, ``iobinding_bind_per_call``)."""
        return sweep_apis(self.context, session, feeds, name=name)

    def per_call(
        self,
        target: Target,
        feeds: Feeds | None = None,
        *,
        api: str | None = None,
        name: str | None = None,
        reference: Target | None = None,
        q: float = 0.99,
        threshold: float = 0.10,
        min_calls: int = 1000,
        max_calls: int = 20_000,
        slo: Any = None,
    ) -> PerCallResult:
        """Single calls timed one by one, the timer's own cost subtracted: p50/p90/p99/p99.9
        of single calls (``.quantiles``), beside the block median the gate uses
        (``.block_median``). See :mod:`pytest_ortperf.measuring.percall`.

        With a ``reference`` (another session or binding, same feeds and api) both are
        measured interleaved, round by round, and the tail rule
        (:func:`pytest_ortperf.gating.tails.judge_tail`) judges the ``q`` quantile ratio
        candidate/reference against ``threshold``: under ``--ortperf`` a regression fails
        the test (inconclusive fails only with ``--ortperf-strict``). The result is the
        target's, its ``reference`` the other arm. Recorded and stored; no baseline entry.
        With a reference the measurement is sized for ``q``: at least the calls that leave
        10 beyond it (1,000 for p99, 10,000 for p99.9) in 10 rounds, ``max_calls`` below
        that refused at once. ``q``, ``threshold``, ``min_calls`` and ``max_calls`` (at
        most 200,000) are checked before anything runs.

        ``slo``: budgets of quantiles of single calls, ``{"p99": "20 ms"}``; measuring goes
        on while one is undecided (:func:`pytest_ortperf.gating.slo.keep_measuring`).
        """
        __tracebackhide__ = hide_rejected
        return measure_per_call(
            self.context, target, feeds, api=api, name=name, reference=reference, q=q,
            threshold=threshold, min_calls=min_calls, max_calls=max_calls, slo=slo,
        )  # fmt: skip

    def throughput(
        self,
        target: OrtSession,
        feeds: Feeds,
        *,
        concurrency: Sequence[int] = (1, 2, 4),
        sessions: str = "shared",
        api: str | None = None,
        name: str | None = None,
        seconds: float | None = None,
        rounds: int = 3,
        slo: Any = None,
    ) -> ThroughputResult:
        """Calls per second and per-call latency with ``concurrency`` Python threads
        calling at once (ORT's run releases the GIL): all of them one session
        (``sessions="shared"``) or one session each (``"per_thread"``, derived from
        ``target`` with its settings). Each level runs ``seconds`` (default: the
        measurement budget) in ``rounds`` windows. The result names the intra-op threads,
        spinning and cores the figures depend on. Recorded and stored, not gated.
        ``slo``: a budget of calls per second by thread count, ``{4: "1500/s"}`` (at
        least the windows that can decide it are taken)."""
        __tracebackhide__ = hide_rejected
        return measure_throughput(
            self.context, target, feeds, concurrency=concurrency, sessions=sessions, api=api,
            name=name, seconds=seconds, rounds=rounds, slo=slo,
        )  # fmt: skip
