"""Scratch space a killed run cannot leave behind (issue 24, item 11): real processes,
real SIGKILLs and SIGTERMs of ``ortperf ab`` and ``cold_start`` parents, then the next
run, and nothing is left under the scratch root.

``ORTPERF_TEST_KILLS`` sets the kills per signal and parent (default 2; the issue's full
count: ``ORTPERF_TEST_KILLS=20``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

from pytest_ortperf import scratch
from pytest_ortperf.models import attention

KILLS = int(os.environ.get("ORTPERF_TEST_KILLS", "2"))

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch root of this test's own (subprocesses inherit it)."""
    path = tmp_path / "scratch"
    monkeypatch.setenv(scratch.SCRATCH_ENV_VAR, str(path))
    return path


def _next_run(env: dict[str, str] | None = None) -> None:
    """Another run that asks for scratch space, in a fresh process (and ends)."""
    code = "from pytest_ortperf import scratch; scratch.mkdtemp('x-')"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=env)


def test_own_directory_is_made_once_and_removed_at_exit(root: Path) -> None:
    code = (
        "from pytest_ortperf import scratch; a = scratch.mkdtemp('a-'); b = scratch.mkdtemp('b-');"
        "assert a.parent == b.parent == scratch.run_dir(); print(a.parent)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, timeout=60).stdout.strip()  # fmt: skip
    assert Path(out).parent == root and Path(out).name.startswith("run-")
    assert not Path(out).exists(), "the run's directory outlived its (clean) exit"


def test_reap_removes_dead_owners_only(root: Path) -> None:
    root.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        me = scratch.run_dir()
        alive = root / f"run-{sleeper.pid}-{scratch._start_time(sleeper.pid)}"
        reused = root / f"run-{sleeper.pid}-1"  # that PID, another start time: a reused PID
        dead = root / "run-999999999-5"
        other = root / "not-a-run"
        for path in (alive, reused, dead, other):
            (path / "sub").mkdir(parents=True)
        removed = scratch.reap(root)
        assert sorted(removed) == sorted([reused, dead])
        assert alive.is_dir() and other.is_dir() and me.is_dir()
    finally:
        sleeper.kill()
        sleeper.wait()
    scratch.reap(root)
    assert not alive.exists()


def test_root_of_another_kind_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(scratch.SCRATCH_ENV_VAR, str(tmp_path / "file"))
    code = "from pytest_ortperf import scratch; scratch.run_dir()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "file" in done.stderr


def _wait_for(root: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list(root.glob(f"run-{proc.pid}-*/{pattern}")):
            return
        if proc.poll() is not None:
            raise AssertionError(f"the parent ended first ({proc.returncode})")
        time.sleep(0.05)
    raise AssertionError(f"no {pattern} under {root} within {timeout} s")


def _kill_and_check(root: Path, proc: subprocess.Popen[bytes], sig: int) -> None:
    proc.send_signal(sig)
    proc.wait(timeout=60)
    _next_run()
    deadline = time.monotonic() + 10  # the next run reaps; workers that lost their parent end
    while list(root.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
        _next_run()
    assert list(root.iterdir()) == [], f"left after {signal.Signals(sig).name}"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killed_ortperf_ab_leaves_nothing_after_the_next_run(
    root: Path, tmp_path: Path, sig: int
) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(attention(), model)
    command = [sys.executable, "-m", "pytest_ortperf.cli", "ab", str(model), "--a",
               sys.executable, "--b", sys.executable, "--dim", "B=1", "--budget", "60",
               "--profile-runs", "0", "--processes", "1"]  # fmt: skip
    for _ in range(KILLS):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(root, "ortperf-feeds-*/feeds-*.npz", proc)  # measuring
        assert list(root.glob(f"run-{proc.pid}-*/ortperf-remote-*/model.onnx"))
        _kill_and_check(root, proc, sig)


COLD = """
import sys
import numpy as np
from pytest_ortperf import models
from pytest_ortperf.measuring.engine import Engine, EngineConfig
from pytest_ortperf.recorder import Recorder
rec = Recorder(test="t", measured=True, engine=Engine(EngineConfig()), user_properties=[])
rec.cold_start(models.control(), {"X": np.zeros((64, 256), np.float32)}, launches=200,
               budget=600)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killed_cold_start_parent_leaves_nothing_after_the_next_run(root: Path, sig: int) -> None:
    for _ in range(KILLS):
        proc = subprocess.Popen([sys.executable, "-c", COLD], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        _wait_for(root, "ortperf-coldstart-*", proc)
        _kill_and_check(root, proc, sig)
