"""Latencies judged beside the baseline's own model (issue 23), end to end: real sessions,
real artifact stores, real pytest runs (``--ortperf --ortperf-update``, then ``--ortperf``).

Nothing here asserts a small change's timing: the slowed model is four times the layers of
the baseline's (about 3-4x slower), and the other tests assert which way a verdict was
reached (its words), or an outcome that does not depend on speed (``unchanged`` never
fails; a baseline edited to claim the model was 4x faster shows it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import onnx
import pytest
from custom_ops import extensions_library, inverse_model
from procs import children

from pytest_ortperf.gating.baseline import load_baseline, write_baseline
from pytest_ortperf.store.artifacts import ArtifactStore

INNER = """
import json, pathlib
import pytest
from pytest_ortperf import models

CONF = json.loads(pathlib.Path(__file__).with_name("conf.json").read_text())


def test_mlp(ort_session, ort_feeds, ortperf):
    s = ort_session(
        models.control(batch=16, width=128, layers=CONF.get("layers", 2)),
        threads=CONF.get("threads", 1), optimization=CONF.get("optimization", "all"),
    )
    ortperf.latency(s, ort_feeds(s), name="mlp")
"""

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none", "--ortperf-budget=0.1")
BESIDE = "against the baseline's model (sha "
UNCHANGED = "unchanged: model, settings and onnxruntime identical to the baseline"
FALLBACK = "not judged beside the baseline's model"


def configure(path: Path, **conf: Any) -> None:
    (path / "conf.json").write_text(json.dumps(conf))


def verdicts(path: Path) -> list[dict[str, Any]]:
    data = json.loads((path / "out.json").read_text())
    return [v for r in data["results"] for v in r.get("verdicts") or ()]


def check(pytester: pytest.Pytester, *args: str, **conf: Any) -> pytest.RunResult:
    configure(pytester.path, **conf)
    return pytester.runpytest(*RUN, "--ortperf", f"--ortperf-json={pytester.path / 'out.json'}",
                              *args)  # fmt: skip


def entry_of(path: Path) -> dict[str, Any]:
    """The entry as the gate reads it (raw numbers from the samples file included)."""
    return dict(load_baseline(path / "__ortperf__" / "test_mlp.json").entries["test_mlp::mlp"])


TAKEN = ("__ortperf__", ".ortperf")
"""What ``--ortperf-update`` writes: the baseline files and the artifact store."""


@pytest.fixture(scope="module")
def taken_once() -> dict[str, Path]:
    """Where the module's first ``suite`` kept what its update wrote."""
    return {}


@pytest.fixture
def suite(
    pytester: pytest.Pytester,
    taken_once: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> pytest.Pytester:
    """A baseline of the 2-layer model taken, its artifact in ``.ortperf/artifacts``.

    The update runs once per module (its 30 runs take seconds); every test gets its own copy
    of what it wrote, to change as it likes."""
    pytester.makepyfile(test_mlp=INNER)
    configure(pytester.path, layers=2)
    kept = taken_once.get("dir")
    if kept is None:
        pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
        kept = tmp_path_factory.mktemp("taken")
        for name in TAKEN:
            shutil.copytree(pytester.path / name, kept / name)
        taken_once["dir"] = kept
    else:
        for name in TAKEN:
            shutil.copytree(kept / name, pytester.path / name)
    return pytester


def artifact_file(path: Path) -> Path:
    sha = entry_of(path)["recipe"]["model"]["sha256"]
    return ArtifactStore(path / ".ortperf" / "artifacts").path_for(sha)


def test_update_keeps_the_recipe_the_aa_baseline_and_the_model_once(suite):
    entry = entry_of(suite.path)
    recipe = entry["recipe"]
    assert recipe["session"]["threads"] == 1 and recipe["onnxruntime"].startswith("onnxruntime")
    aa = entry["beside"]
    assert len(entry["beside_ratios"]) == aa["n"] > 0 and sum(aa["runs"]) == aa["n"]
    # The reviewable file keeps the A/A summary; its ratios live in the samples file.
    assert "beside_ratios" not in (suite.path / "__ortperf__" / "test_mlp.json").read_text()
    assert 0.5 < aa["ratio"] < 2  # two sessions of one model
    store = ArtifactStore(suite.path / ".ortperf" / "artifacts")
    assert store.get(recipe["model"]["sha256"], size=recipe["model"]["bytes"])
    # Kept once: a second update of the same model adds nothing.
    suite.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    assert store.du().artifacts == 1


def test_changed_bytes_a_slowed_model_is_caught_beside(suite):
    result = check(suite, layers=8)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*FAIL latency: latency +*{BESIDE}*), run beside it now -> regressed; changed: model: "
         "sha256 *"]
    )  # fmt: skip


