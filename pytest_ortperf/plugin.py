"""pytest glue: options, ini keys, marker, fixtures, hooks.

Loading this module imports neither onnxruntime nor pandas: the fixtures import the modules
that need them when a test asks for them.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_ortperf import values
from pytest_ortperf.config import (
    MARKER,
    MarkerError,
    OrtperfConfig,
    check_marker,
    marker_providers,
    marker_settings,
    missing_providers,
    report_files,
)
from pytest_ortperf.gating.settings import DEFAULT_ALPHA
from pytest_ortperf.reports.writer import JSON_FORMATS, ReportFiles
from pytest_ortperf.state import FAMILY_OUTPUT, STATE_KEY, OrtperfState

REPORT_FILES_KEY = pytest.StashKey[ReportFiles]()

RECORDER_KEY = pytest.StashKey["Recorder"]()

if TYPE_CHECKING:
    from typing import Unpack

    from pytest_ortperf.gating.gate import Gate
    from pytest_ortperf.gating.settings import GateSettings
    from pytest_ortperf.gating.suite import Family
    from pytest_ortperf.measuring.calls import OrtBinding
    from pytest_ortperf.measuring.session import OrtSession, SessionKeywords
    from pytest_ortperf.profiling.parse import Profile
    from pytest_ortperf.recorder import Recorder
    from pytest_ortperf.remote.sessions import RemoteEnvironment


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ortperf", "performance regression testing of ONNX models")
    group.addoption(
        "--ortperf",
        action="store_true",
        default=False,
        help="measure for real: time, record, store and gate (without it every "
        "measurement runs its model once as a smoke test)",
    )
    group.addoption(
        "--ortperf-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time budget of one measurement (default: ini ortperf_budget, else 1.0)",
    )
    group.addoption(
        "--ortperf-store",
        default=None,
        metavar="PATH_OR_URL",
        help="results store (default .ortperf/results.sqlite under the rootdir; 'none' "
        "disables it)",
    )
    group.addoption(
        "--ortperf-artifacts",
        default=None,
        metavar="DIR",
        help="artifact store of baselines' models, to judge latencies beside them: a "
        "directory, or 'store' for the results store (default: ini ortperf_artifacts, "
        "else $ORTPERF_ARTIFACTS, else .ortperf/artifacts under the rootdir)",
    )
    group.addoption(
        "--ortperf-skip-unchanged",
        action="store_true",
        default=None,
        help="run once, without measuring, a latency whose model, settings and onnxruntime "
        "are identical to its baseline's (default: ini ortperf_skip_unchanged, else off)",
    )
    group.addoption(
        "--ortperf-update",
        action="store_true",
        default=False,
        help="measure (implies --ortperf) and write the baselines __ortperf__/<module>.json "
        "of the tests that ran; never fails a test for a regression",
    )
    group.addoption(
        "--ortperf-threshold",
        default=None,
        metavar="FRACTION",
        help="slowdown a gated metric may show before it fails, e.g. 0.05 or 5%% "
        "(default: ini ortperf_threshold, else 5%%)",
    )
    group.addoption(
        "--ortperf-strict",
        action="store_true",
        default=None,
        help="also fail on inconclusive verdicts and on measurements with no baseline",
    )
    group.addoption(
        "--ortperf-update-processes",
        default=None,
        metavar="N",
        help="with --ortperf-update: take each baseline in N processes, this one and N-1 "
        "fresh ones that run the selected tests again, so that a baseline averages over "
        "what differs between processes (default: ini ortperf_update_processes, else 1; "
        f"at most {values.MAX_UPDATE_PROCESSES})",
    )
    group.addoption("--ortperf-update-part", default=None, help=argparse.SUPPRESS)
    group.addoption(
        "--ortperf-fail-blind",
        action="store_true",
        default=None,
        help="with --ortperf-update: fail a test whose new baseline stays too noisy to "
        "detect a slowdown of the threshold (it is always warned about)",
    )
    group.addoption(
        "--ortperf-family-alpha",
        default=None,
        metavar="ALPHA",
        help="family-wise control: a false alarm anywhere in the run at most ALPHA likely, "
        "split evenly over its planned timing verdicts (Bonferroni; each verdict's alpha "
        "never rises; default: ini ortperf_family_alpha, else off)",
    )
    group.addoption(
        "--ortperf-report",
        default=None,
        metavar="FILE.html",
        help="write a self-contained HTML report of the measurements, verdicts, profiles "
        "and history (default: ini ortperf_report)",
    )
    group.addoption(
        "--ortperf-json",
        default=None,
        metavar="FILE",
        help="write the results as JSON (default: ini ortperf_json)",
    )
    group.addoption(
        "--ortperf-json-format",
        default=None,
        choices=JSON_FORMATS,
        help="layout of --ortperf-json: our schema pytest-ortperf/1 (default) or "
        "pytest-benchmark's",
    )
    group.addoption(
        "--ortperf-markdown",
        default=None,
        metavar="FILE",
        help="append a Markdown summary to FILE (also to $GITHUB_STEP_SUMMARY when set)",
    )
    group.addoption(
        "--ortperf-pr-comment",
        default=None,
        metavar="FILE",
        help="write a short Markdown body for a pull-request comment to FILE: one line "
        "unless something regressed or improved (default: ini ortperf_pr_comment)",
    )
    parser.addini("ortperf_report", "HTML report file of --ortperf runs", default="")
    parser.addini("ortperf_json", "JSON results file of --ortperf runs", default="")
    parser.addini(
        "ortperf_json_format", "JSON layout: ortperf or pytest-benchmark", default="ortperf"
    )
    parser.addini("ortperf_markdown", "Markdown summary file (appended)", default="")
    parser.addini("ortperf_pr_comment", "pull-request comment file (Markdown)", default="")
    parser.addini("ortperf_budget", "time budget of one measurement in seconds", default="1.0")
    parser.addini("ortperf_store", "results store path or URL ('none' disables)", default="")
    parser.addini(
        "ortperf_artifacts",
        "artifact store: a directory or 'store' (default $ORTPERF_ARTIFACTS, else "
        ".ortperf/artifacts)",
        default="",
    )
    parser.addini(
        "ortperf_skip_unchanged", "do not measure latencies unchanged since the baseline",
        default="false",
    )  # fmt: skip
    parser.addini("ortperf_threshold", "allowed slowdown of a gated metric", default="0.05")
    parser.addini(
        "ortperf_alpha", "one-sided significance level of the gate", default=str(DEFAULT_ALPHA)
    )
    parser.addini(
        "ortperf_latency_threshold",
        "allowed slowdown of absolute latencies (default: ortperf_threshold)",
        default="",
    )
    parser.addini("ortperf_strict", "fail inconclusive and new verdicts too", default="false")
    parser.addini(
        "ortperf_update_processes",
        "processes --ortperf-update takes each baseline in",
        default="1",
    )
    parser.addini(
        "ortperf_fail_blind",
        "fail an update whose baseline cannot detect the threshold",
        default="false",
    )
    parser.addini(
        "ortperf_family_alpha",
        "family-wise alpha of a run's timing verdicts (empty: each verdict at ortperf_alpha)",
        default="",
    )
    parser.addini(
        "ortperf_latency",
        "how latencies are gated: normalized (against a control workload measured "
        "interleaved) or absolute (against earlier runs' medians in the store)",
        default="normalized",
    )
    parser.addini(
        "ortperf_fingerprint_ignore",
        "fingerprint keys that may differ from a baseline's (e.g. ort_version to gate "
        "across an onnxruntime upgrade on purpose)",
        type="args",
        default=[],
    )
    _add_history_options(parser)


def _add_history_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("ortperf")
    group.addoption(
        "--ortperf-baseline",
        default=None,
        metavar="files|history",
        help="where baselines come from: files (__ortperf__/<module>.json, the default) or "
        "history (the runs stored for a branch on a machine class; default: ini "
        "ortperf_baseline)",
    )
    group.addoption(
        "--ortperf-history-branch",
        default=None,
        metavar="BRANCH",
        help="branch whose stored runs make history baselines (default: ini "
        "ortperf_history_branch, else main)",
    )
    group.addoption(
        "--ortperf-history-machine",
        default=None,
        metavar="FINGERPRINT",
        help="machine class whose runs count, or a unique prefix of it (default: ini "
        "ortperf_history_machine, else this machine's)",
    )
    group.addoption(
        "--ortperf-history-window",
        default=None,
        metavar="RUNS",
        help="newest runs a history baseline pools (default: ini ortperf_history_window, else 10)",
    )
    parser.addini("ortperf_baseline", "where baselines come from: files or history",
                  default="files")  # fmt: skip
    parser.addini("ortperf_history_branch", "branch of history baselines", default="main")
    parser.addini(
        "ortperf_history_machine",
        "machine class of history baselines (default: this machine's)",
        default="",
    )
    parser.addini("ortperf_history_window", "runs a history baseline pools", default="10")


def _resolve_history(settings: OrtperfConfig, config: pytest.Config) -> OrtperfConfig:
    """A measured run with history baselines: a store to read, and the machine class a
    prefix names (a usage error when the store has none or several)."""
    if not settings.enabled or settings.baseline != "history":
        return settings
    from pytest_ortperf.store.errors import StoreError
    from pytest_ortperf.store.location import resolve_store
    from pytest_ortperf.store.secrets import redact_url

    target = resolve_store(settings.store, config.rootpath)
    if target is None:
        raise pytest.UsageError(
            "--ortperf-baseline=history reads the results store, which --ortperf-store=none "
            "(or ini ortperf_store) disables"
        )
    machine = settings.history.machine
    if machine is None:
        return settings
    from pytest_ortperf.gating.history_baseline import resolve_machine

    try:
        machine = resolve_machine(target, machine)
    except (ValueError, StoreError) as exc:
        what = (
            "--ortperf-history-machine"
            if config.getoption("ortperf_history_machine", None) is not None
            else "ini ortperf_history_machine"
        )
        raise pytest.UsageError(f"{what}: {redact_url(str(exc), target)}") from None
    return dataclasses.replace(
        settings, history=dataclasses.replace(settings.history, machine=machine)
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "ortperf(budget=None, block=None, threshold=None, alpha=None, structure=True, "
        "strict=None, providers=None): per-test settings of pytest-ortperf (budget in "
        "seconds per measurement, threshold as a fraction; structure=False stops gating the "
        "optimized graph's op types; providers: execution providers the test needs, skipped "
        "when onnxruntime lacks one)",
    )
    settings = _resolve_history(OrtperfConfig.from_pytest(config), config)
    state = OrtperfState(settings, config.rootpath)
    config.stash[STATE_KEY] = state
    config.stash[REPORT_FILES_KEY] = report_files(config)
    if not hasattr(config, "workerinput"):
        # Gathers records from test reports (on the xdist controller: the workers' reports).
        config.pluginmanager.register(state, "ortperf-state")


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # After -k/-m deselected: the run's tests. Every xdist worker collects them all, so
    # each computes the whole run's count; the controller gets it from their output.
    state = session.config.stash[STATE_KEY]
    state.family = _family(state, session.items)
    output = getattr(session.config, "workeroutput", None)
    if state.family is not None and output is not None:
        output[FAMILY_OUTPUT] = state.family.to_dict()


def _family(state: OrtperfState, items: Iterable[pytest.Item]) -> Family | None:
    """``--ortperf-family-alpha`` split over the timing verdicts the selected tests plan:
    per test using the ``ortperf`` fixture, its timing entries in its baseline file (one
    at least; with history baselines, one). A share below the smallest alpha is a usage
    error."""
    settings = state.settings
    if settings.family_alpha is None or not settings.enabled or settings.update:
        return None
    from pytest_ortperf.gating.baseline import BaselineError
    from pytest_ortperf.gating.baseline_entries import split_nodeid
    from pytest_ortperf.gating.suite import Family, planned_verdicts, timing_entries
    from pytest_ortperf.values import MIN_ALPHA

    by_file: dict[Any, Mapping[str, int]] = {}

    def entries(nodeid: str) -> int:
        if settings.baseline == "history":
            return 0
        path = state.baselines.path_of(nodeid)
        if path not in by_file:
            try:
                by_file[path] = timing_entries(state.baselines.load(path).entries)
            except BaselineError:  # the test fails on it, naming the file
                by_file[path] = {}
        return by_file[path].get(split_nodeid(nodeid)[1], 0)

    measuring = [i.nodeid for i in items if "ortperf" in getattr(i, "fixturenames", ())]
    family = Family(settings.family_alpha, planned_verdicts(entries(n) for n in measuring))
    if family.share < MIN_ALPHA:
        raise pytest.UsageError(
            f"--ortperf-family-alpha (or ini ortperf_family_alpha) {family.alpha:g} over "
            f"{family.planned} planned timing verdicts is {family.share:.2g} each, below "
            f"the smallest alpha {MIN_ALPHA:g} (a verdict could never reach it): raise it "
            f"to at least {family.planned * MIN_ALPHA:.2g} or select fewer tests (-k, -m)"
        )
    return family


def _xdist_workers(config: pytest.Config) -> bool:
    numprocesses = getattr(config.option, "numprocesses", None)
    return bool(numprocesses) or hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # Timed tests running side by side on a small machine disturb each other: under
    # --ortperf every test goes to one worker instead of recording disturbed numbers.
    if not config.stash[STATE_KEY].settings.enabled:
        return None
    from pytest_ortperf.xdist_serial import SerialScheduling

    return SerialScheduling(config, log)


def pytest_report_header(config: pytest.Config) -> str | None:
    settings = config.stash[STATE_KEY].settings
    if not settings.enabled:
        return "ortperf: smoke mode (each measurement runs once; use --ortperf to measure)"
    note = ", all tests on one xdist worker" if _xdist_workers(config) else ""
    mode = (
        "updating baselines"
        if settings.update
        else f"gating at {settings.gate.threshold:.0%}{', strict' if settings.gate.strict else ''}"
    )
    if settings.baseline == "history" and not settings.update:
        history = settings.history
        machine = history.machine or "this machine's class"
        mode += (
            f" against the history of branch {history.branch!r} ({machine}, last "
            f"{history.window} runs)"
        )
    return f"ortperf: measuring, budget {settings.budget_s:g} s per measurement, {mode}{note}"


@pytest.hookimpl(tryfirst=True)  # an update's further processes run before other plugins
def pytest_sessionfinish(session: pytest.Session) -> None:  # write their files (junitxml...)
    config = session.config
    if hasattr(config, "workerinput"):
        return
    state = config.stash[STATE_KEY]
    # A baseline the user asked to take must be there: one that cannot be written fails
    # the run (never an INTERNALERROR: a note says what failed).
    interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
    try:
        state.maintain_baselines(config, interrupted=interrupted)
    except Exception as exc:
        from pytest_ortperf.update_processes import UpdateInterrupted

        state.notes.append(_masked(state, f"baselines NOT written: {type(exc).__name__}: {exc}"))
        if isinstance(exc, UpdateInterrupted):  # Ctrl-C in an update's further process
            session.exitstatus = pytest.ExitCode.INTERRUPTED
            interrupted = True
        elif session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if state.blind_after_merge and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # --ortperf-fail-blind, see the notes
    if state.settings.update_part:  # a further process of an update: nothing else is its own
        return
    # The store is history: any failure of it is a note and never changes the exit status
    # (save_to_store never raises; this guard keeps that true whatever happens).
    try:
        state.save_to_store(config, interrupted=interrupted)
    except Exception as exc:
        note = f"results NOT stored: unexpected {type(exc).__name__}: {exc}"
        state.notes.append(_masked(state, note))
    # Report files never change the outcome: what could not be written is a note.
    try:
        state.write_reports(config.stash[REPORT_FILES_KEY], config, int(session.exitstatus))
    except Exception as exc:
        state.notes.append(_masked(state, f"reports NOT written: {type(exc).__name__}: {exc}"))


def _masked(state: OrtperfState, note: str) -> str:
    """``note`` with the store's credentials (and any URL password) masked."""
    from pytest_ortperf.store.secrets import redact_url

    try:
        target = state.store_target()
    except Exception:  # an unusable store setting: mask what is written as it is
        target = state.settings.store
    return redact_url(note, target)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.settings.enabled or not (state.records or state.notes):
        return
    from pytest_ortperf.reports.terminal import WIDTH, summary_lines
    from pytest_ortperf.text import escape_control

    terminalreporter.section("ortperf")
    # The terminal's width (pytest's writer knows it: COLUMNS, else the terminal, else 80).
    width = getattr(getattr(terminalreporter, "_tw", None), "fullwidth", None)
    if not isinstance(width, int) or width <= 0:
        width = WIDTH
    for line in summary_lines(state.records, state.judgements, width=width, family=state.family):
        terminalreporter.write_line(line)
    for note in state.notes:
        terminalreporter.write_line(f"ortperf: {escape_control(note)}", yellow="NOT" in note)


