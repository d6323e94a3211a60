"""The upgrade gate: environments, workers, interleaved A/B across processes, `ortperf ab`.

Real worker processes and real onnxruntime versions: ``onnxruntime==1.31.1`` is installed
once per session into a temporary cache (or ``$ORTPERF_ENV_CACHE``, to reuse it between
sessions) and set against this environment's onnxruntime. Set ``ORTPERF_TEST_NETWORK=0`` to
skip the tests that need the package registry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from procs import children, descendants, interruptible

from pytest_ortperf.cli import main
from pytest_ortperf.gating.ab import histogram_changes, judge_ab
from pytest_ortperf.measuring.engine import EngineConfig
from pytest_ortperf.measuring.feeds import make_feeds
from pytest_ortperf.models import attention, linear_regression
from pytest_ortperf.remote.ab import ab
from pytest_ortperf.remote.interleave import interleave, order, shared_feeds
from pytest_ortperf.remote.profiles import remote_profile
from pytest_ortperf.remote.sessions import RemoteEnvironment, WorkerError, WorkerTimeout
from pytest_ortperf.remote.venvs import (
    CACHE_ENV_VAR,
    EnvironmentSetupError,
    EnvSpec,
    cache_dir,
    ensure,
)
from pytest_ortperf.results import Outcome

OLD = "onnxruntime==1.31.1"
NETWORK = os.environ.get("ORTPERF_TEST_NETWORK", "1") != "0"
needs_registry = pytest.mark.skipif(not NETWORK, reason="ORTPERF_TEST_NETWORK=0")
TINY = EngineConfig(budget_s=0.1, warmup_s=0.02, min_blocks=3)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get(CACHE_ENV_VAR)
    return Path(given) if given else tmp_path_factory.mktemp("ortperf-envs")


ENSURE = (
    "import sys; from pathlib import Path; "
    "from pytest_ortperf.remote.venvs import EnvSpec, ensure; "
    "print(ensure(EnvSpec.parse(sys.argv[1]), cache=Path(sys.argv[2])))"
)


@pytest.fixture(scope="session")
def installs(env_cache: Path) -> list[str]:
    """Two processes ask for the 1.31.1 environment at once (as two pytest processes
    would): what each got. The lock makes the second wait for the first's install."""
    if not NETWORK:
        pytest.skip("ORTPERF_TEST_NETWORK=0")
    procs = [
        subprocess.Popen([sys.executable, "-c", ENSURE, OLD, str(env_cache)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    return [out.strip() for out, _ in outs]


@pytest.fixture(scope="session")
def old_python(installs: list[str]) -> Path:
    """The interpreter of an environment with onnxruntime 1.31.1, made once per session."""
    return Path(installs[0])


@pytest.fixture
def here() -> RemoteEnvironment:
    """This interpreter as an environment (no install)."""
    with RemoteEnvironment(sys.executable, timeout_s=20.0) as env:
        yield env


@pytest.fixture
def no_leftovers():
    before = children()
    yield
    deadline = time.monotonic() + 5.0
    while children() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children() - before == set(), "worker processes left behind"


# ------------------------------------------------------------------------ specs and cache


def test_spec_from_requirement_paths_and_lists() -> None:
    assert EnvSpec.parse(OLD) == EnvSpec(requirements=(OLD,))
    both = EnvSpec.parse(f"{OLD} onnxruntime-extensions")
    assert both.requirements == (OLD, "onnxruntime-extensions")
    assert EnvSpec.parse([OLD]).requirements == (OLD,)
    assert EnvSpec.parse("/usr/bin/python3").interpreter == "/usr/bin/python3"
    assert EnvSpec.parse("./venv").interpreter == "./venv"
    assert EnvSpec.parse(Path("venv")).interpreter == "venv"
    assert EnvSpec.parse(OLD).key() != EnvSpec.parse("onnxruntime==1.32.0").key()
    assert EnvSpec.parse(f"{OLD} b").key() == EnvSpec.parse(f"b {OLD}").key()
    with pytest.raises(ValueError, match="needs a requirement"):
        EnvSpec.parse("  ")


def test_cache_dir_is_documented_and_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, "/somewhere/envs")
    assert cache_dir() == Path("/somewhere/envs")
    monkeypatch.delenv(CACHE_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert cache_dir() == Path("/xdg/pytest-ortperf/envs")


@needs_registry
def test_concurrent_processes_install_once(installs: list[str], env_cache: Path) -> None:
    key = EnvSpec.parse(OLD).key()
    assert installs[0] == installs[1] == str(env_cache / key / "bin" / "python")
    assert (env_cache / key / "ready.json").is_file()
    assert not (env_cache / f"{key}.lock").exists()
    assert ensure(EnvSpec.parse(OLD), cache=env_cache) == Path(installs[0])  # reused


def test_missing_interpreter_is_a_clear_error(no_leftovers: None) -> None:
    with pytest.raises(EnvironmentSetupError, match=r"/nowhere/python.*no such Python interpreter"):
        RemoteEnvironment("/nowhere/python")


def test_directory_that_is_no_venv(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentSetupError, match="no bin/python"):
        RemoteEnvironment(tmp_path)


def test_interpreter_without_onnxruntime(tmp_path: Path, no_leftovers: None) -> None:
    """A venv without onnxruntime: the worker does not see this environment's packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")],
                   check=True)  # fmt: skip
    env = RemoteEnvironment(tmp_path / "v")
    with pytest.raises(
        WorkerError, match=r"has no onnxruntime \(no module named 'numpy'\): install it there"
    ):
        env.session(linear_regression())


def test_bad_requirement_names_it_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentSetupError, match=r"install onnxruntime==0\.0\.1 failed"):
        RemoteEnvironment("onnxruntime==0.0.1", cache=tmp_path)
    assert not any(p.is_dir() for p in tmp_path.iterdir()), "a half-made environment is left"


def test_provider_the_version_lacks(no_leftovers: None, here: RemoteEnvironment) -> None:
    with pytest.raises(WorkerError, match=r"\['NoSuchExecutionProvider'\] not available in"):
        here.session(linear_regression(), providers=["NoSuchExecutionProvider"])


def test_model_that_does_not_load_names_version(
    no_leftovers: None, here: RemoteEnvironment
) -> None:
    with pytest.raises(WorkerError, match=r"could not load model <bytes>.*onnxruntime 1\.\d+"):
        here.session(b"not a model")


# ------------------------------------------------------------------------ the worker


def test_worker_session_runs_like_a_local_one(no_leftovers: None, here: RemoteEnvironment) -> None:
    import onnxruntime as ort

    model = linear_regression()
    remote = here.session(model, name="lr")
    assert remote.version == ort.__version__
    feeds = make_feeds(remote.get_inputs(), dims={"N": 4})
    local = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(remote.run(feeds)[0], local.run(None, feeds)[0], rtol=1e-6)
    assert remote.op_histogram()  # the optimized graph, saved by the worker
    profile = remote_profile(remote, feeds, runs=2, warmup=1)
    assert profile.n_runs == 2
    assert set(profile.by_op()["op_type"]) <= set(remote.op_histogram())


def test_blocks_go_in_abba_order() -> None:
    assert [order(r, 2) for r in range(4)] == [[0, 1], [1, 0], [0, 1], [1, 0]]
    assert order(1, 3) == [2, 1, 0]


def test_interleave_pairs_blocks_of_each_worker(
    no_leftovers: None, here: RemoteEnvironment
) -> None:
    a, b = here.session(attention()), here.session(attention())
    assert a.pid != b.pid
    feeds = make_feeds(a.get_inputs(), dims={"B": 1})
    with shared_feeds([a, b], feeds, "iobinding"):
        sa, sb = interleave([a, b], TINY)
    assert len(sa.values) == len(sb.values) >= 2
    assert all(v > 0 for v in (*sa.values, *sb.values))


# ------------------------------------------------------------------------ faults


def test_killed_worker_mid_measurement(no_leftovers: None, here: RemoteEnvironment) -> None:
    a, b = here.session(attention()), here.session(attention())
    feeds = make_feeds(a.get_inputs(), dims={"B": 1})
    killer = threading.Timer(0.3, os.kill, (b.pid, signal.SIGKILL))
    start = time.monotonic()
    dead = r"worker \(pid \d+\) died \(killed by signal SIGKILL\) (before|during) 'block'"
    with pytest.raises(WorkerError, match=dead), shared_feeds([a, b], feeds, "iobinding"):
        killer.start()
        interleave([a, b], EngineConfig(budget_s=30.0))
    killer.join()
    assert time.monotonic() - start < 10
    assert not alive(a.pid) and not alive(b.pid), "the other worker was not stopped"


def test_hung_worker_times_out(no_leftovers: None) -> None:
    with RemoteEnvironment(sys.executable, timeout_s=1.0) as env:
        a, b = env.session(attention()), env.session(attention())
        feeds = make_feeds(a.get_inputs(), dims={"B": 1})
        start = time.monotonic()
        hung = r"did not answer '\w+' within 1 s; it was killed"
        with pytest.raises(WorkerTimeout, match=hung), shared_feeds([a, b], feeds, "iobinding"):
            os.kill(b.pid, signal.SIGSTOP)
            interleave([a, b], EngineConfig(budget_s=30.0))
        assert time.monotonic() - start < 10
        assert not alive(a.pid) and not alive(b.pid)


ORPHAN = (
    "import os, signal, sys; from pytest_ortperf.remote.sessions import RemoteEnvironment; "
    "from pytest_ortperf.models import linear_regression; "
    "s = RemoteEnvironment(sys.executable).session(linear_regression()); "
    "print(s.pid, s._dir, flush=True); os.kill(os.getpid(), signal.SIGKILL)"
)


def test_parent_killed_leaves_no_worker_and_no_files() -> None:
    out = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True,
                         timeout=60).stdout.split()  # fmt: skip
    pid, scratch = int(out[0]), Path(out[1])
    deadline = time.monotonic() + 10
    while (alive(pid) or scratch.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the worker outlived its parent"
    assert not scratch.exists(), "the session's files outlived its parent"


def test_error_answer_keeps_the_worker_usable(here: RemoteEnvironment) -> None:
    session = here.session(linear_regression())
    with pytest.raises(WorkerError, match="no feeds bound"):
        session.block(1)
    assert session.worker.alive


def test_worker_times_a_block_in_the_engines_groups(
    no_leftovers: None, here: RemoteEnvironment
) -> None:
    session = here.session(linear_regression())
    feeds = make_feeds(session.get_inputs(), dims={"N": 1})
    with shared_feeds([session], feeds, "run"):
        per_call, wall_ns, cpu_ns = session.block(200)  # nine groups of 22 or 23 calls
        assert 0 < per_call * 200 <= wall_ns * 1e-9 * 1.5 and cpu_ns > 0
        with pytest.raises(WorkerError, match=r"group sizes \[1, 1\] do not split a block of 3"):
            session._request("block", 30.0, k=3, sizes=[1, 1])
        assert session.block(1)[0] > 0  # still usable


# ------------------------------------------------------------------------ verdicts (pure)


def _ratios(center: float, spread: float, n: int = 60, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(center * np.exp(rng.normal(0.0, spread, n)))


@pytest.mark.parametrize(
    ("center", "spread", "seed", "outcome"),
    [
        (1.00, 0.01, 0, Outcome.OK),
        (1.15, 0.01, 0, Outcome.REGRESSED),
        (0.85, 0.01, 0, Outcome.IMPROVED),
        (1.08, 0.30, 1, Outcome.INCONCLUSIVE),
    ],
)
def test_ab_verdict_without_baseline(
    center: float, spread: float, seed: int, outcome: Outcome
) -> None:
    verdict = judge_ab(_ratios(center, spread, seed=seed), threshold=0.05, alpha=0.01)
    assert verdict.outcome is outcome
    assert verdict.message.startswith("B / A = ")
    assert "no baseline: judged on the A/B itself" in verdict.message


def test_ab_verdict_counts_the_spread_between_processes() -> None:
    """However precise the blocks, one A/B cannot see how the next pair of processes would
    read: its interval keeps a between-run deviation (1%), so +/-2.3% at least."""
    verdict = judge_ab(_ratios(1.04, 0.0001), threshold=0.05)
    assert verdict.outcome is Outcome.OK
    assert verdict.high - verdict.low > 0.045


def test_histogram_changes_name_fusions() -> None:
    a = {"FusedMatMul": 1, "MatMul": 3, "Softmax": 1}
    b = {"MatMul": 4, "Softmax": 1, "Transpose": 1}
    assert histogram_changes(a, b) == [
        "FusedMatMul 1 -> 0 (a fusion A applies and B does not)",
        "MatMul 3 -> 4",
        "Transpose 0 -> 1",
    ]
    assert histogram_changes(a, a) == []


# ------------------------------------------------------------------------ real versions


@needs_registry
def test_ab_of_two_real_versions(old_python: Path, no_leftovers: None) -> None:
    import onnxruntime as ort

    result = ab(attention(), old_python, sys.executable, dims={"B": 1}, budget_s=0.2,
                profile_runs=2)  # fmt: skip
    assert result.versions == ("1.31.1", ort.__version__)
    c = result.comparison
    assert c.low <= c.ratio <= c.high and len(c.block_ratios) >= 2
    assert c.output_diffs and c.output_diffs[0].max_abs < 1e-4
    assert c.reference.session is not None and "1.31.1" not in c.candidate.name
    assert result.profile[0].startswith("kernel time per run")
    text = "\n".join(result.lines())
    assert "(onnxruntime 1.31.1)" in text and "verdict: B / A = " in text
    json.dumps(result.to_dict())


@needs_registry
def test_cli_ab(old_python: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "attention.onnx"
    onnx.save(attention(), model)
    out = tmp_path / "ab.json"
    page = tmp_path / "ab.html"
    status = main(["ab", str(model), "--a", str(old_python), "--b", sys.executable,
                   "--dim", "B=1", "--budget", "0.2", "--profile-runs", "1",
                   "--json", str(out), "--html", str(page)])  # fmt: skip
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    regressed = data["verdict"]["outcome"] == "regressed"
    assert status == (1 if regressed else 0)
    assert data["a"]["onnxruntime"] == "1.31.1"
    assert "B / A: " in printed and "optimized graphs" in printed
    html = page.read_text()
    assert "(onnxruntime 1.31.1)" in html and "no baseline: judged on the A/B itself" in html


def test_cli_ab_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(attention(), model)
    assert main(["ab", str(model), "--a", "/nowhere/python", "--b", sys.executable]) == 2
    assert "no such Python interpreter" in capsys.readouterr().err
    args = ["ab", str(model), "--a", sys.executable, "--b", sys.executable]
    assert main([*args, "--budget", "0.05", "--profile-runs", "0"]) == 2  # B is symbolic
    assert "--dim B=SIZE" in capsys.readouterr().err
    assert main([*args, "--threshold", "nope"]) == 2
    assert main([*args, "--feeds", str(tmp_path / "none.npz")]) == 2
    assert "--feeds" in capsys.readouterr().err


AB_RUN = """
import sys
from pytest_ortperf.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pytest", "_pytest"))
print(code, " ".join(loaded + [m for m in sys.modules if m == "pytest_ortperf.recorder"]))
"""


def test_ortperf_ab_runs_without_pytest(tmp_path: Path) -> None:
    """Issue 21: ``ortperf ab`` measures through ``pytest_ortperf.remote.ab``, which loads
    neither pytest nor the fixture's recorder (it did through the recorder before)."""
    model = tmp_path / "m.onnx"
    onnx.save(attention(), model)
    argv = ["ab", str(model), "--a", sys.executable, "--b", sys.executable, "--dim", "B=1",
            "--budget", "0.05", "--profile-runs", "1", "--processes", "1"]  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", AB_RUN, *argv], capture_output=True, text=True, timeout=300
    )
    status, _, loaded = out.stdout.strip().splitlines()[-1].partition(" ")
    assert status in ("0", "1"), out.stderr
    assert loaded == "", f"ortperf ab loaded {loaded}"


def test_cli_ab_with_own_feeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(attention(), model)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 64, 32)).astype(np.float32) for _ in range(3))
    np.savez(tmp_path / "f.npz", Q=q, K=k, V=v)
    out = tmp_path / "ab.json"
    status = main(["ab", str(model), "--a", sys.executable, "--b", sys.executable,
                   "--feeds", str(tmp_path / "f.npz"), "--budget", "0.05",
                   "--profile-runs", "0", "--json", str(out)])  # fmt: skip
    assert status in (0, 1)
    data = json.loads(out.read_text())
    assert data["a"]["onnxruntime"] == data["b"]["onnxruntime"]
    assert data["profile"] == [] and data["comparison"]["output_diffs"][0]["max_abs"] == 0