def test_a_beside_baseline_taken_in_two_processes_still_catches_a_slowed_model(pytester):
    pytester.makepyfile(test_mlp=INNER)
    configure(pytester.path, layers=2)
    update = pytester.runpytest(*RUN, "--ortperf-update", "--ortperf-update-processes=2")
    update.assert_outcomes(passed=1)
    aa = entry_of(pytester.path)["beside"]  # the A/A baseline pools both processes' runs
    assert len(aa["processes"]) == 2 and sum(aa["processes"]) == len(aa["runs"])
    result = check(pytester, layers=8)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*FAIL latency: latency +*{BESIDE}*), run beside it now -> regressed*"]
    )


def test_changed_settings_are_judged_beside(suite):
    check(suite, layers=2, optimization="disable")
    (verdict,) = verdicts(suite.path)
    assert BESIDE in verdict["message"] and "run beside it now" in verdict["message"]
    assert 'changed: session.optimization: "all" -> "disable"' in verdict["message"]


def test_unchanged_is_not_gated_on_machine_drift(suite):
    # The baseline claims the model ran a quarter of today's time against its control: a
    # drift no normalized check would pass. Nothing hashed changed, so it is not gated.
    path = suite.path / "__ortperf__" / "test_mlp.json"
    entries = {k: dict(v) for k, v in load_baseline(path).entries.items()}
    entry = entries["test_mlp::mlp"]
    entry["block_ratios"] = [r / 4 for r in entry["block_ratios"]]
    write_baseline(path, entries)
    result = check(suite, layers=2)
    result.assert_outcomes(passed=1)
    (verdict,) = verdicts(suite.path)
    assert verdict["outcome"] == "ok"
    assert verdict["message"].startswith(UNCHANGED + " (latency ")
    assert "; not gated on machine drift; measured in " in verdict["message"]
    assert verdict["message"].endswith(" over 1 session pair")  # its own and the control
    assert verdict["seconds"] > 0 and verdict["pairs"] == 1
    # The same drift, judged as before recipes were kept: a regression.
    del entry["recipe"]
    write_baseline(path, entries)
    check(suite, layers=2).assert_outcomes(failed=1)
    assert verdicts(suite.path)[0]["outcome"] == "regressed"


def test_unchanged_is_measured_with_a_quarter_of_the_budget(suite, monkeypatch):
    # Its figure only goes to history, so an unchanged latency spends less of the check.
    from pytest_ortperf.gating.gate import FIGURE_ONLY_BUDGET
    from pytest_ortperf.measuring.engine import Engine

    budgets: list[float] = []

    def spy(method: Any) -> Any:
        def timed(self: Engine, *args: Any, **kwargs: Any) -> Any:
            budgets.append(self.config.budget_s)
            return method(self, *args, **kwargs)

        return timed

    monkeypatch.setattr(Engine, "measure", spy(Engine.measure))
    monkeypatch.setattr(Engine, "interleave", spy(Engine.interleave))
    check(suite, layers=2).assert_outcomes(passed=1)
    assert budgets and budgets == [pytest.approx(0.1 * FIGURE_ONLY_BUDGET)] * len(budgets)
    assert verdicts(suite.path)[0]["message"].startswith(UNCHANGED)
    budgets.clear()  # a changed model is judged beside its baseline's, at the usual budget
    check(suite, layers=8).assert_outcomes(failed=1)
    assert budgets and min(budgets) > 0.1 * FIGURE_ONLY_BUDGET  # its pairs share 0.1 s