def _raise_from_test(exc: Exception) -> NoReturn:
    """Re-raise a user's mistake (bad model path, feeds, option) without the plugin's
    internal frames: the report shows the test's line and the message."""
    __tracebackhide__ = True
    raise exc.with_traceback(None) from None


@pytest.fixture
def ort_session() -> Callable[..., OrtSession]:
    """Factory: ``ort_session(model, *, providers=None, optimization="all", threads=1,
    spinning=False, options=None, custom_ops=None, name=None)``.

    A provider this onnxruntime build lacks skips the test, naming it and the available ones.
    """
    from pytest_ortperf.measuring.session import OrtSession, ProviderUnavailable

    def factory(
        model: Any, *, name: str | None = None, **keywords: Unpack[SessionKeywords]
    ) -> OrtSession:
        __tracebackhide__ = True
        try:
            return OrtSession.create(model, name=name, **keywords)
        except ProviderUnavailable as exc:
            # Reported at the test's location, not at this fixture's.
            raise pytest.skip.Exception(str(exc), _use_item_location=True) from None
        except (OSError, ValueError, RuntimeError) as exc:
            _raise_from_test(exc)

    return factory


@pytest.fixture
def ort_feeds() -> Callable[..., dict[str, Any]]:
    """Factory: ``ort_feeds(session, *, dims=None, shapes=None, seed=0, values=None,
    low=None, high=None)``: random inputs from the session's signature; or
    ``ort_feeds(session, from_path=PATH)``: recorded inputs (test_data_set folders, .npz,
    .npy, .pb; several sets make a pool: see :mod:`pytest_ortperf.measuring.recorded_feeds`)."""
    from pytest_ortperf.measuring.feeds import input_specs, make_feeds

    def factory(session: OrtSession, from_path: Any = None, **kwargs: Any) -> dict[str, Any]:
        __tracebackhide__ = True
        try:
            if from_path is not None:
                from pytest_ortperf.measuring.recorded_feeds import load_feeds

                if kwargs:
                    raise TypeError(
                        f"ort_feeds(from_path=...) loads recorded inputs as they are; "
                        f"{', '.join(sorted(kwargs))}= apply to random inputs only"
                    )
                return load_feeds(input_specs(session.sess), from_path, model=session.label)
            return make_feeds(input_specs(session.sess), **kwargs)
        except (ValueError, TypeError) as exc:
            _raise_from_test(exc)

    return factory


