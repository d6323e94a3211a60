"""An unsettled warm-up warns once per target, at the test's line (real pytest runs)."""

from __future__ import annotations

import json

import pytest

SUITE = """
import pytest
from pytest_ortperf import models
from pytest_ortperf.measuring.engine import Engine, EngineConfig


@pytest.fixture(autouse=True)
def never_settles(monkeypatch):
    \"\"\"The real engine (and every copy the plugin derives from it), whose warm-up
    verdict is always 'not settled'.\"\"\"
    real = Engine.warm_up

    def warm_up(self, call, *, deadline=None):
        return real(self, call, deadline=deadline)[0], False

    monkeypatch.setattr(Engine, "warm_up", warm_up)


def test_targets(ort_session, ort_feeds, ortperf):
    ortperf.engine = Engine(EngineConfig(budget_s=0.01, warmup_s=0.01))
    s = ort_session(models.linear_regression())
    feeds = ort_feeds(s, dims={"N": 1})
    ortperf.latency(s, feeds, name="lr")  # LATENCY LINE
    ortperf.compare(s, s.derive(), feeds, name="pair")  # COMPARE LINE
"""


CONFTEST = """
import json, pathlib

SEEN = []


def pytest_warning_recorded(warning_message, when, nodeid, location):
    if warning_message.category.__name__ == "WarmupWarning":
        where = f"{pathlib.Path(warning_message.filename).name}:{warning_message.lineno}"
        SEEN.append(f"{where}: {warning_message.message}")


def pytest_sessionfinish(session):
    pathlib.Path("warmup.json").write_text(json.dumps(SEEN))
"""


@pytest.mark.parametrize("mode", ["--ortperf", "--ortperf-update"])
def test_an_unsettled_target_warns_once_at_the_tests_line(
    pytester: pytest.Pytester, mode: str
) -> None:
    lines = pytester.makepyfile(test_suite=SUITE).read_text().splitlines()
    latency_line = next(i for i, x in enumerate(lines, 1) if "LATENCY LINE" in x)
    compare_line = next(i for i, x in enumerate(lines, 1) if "COMPARE LINE" in x)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf-store=none", mode)
    result.assert_outcomes(passed=1)
    seen = json.loads((pytester.path / "warmup.json").read_text())
    # one per target, however many runs measured it (an update takes several), at its line
    assert [w.split(": ortperf: ")[0] for w in seen] == [
        f"test_suite.py:{latency_line}",
        f"test_suite.py:{compare_line}",
    ], seen
    assert "'lr': block times had not settled" in seen[0] and "'pair'" in seen[1]
    assert "recorder.py" not in result.stdout.str()