def test_skip_unchanged_measures_nothing(suite):
    before = (suite.path / "__ortperf__" / "test_mlp.json").read_bytes()
    result = check(suite, "--ortperf-skip-unchanged", layers=2)
    result.assert_outcomes(passed=1)
    data = json.loads((suite.path / "out.json").read_text())
    (record,) = data["results"]
    assert record["measured"] is False and len(record["samples"]) == 1
    (verdict,) = record["verdicts"]
    assert verdict["outcome"] == "ok"
    assert verdict["message"] == f"{UNCHANGED} (not measured: --ortperf-skip-unchanged)"
    assert (suite.path / "__ortperf__" / "test_mlp.json").read_bytes() == before
    # A changed model is still measured, beside its baseline's.
    check(suite, "--ortperf-skip-unchanged", layers=8).assert_outcomes(failed=1)
    assert BESIDE in verdicts(suite.path)[0]["message"]


def test_missing_artifact_falls_back_naming_it_and_how_to_keep_it(suite):
    missing = artifact_file(suite.path)
    missing.unlink()
    result = check(suite, layers=8)
    result.assert_outcomes(failed=1)  # 3-4x slower: the normalized latency sees it too
    (verdict,) = verdicts(suite.path)
    message = verdict["message"]
    assert message.startswith("latency ") and BESIDE not in message
    assert f"{FALLBACK}: the baseline's model is missing" in message
    assert str(missing) in message
    assert ".ortperf/artifacts in the CI cache, or $ORTPERF_ARTIFACTS" in message


@pytest.mark.parametrize("damage", ["truncated", "altered"])
def test_a_damaged_artifact_is_named_refused_and_nothing_else_is_lost(suite, damage):
    baseline = (suite.path / "__ortperf__" / "test_mlp.json").read_bytes()
    damaged = artifact_file(suite.path)
    data = damaged.read_bytes()
    damaged.write_bytes(data[:1000] if damage == "truncated" else bytes(len(data)))
    result = check(suite, "-W", "default", layers=8)
    result.assert_outcomes(failed=1)
    (verdict,) = verdicts(suite.path)
    assert f"{FALLBACK}: the baseline's model is unusable: artifact " in verdict["message"]
    assert str(damaged) in verdict["message"]
    expected = "truncated" if damage == "truncated" else "damaged (truncated or altered)"
    assert expected in verdict["message"]
    result.stdout.fnmatch_lines(["*ArtifactWarning: mlp: the baseline's model is unusable*"])
    assert damaged.exists()  # left for a person to look at
    assert (suite.path / "__ortperf__" / "test_mlp.json").read_bytes() == baseline


def test_artifacts_in_the_results_store(pytester):
    pytester.makepyfile(test_mlp=INNER)
    configure(pytester.path, layers=2)
    store = ("--ortperf-store", str(pytester.path / "results.sqlite"), "--ortperf-artifacts=store")
    runs = ("-p", "no:cacheprovider", "--ortperf-budget=0.1", *store)
    pytester.runpytest(*runs, "--ortperf-update").assert_outcomes(passed=1)
    assert not (pytester.path / ".ortperf" / "artifacts").exists()
    configure(pytester.path, layers=8)
    result = pytester.runpytest(*runs, "--ortperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*FAIL latency: latency +*{BESIDE}*"])