# ------------------------------------------------------------------------ from pytest

SUITE = """
import sys
import pytest
from pytest_ortperf.measuring.feeds import make_feeds
from pytest_ortperf.models import attention, control

OLD = {old!r}

def test_upgrade(ort_env, ortperf):
    a = ort_env(OLD).session(attention())
    b = ort_env(sys.executable).session(attention())
    feeds = make_feeds(a.get_inputs(), dims={{"B": 1}})
    result = ortperf.compare(a, b, feeds, name="upgrade", max_slowdown=0.5)
    assert result.reference.name == "upgrade:reference"

def test_rank(ort_env, ortperf):
    env = ort_env(sys.executable)
    variants = {{"x": env.session(attention()), "y": env.session(attention())}}
    feeds = make_feeds(variants["x"].get_inputs(), dims={{"B": 1}})
    frame = ortperf.rank(variants, feeds)
    assert sorted(frame["variant"]) == ["x", "y"]

@pytest.mark.ortperf(budget=0.3)
def test_slower_candidate_fails(ort_env, ortperf):
    env = ort_env(sys.executable)
    fast = env.session(control(batch=8, width=64, layers=1))
    slow = env.session(control(batch=8, width=64, layers=4))
    feeds = make_feeds(fast.get_inputs())
    ortperf.compare(fast, slow, feeds, name="slower", check_outputs=False, max_slowdown=0.05)
"""


