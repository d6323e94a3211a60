# Extension modules cannot be imported twice in one process, and pytester's in-process runs
# drop the modules an inner run imported: import them once here, before any inner run.
import numpy  # noqa: F401
import onnx  # noqa: F401
import onnxruntime  # noqa: F401
import pandas  # noqa: F401
import sqlalchemy

try:  # the HTML report's charts
    import matplotlib.backends.backend_agg
    import matplotlib.figure
    import matplotlib.patches
    import matplotlib.ticker  # noqa: F401
except ImportError:
    pass

try:  # the PostgreSQL store's driver, when installed
    import psycopg
    import sqlalchemy.dialects.postgresql.psycopg  # noqa: F401
except ImportError:
    psycopg = None  # type: ignore[assignment]

import os

import pytest
from pg_server import URL_ENV, Postgres


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200-column terminal, whatever runs the tests (a tty, a pipe, an xdist worker), so
    summaries show whole ids; tests of narrow terminals set ``COLUMNS`` themselves."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture(scope="session")
def postgres() -> Postgres:
    """The PostgreSQL server named by ``$ORTPERF_TEST_POSTGRES`` (``bash .ci/run`` starts
    one: tests/pg_server.py). Tests that need it skip without it, and fail with ``$CI``
    set: CI must run them."""

    def missing(what: str) -> None:
        if os.environ.get("CI"):
            pytest.fail(f"{what}; $CI is set: the PostgreSQL tests must run here", pytrace=False)
        pytest.skip(what)

    if psycopg is None:
        missing('psycopg 3 is not installed (pip install -e ".[postgres]")')
    url = os.environ.get(URL_ENV, "").strip()
    if not url:
        missing(
            f"no PostgreSQL server: set ${URL_ENV} to postgresql://user:password@host:port/"
            " (`python tests/pg_server.py start DIR` starts one; bash .ci/run does)"
        )
    try:
        return Postgres.from_url(url)
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)