def test_two_processes_share_one_artifact_store(pytester, tmp_path):
    shared = tmp_path / "shared-artifacts"
    projects = []
    for name in ("a", "b"):
        project = pytester.mkdir(name)
        (project / "test_mlp.py").write_text(INNER)
        configure(project, layers=2)
        projects.append(project)
    env = {**os.environ, "ORTPERF_ARTIFACTS": str(shared)}
    command = [sys.executable, "-m", "pytest", *RUN, "--ortperf-update", "-q"]
    running = [
        subprocess.Popen(command, cwd=p, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for p in projects
    ]
    outputs = [p.communicate(timeout=300)[0].decode() for p in running]
    assert [p.returncode for p in running] == [0, 0], outputs
    store = ArtifactStore(shared)
    assert store.du().artifacts == 1  # the same model, kept once by both
    recipe = entry_of(projects[1])["recipe"]
    assert store.get(recipe["model"]["sha256"], size=recipe["model"]["bytes"])
    assert not list(shared.rglob("*.tmp"))
    configure(projects[1], layers=8)
    checked = subprocess.run(
        [sys.executable, "-m", "pytest", *RUN, "--ortperf", "-q"],
        cwd=projects[1], env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert checked.returncode == 1, checked.stdout
    assert BESIDE in checked.stdout and "run beside it now -> regressed" in checked.stdout


def test_a_scripted_engine_keeps_todays_modes(pytester):
    """An engine that injects its figures says nothing of the model: no recipe is kept."""
    pytester.makepyfile(
        test_mlp="""
        from pytest_ortperf import models
        from pytest_ortperf.testing import ScriptedEngine

        def test_mlp(ort_session, ort_feeds, ortperf):
            ortperf.engine = ScriptedEngine(measure=[[1e-4 * (1 + 0.001 * i) for i in range(25)]])
            s = ort_session(models.linear_regression())
            ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="mlp")
        """
    )
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    entry = entry_of(pytester.path)
    assert "recipe" not in entry and "beside" not in entry
    assert not (pytester.path / ".ortperf" / "artifacts").exists()


def test_a_bad_skip_unchanged_ini_value_is_a_usage_error(pytester):
    pytester.makepyfile(test_mlp=INNER)
    pytester.makeini("[pytest]\nortperf_skip_unchanged = perhaps\n")
    result = pytester.runpytest(*RUN, "--ortperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini ortperf_skip_unchanged*perhaps*"])


COMPARE = """
import json, pathlib
from pytest_ortperf import models

CONF = json.loads(pathlib.Path(__file__).with_name("conf.json").read_text())


def test_pair(ort_session, ort_feeds, ortperf):
    reference = ort_session(models.control(batch=16, width=128, layers=2))
    candidate = ort_session(models.control(batch=16, width=128, layers=CONF["layers"]))
    ortperf.compare(reference, candidate, ort_feeds(reference), name="pair", check_outputs=False)
"""


def test_a_compare_whose_candidate_changed_is_also_judged_beside_the_old_candidate(pytester):
    pytester.makepyfile(test_pair=COMPARE)
    configure(pytester.path, layers=2)
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    entry = json.loads((pytester.path / "__ortperf__" / "test_pair.json").read_text())
    kept = entry["entries"]["test_pair::pair"]
    assert kept["recipe"]["model"]["sha256"] and kept["beside"]["runs"]
    # Unchanged candidate: the compare's own verdicts only.
    check(pytester, layers=2)
    assert [v["metric"] for v in verdicts(pytester.path)] == ["structure", "ratio"]
    # A candidate four times the layers: "did my change make it slower?" -- yes.
    result = check(pytester, layers=8)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*FAIL latency: candidate latency +*against the baseline's candidate (sha *), run beside "
         "it now -> regressed; changed: model: sha256 *"]
    )  # fmt: skip
    # The compare fails on its ratio already: the candidate's verdict is a first
    # measurement, not extended or confirmed, and says so.
    candidate = next(v for v in verdicts(pytester.path) if v["metric"] == "latency")
    assert (
        "; a first measurement only (a quarter of the budget), not measured further: the "
        "compare already fails on its "
        in candidate["message"]
        and "over 3 session pairs" in candidate["message"]
    )
    # Its artifact gone: the compare is judged as before, and says so.
    for path in (pytester.path / ".ortperf" / "artifacts").rglob("*"):
        if path.is_file():
            path.unlink()
    check(pytester, layers=8).assert_outcomes(failed=1)
    ratio = next(v for v in verdicts(pytester.path) if v["metric"] == "ratio")
    note = "; candidate not judged beside the baseline's candidate: the baseline's model is missing"
    assert note in ratio["message"]