@needs_registry
def test_pytest_form(pytester: pytest.Pytester, old_python: Path, no_leftovers: None) -> None:
    pytester.makepyfile(test_up=SUITE.format(old=str(old_python)))
    result = pytester.runpytest_inprocess("--ortperf", "--ortperf-budget", "0.2")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*'slower' failed its performance gate*",
            "*FAIL ratio: candidate / reference = *-> regressed*",
        ]
    )
    smoke = pytester.runpytest_inprocess("-k", "upgrade or rank")
    smoke.assert_outcomes(passed=2)
    update = pytester.runpytest_inprocess("--ortperf", "--ortperf-update", "-k", "upgrade",
                                          "--ortperf-budget", "0.2")  # fmt: skip
    update.assert_outcomes(passed=1)
    baseline = json.loads((pytester.path / "__ortperf__" / "test_up.json").read_text())
    assert "onnxruntime 1.31.1" in json.dumps(baseline)  # the arms' labels name versions


def test_remote_multi_thread_session_is_not_preemption_filtered(
    no_leftovers: None, here: RemoteEnvironment
) -> None:
    """Issue 21: ``options={"intra_op_num_threads": 4}`` runs ORT on a pool, so a block's
    thread CPU time says nothing of a preemption; a remote A/B must keep every block, as
    a local one does (one ``watches_cpu`` for both)."""
    from pytest_ortperf.remote.interleave import Arms

    pooled = {"intra_op_num_threads": 4}
    a, b = here.session(attention(), options=pooled), here.session(attention(), options=pooled)
    feeds = make_feeds(a.get_inputs(), dims={"B": 1})
    ref, cand = Arms(a, b, feeds, "iobinding").measure(TINY, None, True)
    assert not ref.watched and not cand.watched
    single = here.session(attention()), here.session(attention())
    ref, cand = Arms(*single, feeds, "iobinding").measure(TINY, None, True)
    assert ref.watched and cand.watched