@pytest.fixture
def ort_binding() -> Callable[..., OrtBinding]:
    """Factory: ``ort_binding(session, feeds, *, device=None, device_id=0,
    run_options=None)``: IOBinding-backed feeds, inputs and outputs on the device (by
    default the session's: ``cuda`` for CUDA/TensorRT, else ``cpu``)."""
    from pytest_ortperf.measuring.calls import OrtBinding

    def factory(
        session: OrtSession,
        feeds: Mapping[str, Any],
        *,
        device: str | None = None,
        device_id: int = 0,
        run_options: Any = None,
    ) -> OrtBinding:
        __tracebackhide__ = True
        try:
            return OrtBinding(
                session, feeds, device=device, device_id=device_id, run_options=run_options
            )
        except ValueError as exc:
            _raise_from_test(exc)

    return factory


@pytest.fixture
def ort_profiler(request: pytest.FixtureRequest) -> Callable[..., Profile]:
    """Factory: ``ort_profiler(session_or_model, feeds, *, runs=10, warmup=3)``: per-node
    kernel timings of ``runs`` runs on a separate profiling session, warm-up excluded, the
    profile file in a temp dir that is removed. In smoke mode: one run, no warm-up."""
    from pytest_ortperf.profiling.run import profile_session

    measured = request.config.stash[STATE_KEY].settings.enabled

    def factory(
        session_or_model: Any, feeds: Mapping[str, Any], *, runs: int = 10, warmup: int = 3
    ) -> Profile:
        if not measured:
            runs, warmup = 1, 0
        return profile_session(session_or_model, feeds, runs=runs, warmup=warmup)

    return factory