COMPARE_AND_LATENCY = (
    COMPARE
    + """
    ortperf.latency(candidate, ort_feeds(candidate), name="fused")
"""
)


def test_a_latency_after_a_failing_compare_takes_a_first_measurement_only(pytester):
    # The test fails on the compare already; the latency beside the baseline's model
    # cannot change that, so it is measured once (3 session pairs, no confirmation or
    # extension) and says so.
    pytester.makepyfile(test_pair=COMPARE_AND_LATENCY)
    configure(pytester.path, layers=2)
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    check(pytester, layers=8).assert_outcomes(failed=1)
    data = json.loads((pytester.path / "out.json").read_text())
    latency = next(r for r in data["results"] if r["name"] == "fused")
    (verdict,) = latency["verdicts"]
    assert BESIDE in verdict["message"]
    assert "over 3 session pairs" in verdict["message"]
    assert (
        "; a first measurement only (a quarter of the budget), not measured further: the "
        "test already fails on 'pair' " in verdict["message"]
    )


OLD = "onnxruntime==1.31.1"
"""A real older onnxruntime (as tests/test_upgrade_gate.py uses: one environment cache)."""


@pytest.mark.skipif(
    os.environ.get("ORTPERF_TEST_NETWORK", "1") == "0", reason="ORTPERF_TEST_NETWORK=0"
)
def test_a_baseline_of_another_onnxruntime_runs_beside_in_a_worker_of_it(suite):
    import dataclasses

    from pytest_ortperf.measuring.recipe import Recipe

    # The baseline as one taken on the older onnxruntime would read (its recipe says so).
    path = suite.path / "__ortperf__" / "test_mlp.json"
    entries = {k: dict(v) for k, v in load_baseline(path).entries.items()}
    entry = entries["test_mlp::mlp"]
    recipe = Recipe.from_dict(entry["recipe"])
    today = recipe.onnxruntime
    entry["recipe"] = dataclasses.replace(recipe, onnxruntime=OLD).to_dict()
    write_baseline(path, entries)
    result = check(suite, layers=8)
    result.assert_outcomes(failed=1)
    (verdict,) = verdicts(suite.path)
    assert verdict["message"].startswith("latency +") and BESIDE in verdict["message"]
    assert "run beside it now -> regressed" in verdict["message"]
    assert "changed: model: sha256 " in verdict["message"]
    assert f'onnxruntime: "{OLD}" -> "{today}"' in verdict["message"]
    assert not children()  # every worker closed


def test_a_provider_this_machine_lacks_is_named_and_falls_back(suite):
    import dataclasses

    from pytest_ortperf.measuring.recipe import Recipe

    # The baseline as one taken on a CUDA machine would read.
    path = suite.path / "__ortperf__" / "test_mlp.json"
    entries = {k: dict(v) for k, v in load_baseline(path).entries.items()}
    entry = entries["test_mlp::mlp"]
    recipe = Recipe.from_dict(entry["recipe"])
    cuda = dataclasses.replace(recipe.session, providers=("CUDAExecutionProvider",))
    entry["recipe"] = dataclasses.replace(recipe, session=cuda).to_dict()
    write_baseline(path, entries)
    check(suite, layers=2)
    (verdict,) = verdicts(suite.path)
    assert (
        f"{FALLBACK}: the baseline's execution provider is not available here ("
        in (verdict["message"])
    )
    assert "CUDAExecutionProvider" in verdict["message"]
    assert (
        "changed: session.providers: [CUDAExecutionProvider] -> [CPUExecutionProvider]"
        in (verdict["message"])
    )


CUSTOM = """
import json, pathlib
import numpy as np

CONF = json.loads(pathlib.Path(__file__).with_name("conf.json").read_text())


def test_inverse(ort_session, ortperf):
    s = ort_session(CONF["model"], custom_ops=[CONF["library"]])
    x = np.diag(np.array([2.0, 4.0, 8.0], dtype=np.float32))
    ortperf.latency(s, {"X": x}, name="inverse")
"""