# ------------------------------------------------------------------------ process pairs


def test_ab_measures_several_process_pairs(no_leftovers: None) -> None:
    result = ab(attention(), sys.executable, sys.executable, dims={"B": 1}, budget_s=0.2,
                profile_runs=0, processes=2)  # fmt: skip
    c = result.comparison
    assert len(result.pairs) == 2 and len(c.runs) == 2 and sum(c.runs) == len(c.block_ratios)
    assert c.low <= c.ratio <= c.high
    assert c.confidence == pytest.approx(0.98)
    assert (c.low - 1, c.high - 1) == pytest.approx((result.verdict.low, result.verdict.high))
    assert "2 process pairs" in result.verdict.message
    text = "\n".join(result.lines())
    assert "from 2 worker-process pairs" in text and "each process pair read B / A = " in text
    assert json.loads(json.dumps(result.to_dict()))["pairs"] == list(result.pairs)
    with pytest.raises(ValueError, match="processes must be from 1 to 16, got 0"):
        ab(attention(), sys.executable, sys.executable, processes=0)


def test_parallel_start_failure_closes_the_started(
    no_leftovers: None, here: RemoteEnvironment
) -> None:
    from pytest_ortperf.remote.interleave import start_sessions

    makers = [lambda: here.session(attention()), lambda: here.session(b"not a model")] * 2
    with pytest.raises(WorkerError, match="could not load model"):
        start_sessions(makers)
    assert all(not s.worker.alive for s in here.sessions)