@pytest.fixture
def ort_env() -> Generator[Callable[..., RemoteEnvironment], None, None]:
    """Factory: ``ort_env(spec, *, timeout_s=60.0)``: an environment whose
    ``session(model, ...)`` (``ort_session``'s keyword arguments) runs in a worker process
    of its own. ``spec``: a pip requirement (``"onnxruntime==1.31.1"``, created once in
    ``$ORTPERF_ENV_CACHE``, default ``~/.cache/pytest-ortperf/envs``), a list of them, or
    the path of a Python interpreter or virtual environment. Workers stop at teardown."""
    from pytest_ortperf.remote.sessions import RemoteEnvironment
    from pytest_ortperf.remote.venvs import EnvironmentSetupError

    made: list[RemoteEnvironment] = []

    def factory(spec: Any, **kwargs: Any) -> RemoteEnvironment:
        __tracebackhide__ = True
        try:
            env = RemoteEnvironment(spec, **kwargs)
        except (EnvironmentSetupError, ValueError) as exc:
            _raise_from_test(exc)
        made.append(env)
        return env

    yield factory
    for env in made:
        env.close()


@pytest.fixture
def ortperf(request: pytest.FixtureRequest) -> Generator[Recorder, None, None]:
    """The recorder: ``ortperf.latency``, ``ortperf.compare``, ``ortperf.rank``,
    ``ortperf.api_sweep``. Measures for real under ``--ortperf``, runs once otherwise."""
    from pytest_ortperf.gating.gate import BASELINE_RUNS, measuring_engine
    from pytest_ortperf.measuring.engine import Engine
    from pytest_ortperf.recorder import Recorder

    state: OrtperfState = request.config.stash[STATE_KEY]
    settings = state.settings
    node = request.node
    try:
        marker = marker_settings(node)
        engine_config = settings.engine_config(marker)
        gate_settings = settings.gate_settings(marker)
        if state.family is not None and not settings.update:
            alpha = state.family.alpha_of(gate_settings.alpha)
            gate_settings = dataclasses.replace(gate_settings, alpha=alpha)
    except MarkerError as exc:
        error = str(exc)
    else:
        error = ""
    if error:
        pytest.fail(error, pytrace=False)
    gated = settings.enabled and not settings.update
    engine = (
        measuring_engine(engine_config, gate_settings, update=settings.update)
        if settings.enabled
        else Engine(engine_config)
    )
    recorder = Recorder(
        test=node.nodeid,
        measured=settings.enabled,
        engine=engine,
        user_properties=node.user_properties,
        gate=_gate(state, gate_settings) if gated else None,
        profile_arms=settings.update,
        baseline_runs=BASELINE_RUNS if settings.update else 1,
        baseline_settings=gate_settings,
        fail_blind=settings.fail_blind,
        # History baselines judge every latency against the stored runs' medians.
        latency_mode="absolute" if settings.baseline == "history" else gate_settings.latency_mode,
    )
    recorder.marker_slo = marker.get("slo")
    if settings.enabled and settings.baseline != "history":
        from pytest_ortperf.recorder.beside_settings import BesideSettings

        recorder.context.beside = BesideSettings(
            artifacts=settings.artifacts, rootdir=request.config.rootpath,
            results_store=state.store_target(), skip_unchanged=settings.skip_unchanged,
        )  # fmt: skip
    node.stash[RECORDER_KEY] = recorder
    yield recorder