def _build(library: Path, folder: Path, build: str) -> Path:
    """A build of the real onnxruntime-extensions library: its bytes with a tag appended
    (another sha256; the dynamic loader ignores what follows the ELF's segments)."""
    folder.mkdir(parents=True)
    out = folder / library.name
    out.write_bytes(library.read_bytes() + f"\0build {build}".encode())
    return out


def test_a_changed_custom_op_library_is_rebuilt_from_the_store_or_named(pytester, monkeypatch):
    """The baseline's build of a custom-op library is gone from disk (rebuilt since): the
    baseline's arm registers its old bytes, kept in the artifact store at the update, from
    the run's scratch space, which the run removes. With those gone too, the check falls
    back and names the library and how to keep it."""
    library = Path(extensions_library())
    scratch = pytester.path / "scratch"
    monkeypatch.setenv("ORTPERF_SCRATCH", str(scratch))
    old = _build(library, pytester.path / "old", "1")
    new = _build(library, pytester.path / "new", "2")
    model = pytester.path / "inverse.onnx"
    onnx.save(inverse_model(), str(model))
    pytester.makepyfile(test_inverse=CUSTOM)
    configure(pytester.path, model=str(model), library=str(old))
    pytester.runpytest_subprocess(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    entry = load_baseline(pytester.path / "__ortperf__" / "test_inverse.json").entries
    old_sha = entry["test_inverse::inverse"]["recipe"]["custom_ops"][0]["sha256"]
    old.unlink()  # only the artifact store has the baseline's build now

    def checked() -> str:
        configure(pytester.path, model=str(model), library=str(new))
        out = pytester.path / "out.json"
        pytester.runpytest_subprocess(*RUN, "--ortperf", f"--ortperf-json={out}")
        (verdict,) = verdicts(pytester.path)
        assert not list(scratch.glob("run-*"))  # the run's scratch space went with it
        return str(verdict["message"])

    message = checked()
    assert BESIDE in message and "run beside it now" in message, message
    assert f"changed: custom_ops: {library.name} (sha256 {old_sha[:12]}) -> " in message

    ArtifactStore(pytester.path / ".ortperf" / "artifacts").path_for(old_sha).unlink()
    message = checked()
    assert BESIDE not in message
    assert (
        f"{FALLBACK}: the baseline's custom-op library {library.name} (sha256 "
        f"{old_sha[:12]}) changed since and its old build is not in the artifact store"
    ) in message, message
    assert ".ortperf/artifacts in the CI cache, or $ORTPERF_ARTIFACTS" in message


BOUND = """
import json, pathlib
from pytest_ortperf import models

CONF = json.loads(pathlib.Path(__file__).with_name("conf.json").read_text())


def test_mlp(ort_session, ort_feeds, ort_binding, ortperf):
    s = ort_session(models.control(batch=16, width=128, layers=CONF.get("layers", 2)))
    binding = ort_binding(s, ort_feeds(s), run_options=CONF.get("run_options"))
    ortperf.latency(binding, name="mlp")
"""


def test_a_binding_is_judged_beside_the_baseline_s_model(pytester):
    """``ort_binding(session, feeds)`` as made by default is the session and feeds timed
    through ``iobinding``: its recipe is kept, and a slowed model is caught beside."""
    pytester.makepyfile(test_mlp=BOUND)
    configure(pytester.path, layers=2)
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    assert entry_of(pytester.path)["recipe"]["model"]["sha256"]
    result = check(pytester, layers=8)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*FAIL latency: latency +*{BESIDE}*), run beside it now *"])
    (record,) = json.loads((pytester.path / "out.json").read_text())["results"]
    assert record["api"] == "iobinding"


def test_a_binding_with_run_options_keeps_today_s_modes(pytester):
    """Run options change how the binding runs, and the rebuilt arm would not carry them."""
    pytester.makepyfile(test_mlp=BOUND)
    configure(
        pytester.path, layers=2, run_options={"memory.enable_memory_arena_shrinkage": "cpu:0"}
    )
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    assert "recipe" not in entry_of(pytester.path)