def test_cli_ab_processes_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(attention(), model)
    args = ["ab", str(model), "--a", sys.executable, "--b", sys.executable]
    assert main([*args, "--processes", "17"]) == 2
    assert "argument --processes: must be from 1 to 16, got '17'" in capsys.readouterr().err
    assert main([*args, "--processes", "x"]) == 2


def test_ctrl_c_on_ortperf_ab_exits_130_cleanly(tmp_path: Path) -> None:
    """Issue 24, item 15: SIGINT mid-measurement ends ``ortperf ab`` with status 130, one
    line on stderr, no traceback, and no worker left."""
    model = tmp_path / "m.onnx"
    onnx.save(attention(), model)
    command = [sys.executable, "-m", "pytest_ortperf.cli", "ab", str(model), "--a",
               sys.executable, "--b", sys.executable, "--dim", "B=1", "--budget", "60",
               "--profile-runs", "0", "--processes", "2"]  # fmt: skip
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=interruptible,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while len(workers) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        workers = descendants(proc.pid)
    assert len(workers) >= 4, "the workers did not start"
    time.sleep(1.0)  # into the measurement
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    deadline = time.monotonic() + 10
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in workers), "workers outlived ortperf ab"


# ------------------------------------------------------------------------ environments under faults


def test_requirement_strings_are_not_pip_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24, item 13: ``--a '--target=X onnxruntime==1.30.0'`` installed into X."""
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "m.onnx"
    onnx.save(attention(), model)
    status = main(["ab", str(model), "--a", "--target=PWNED7 onnxruntime==1.30.0", "--b",
                   sys.executable, "--profile-runs", "0"])  # fmt: skip
    assert status == 2
    assert "'--target=PWNED7' is a pip option, not a requirement" in capsys.readouterr().err
    assert not (tmp_path / "PWNED7").exists()
    for spec in (["onnxruntime==1.30.0", "-r", "reqs.txt"], "--target=/tmp/x onnxruntime"):
        with pytest.raises(ValueError, match="is a pip option, not a requirement"):
            EnvSpec.parse(spec)


def test_old_onnxruntime_gets_a_numpy_it_was_built_for() -> None:
    """Issue 24, item 14: onnxruntime before 1.19 is built against numpy 1.x (1.19.0 is the
    first built for numpy 2): an environment naming no numpy gets numpy<2."""
    from pytest_ortperf.remote.venvs import install_requirements

    assert install_requirements(["onnxruntime==1.17.3"]) == ["onnxruntime==1.17.3", "numpy<2"]
    assert install_requirements(["onnxruntime-gpu==1.18.1"])[-1] == "numpy<2"
    assert install_requirements(["onnxruntime==1.19.0"]) == ["onnxruntime==1.19.0"]
    assert install_requirements(["onnxruntime==1.17.3", "numpy==1.26.4"]) == [
        "onnxruntime==1.17.3", "numpy==1.26.4",
    ]  # fmt: skip
    assert install_requirements(["onnxruntime-extensions==0.10.0"]) == [
        "onnxruntime-extensions==0.10.0"
    ]


BROKEN_ORT = """
import sys
sys.stderr.write("A module that was compiled using NumPy 1.x cannot be run in NumPy 2.4.0 "
                 "as it may crash.\\n")