def _gate(state: OrtperfState, settings: GateSettings) -> Gate:
    """The gate of one test: against the baseline files, or the store's history."""
    from pytest_ortperf.gating.gate import Gate
    from pytest_ortperf.state import history, machine_facts

    if state.settings.baseline != "history":
        return Gate(settings, state.baselines, machine_facts, history(state))
    from pytest_ortperf.gating.history_baseline import HistoryBaselines, HistoryGate

    def this_machine() -> str:
        return str(machine_facts()["fingerprint"])

    source = HistoryBaselines(state.store_target(), state.settings.history, this_machine)
    return HistoryGate(settings, source, machine_facts)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # A bad marker fails its test in every mode, with or without the ortperf fixture (a
    # typo such as budgt=1 would otherwise pass unnoticed until the first measured run),
    # before any fixture is set up.
    if item.get_closest_marker(MARKER) is None:
        return
    try:
        check_marker(item, item.config.stash[STATE_KEY].settings)
        reason = missing_providers(marker_providers(marker_settings(item)))
    except MarkerError as exc:
        error = str(exc)
    else:
        if reason is not None:
            # reported at the test's location, not at this hook's
            raise pytest.skip.Exception(reason, _use_item_location=True)
        return
    pytest.fail(error, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    result = yield
    recorder = item.stash.get(RECORDER_KEY, None)
    if recorder is not None and recorder.failures:
        pytest.fail("\n\n".join(recorder.failures), pytrace=False)
    return result
