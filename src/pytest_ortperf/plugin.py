"""pytest glue: options, ini keys, marker, fixtures, hooks.

Loading this module imports neither onnxruntime nor pandas: the fixtures import the modules
that need them when a test asks for them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from .config import MarkerError, OrtperfConfig, marker_settings
from .state import STATE_KEY, OrtperfState

if TYPE_CHECKING:
    from .recorder import Recorder
    from .runapi import OrtBinding
    from .session import OrtSession


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
    parser.addini("ortperf_budget", "time budget of one measurement in seconds", default="1.0")
    parser.addini("ortperf_store", "results store path or URL ('none' disables)", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "ortperf(budget=None, block=None): per-test settings of pytest-ortperf "
        "measurements (budget in seconds per measurement)",
    )
    settings = OrtperfConfig.from_pytest(config)
    state = OrtperfState(settings)
    config.stash[STATE_KEY] = state
    if not hasattr(config, "workerinput"):
        # Gathers records from test reports (on the xdist controller: the workers' reports).
        config.pluginmanager.register(state, "ortperf-state")


def _xdist_workers(config: pytest.Config) -> bool:
    numprocesses = getattr(config.option, "numprocesses", None)
    return bool(numprocesses) or hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # Timed tests running side by side on a small machine disturb each other: under
    # --ortperf every test goes to one worker instead of recording disturbed numbers.
    if not config.stash[STATE_KEY].settings.enabled:
        return None
    from .xdist_serial import SerialScheduling

    return SerialScheduling(config, log)


def pytest_report_header(config: pytest.Config) -> str | None:
    settings = config.stash[STATE_KEY].settings
    if not settings.enabled:
        return "ortperf: smoke mode (each measurement runs once; use --ortperf to measure)"
    note = ", all tests on one xdist worker" if _xdist_workers(config) else ""
    return f"ortperf: measuring, budget {settings.budget_s:g} s per measurement{note}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if not hasattr(config, "workerinput"):
        config.stash[STATE_KEY].save_to_store(config)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.settings.enabled or not state.records:
        return
    from .report import summary_lines

    terminalreporter.section("ortperf")
    for line in summary_lines(state.records):
        terminalreporter.write_line(line)
    for note in state.notes:
        terminalreporter.write_line(f"ortperf: {note}", yellow="NOT" in note)


@pytest.fixture
def ort_session() -> Callable[..., OrtSession]:
    """Factory: ``ort_session(model, *, providers=None, optimization="all", threads=1,
    spinning=False, options=None, custom_ops=None, name=None)``.

    A provider this onnxruntime build lacks skips the test, naming it and the available ones.
    """
    from .session import OrtSession, ProviderUnavailable

    def factory(
        model: Any,
        *,
        providers: Iterable[str] | None = None,
        optimization: str = "all",
        threads: int = 1,
        spinning: bool = False,
        options: Mapping[str, Any] | None = None,
        custom_ops: Iterable[str] | None = None,
        name: str | None = None,
    ) -> OrtSession:
        try:
            return OrtSession.create(
                model,
                providers=providers,
                optimization=optimization,
                threads=threads,
                spinning=spinning,
                options=options,
                custom_ops=custom_ops,
                name=name,
            )
        except ProviderUnavailable as exc:
            # Reported at the test's location, not at this fixture's.
            raise pytest.skip.Exception(str(exc), _use_item_location=True) from None

    return factory


@pytest.fixture
def ort_feeds() -> Callable[..., dict[str, Any]]:
    """Factory: ``ort_feeds(session, *, dims=None, shapes=None, seed=0, values=None,
    low=None, high=None)``: random inputs from the session's signature."""
    from .feeds import input_specs, make_feeds

    def factory(session: OrtSession, **kwargs: Any) -> dict[str, Any]:
        return make_feeds(input_specs(session.sess), **kwargs)

    return factory


@pytest.fixture
def ort_binding() -> Callable[..., OrtBinding]:
    """Factory: ``ort_binding(session, feeds, *, device="cpu")``: IOBinding-backed feeds."""
    from .runapi import OrtBinding

    def factory(
        session: OrtSession, feeds: Mapping[str, Any], *, device: str = "cpu"
    ) -> OrtBinding:
        return OrtBinding(session, feeds, device=device)

    return factory


@pytest.fixture
def ortperf(request: pytest.FixtureRequest) -> Generator[Recorder, None, None]:
    """The recorder: ``ortperf.latency``, ``ortperf.compare``, ``ortperf.rank``,
    ``ortperf.api_sweep``. Measures for real under ``--ortperf``, runs once otherwise."""
    from .measure import Engine
    from .recorder import Recorder

    state: OrtperfState = request.config.stash[STATE_KEY]
    node = request.node
    try:
        engine_config = state.settings.engine_config(marker_settings(node))
    except MarkerError as exc:
        pytest.fail(str(exc), pytrace=False)
    recorder = Recorder(
        test=node.nodeid,
        measured=state.settings.enabled,
        engine=Engine(engine_config),
        user_properties=node.user_properties,
    )
    yield recorder
