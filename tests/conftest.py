# Extension modules cannot be imported twice in one process, and pytester's in-process runs
# drop the modules an inner run imported: import them once here, before any inner run.
import numpy  # noqa: F401
import onnx  # noqa: F401
import onnxruntime  # noqa: F401
import pandas  # noqa: F401
import sqlalchemy  # noqa: F401

try:  # the HTML report's charts
    import matplotlib.backends.backend_agg
    import matplotlib.figure
    import matplotlib.patches
    import matplotlib.ticker  # noqa: F401
except ImportError:
    pass

import pytest

import pytest_ortperf.gating.gate
import pytest_ortperf.measure
import pytest_ortperf.models
import pytest_ortperf.recorder
import pytest_ortperf.store
import pytest_ortperf.testing


@pytest.fixture(autouse=True)
def _no_machine_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verdicts of in-process pytester runs must not depend on how busy this machine is
    (a load average above its CPUs turns a normalized regression into ``unstable``): the
    gate reads no load here; tests/test_gate_warnings.py injects loads where it matters."""
    monkeypatch.setattr(pytest_ortperf.gating.gate, "_load_average", lambda: None)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200-column terminal, whatever runs the tests (a tty, a pipe, an xdist worker), so
    summaries show whole ids; tests of narrow terminals set ``COLUMNS`` themselves."""
    monkeypatch.setenv("COLUMNS", "200")