raise ImportError()
"""


def test_import_error_of_an_old_onnxruntime_is_quoted_with_the_models_path(
    tmp_path: Path, no_leftovers: None
) -> None:
    """Issue 24, item 14: an onnxruntime whose import fails with a bare ImportError (as
    1.17 under numpy 2) read "could not load model <bytes>: ... ImportError: ImportError".
    The error names the model's file and quotes what the import printed."""
    import sysconfig

    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "onnxruntime").mkdir()
    (site / "onnxruntime" / "__init__.py").write_text(BROKEN_ORT)
    (site / "here.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # numpy
    model = tmp_path / "m.onnx"
    onnx.save(attention(), model)
    with pytest.raises(WorkerError) as caught:
        RemoteEnvironment(venv).session(model)
    text = str(caught.value)
    assert "could not load model m.onnx" in text and "<bytes>" not in text
    assert "compiled using NumPy 1.x cannot be run in NumPy 2.4.0" in text


@needs_registry
def test_installed_environment_is_checked_before_it_is_ready(tmp_path: Path) -> None:
    """Issue 24, item 12: ready.json is written only once the new environment imports
    onnxruntime; one that does not is an error that says so, and nothing is left."""
    with pytest.raises(EnvironmentSetupError, match=r"installed, but not usable: importing "
                       r"onnxruntime failed:(.|\n)*No module named"):  # fmt: skip
        ensure(EnvSpec.parse("six"), cache=tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]


def _copy_env(source: Path, cache: Path) -> Path:
    """A copy of a cached environment (the 1.31.1 one) as the entry of its key in
    ``cache``: a venv's interpreter and packages work from another directory."""
    import shutil

    root = cache / EnvSpec.parse(OLD).key()
    shutil.copytree(source.parent.parent, root, symlinks=True)
    return root


@needs_registry
def test_damaged_environment_is_detected_and_made_again(old_python: Path, tmp_path: Path) -> None:
    """Issue 24, item 12: a removed interpreter, a truncated library, a removed package
    each reported as what it is (not as a model that does not load), and the entry made
    again by the next use."""
    from pytest_ortperf.remote.venvs import verify

    spec = EnvSpec.parse(OLD)
    root = _copy_env(old_python, tmp_path / "a")
    python = root / "bin" / "python"
    assert verify(python, spec.requirements) == "1.31.1"
    assert ensure(spec, cache=tmp_path / "a") == python  # verified, reused
    package = next((root / "lib").glob("python*/site-packages/onnxruntime"))
    library = next(package.glob("capi/onnxruntime_pybind11_state*.so"))
    with library.open("r+b") as fh:
        fh.truncate(4096)
    with pytest.raises(EnvironmentSetupError, match=r"importing onnxruntime (failed|crashed)"):
        verify(python, spec.requirements)
    (root / "bin" / "python").unlink()
    with pytest.raises(EnvironmentSetupError, match=r"interpreter .* is missing"):
        verify(python, spec.requirements)

    other = _copy_env(old_python, tmp_path / "b")
    import shutil

    shutil.rmtree(next((other / "lib").glob("python*/site-packages/onnxruntime")))
    with pytest.warns(UserWarning, match=r"is damaged: importing onnxruntime failed"):
        made = ensure(spec, cache=tmp_path / "b")  # made again, from the registry
    assert verify(made, spec.requirements) == "1.31.1"
    assert json.loads((other / "ready.json").read_text())["onnxruntime"] == "1.31.1"
