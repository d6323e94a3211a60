"""Cold start in fresh processes: real launches find a deeper graph slower, crashes and
timeouts are clear errors that leave no process behind; verdicts through real pytest runs
with scripted launch times (no timing luck)."""

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh
from procs import children

from pytest_ortperf import models
from pytest_ortperf.measuring.coldstart import (
    ColdStartError,
    Launch,
    _status,
    interleaved,
    launch,
    other_shape_feeds,
    prepare,
    temp_directory,
)
from pytest_ortperf.measuring.engine import Engine, EngineConfig
from pytest_ortperf.measuring.feeds import FeedError, input_specs
from pytest_ortperf.measuring.session import OrtSession, SessionSettings
from pytest_ortperf.recorder import Recorder
from pytest_ortperf.results import ColdStartResult, Comparison, record_from_dict
from pytest_ortperf.testing import ScriptedLauncher


def recorder(properties=None):
    return Recorder(
        test="test_x.py::test_cold",
        measured=True,
        engine=Engine(EngineConfig()),
        user_properties=[] if properties is None else properties,
    )


def gather_out_of_range() -> onnx.ModelProto:
    """Loads fine; its run raises (index 7 into a 2-row table)."""
    graph = oh.make_graph(
        [oh.make_node("Gather", ["data", "idx"], ["out"])],
        "bad_gather",
        [oh.make_tensor_value_info("idx", TensorProto.INT64, [1])],
        [oh.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2])],
        [oh.make_tensor("data", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_a_deeper_graph_is_found_slower_to_create_and_no_process_is_left():
    before = children(zombies=True)
    properties = []
    rec = recorder(properties)
    feeds = {"X": np.ones((2, 16), np.float32)}
    shallow, deep = models.deep_chain(3), models.deep_chain(300)
    result = rec.compare_cold_start(shallow, deep, feeds, name="depth", launches=5)
    assert children(zombies=True) == before
    create = result["create"]
    assert isinstance(create, Comparison) and create.name == "depth:create"
    assert create.api == "cold_start" and len(create.block_ratios) == 5
    # 300 layers vs 3: creation takes several times longer (measured ~5x-20x here).
    assert create.ratio > 2.0 and create.low > 1.5, create.block_ratios
    assert set(result) == {"create", "first_run", "new_shape"}  # N is dynamic
    stored = [v for k, v in properties if k == "ortperf"]
    assert [s["name"] for s in stored] == ["depth:create", "depth:first_run", "depth:new_shape"]
    assert all(s["gated"] for s in stored)
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("ortperf-coldstart-*"))


def test_one_model_cold_start_record_round_trips():
    properties = []
    rec = recorder(properties)
    session = OrtSession.create(models.linear_regression(), name="lr")
    result = rec.cold_start(session, {"X": np.ones((4, 10), np.float32)}, launches=3)
    assert isinstance(result, ColdStartResult) and result.launches == 3
    assert result.name == "lr cold start" and result.shapes == ("X[4,10]", "X[8,10]")
    assert set(result.figures) == {"create", "first_run", "new_shape"}
    assert all(v > 0 for values in result.figures.values() for v in values)
    assert result.median("create") == result.summaries["create"].median
    (payload,) = [v for k, v in properties if k == "ortperf"]
    assert record_from_dict(json.loads(json.dumps(payload))) == result


def test_a_model_without_dynamic_dims_says_new_shape_is_not_applicable():
    rec = recorder()
    result = rec.cold_start(models.control(), {"X": np.zeros((64, 256), np.float32)}, launches=1)
    assert "new_shape" not in result.figures and not result.new_shape
    assert result.new_shape_note == "not applicable: the model's inputs have no dynamic dim"
    assert result.to_dict()["new_shape"] == []


def test_other_shape_doubles_dynamic_dims_only():
    session = OrtSession.create(models.attention())
    specs = input_specs(session.sess)
    feeds = {n: np.zeros((1, 64, 32), np.float32) for n in "QKV"}
    other, note = other_shape_feeds(specs, feeds)
    assert note == "" and other is not None
    assert {n: a.shape for n, a in other.items()} == {n: (2, 64, 32) for n in "QKV"}


def test_session_keywords_reach_the_child_and_conflict_with_a_session():
    rec = recorder()
    feeds = {"X": np.ones((1, 10), np.float32)}
    result = rec.cold_start(models.linear_regression(), feeds, optimization="disable", launches=1)
    assert result.session is not None and result.session.optimization == "disable"
    session = OrtSession.create(models.linear_regression())
    with pytest.raises(TypeError, match=r"session keywords \['threads'\] cannot apply"):
        rec.cold_start(session, feeds, threads=2)


def test_feeds_that_do_not_fit_fail_before_any_launch():
    rec = recorder()
    with pytest.raises(FeedError, match="input 'X' expects dtype float32"):
        rec.cold_start(models.linear_regression(), {"X": np.ones((1, 10))}, launches=1)


def test_a_model_whose_run_raises_is_a_clear_error_with_the_stderr_tail():
    before = children(zombies=True)
    rec = recorder()
    with pytest.raises(ColdStartError) as info:
        rec.cold_start(gather_out_of_range(), {"idx": np.array([7], np.int64)}, launches=2)
    message = str(info.value)
    assert message.startswith("cold start of bad_gather: the process exited with status 1")
    assert (
        "its stderr ends:" in message and "out of data bounds" in message and "\x1b" not in message
    )
    assert children(zombies=True) == before


def test_a_model_onnxruntime_cannot_load_in_the_child_is_a_clear_error(tmp_path):
    prepared = prepare(
        tmp_path, "broken", b"not an onnx model", SessionSettings(),
        {"X": np.ones(1, np.float32)}, None, "broken.onnx",
    )  # fmt: skip
    with pytest.raises(ColdStartError, match=r"cold start of broken\.onnx: the process exited"):
        launch(prepared.spec, prepared.label, timeout=60)


def test_a_launch_past_its_timeout_is_killed_and_reaped(tmp_path):
    before = children(zombies=True)
    session = OrtSession.create(models.linear_regression())
    prepared = prepare(
        tmp_path, "slow", session.model_bytes, session.settings,
        {"X": np.ones((1, 10), np.float32)}, None, "lr",
    )  # fmt: skip
    with pytest.raises(ColdStartError, match=r"cold start of lr: no result within 0.01 s"):
        launch(prepared.spec, prepared.label, timeout=0.01)
    assert children(zombies=True) == before


def test_signals_are_named():
    assert _status(-9) == "was killed by signal SIGKILL"
    assert _status(3) == "exited with status 3"


def test_launches_interleave_and_stop_at_the_budget():
    order = []

    def fake(path, label, timeout):
        order.append(label)
        return Launch(1.0, 1.0, None, 0.0)

    ticks = iter(range(100))
    runs = interleaved(
        [(Path("a"), "A"), (Path("b"), "B")], launches=10, budget=4.5,
        launcher=fake, clock=lambda: float(next(ticks)),
    )  # fmt: skip
    # warm-up A B, then rounds A B until the budget (one tick per round check) ran out
    assert order[:6] == ["A", "B", "A", "B", "A", "B"]
    assert [len(r) for r in runs] == [7, 7]  # clock read from round 4 on: 1, 2, 3, 4, 5
    with pytest.raises(ValueError, match="timeout must be a positive"):
        interleaved([(Path("a"), "A")], timeout=0)


def test_temp_directory_is_removed():
    with temp_directory() as tmp:
        path = Path(tmp)
        assert path.is_dir()
    assert not path.exists()


INNER = """
import json, pathlib
import numpy as np
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedLauncher

SCRIPT = json.loads(pathlib.Path(__file__).with_name("script.json").read_text())


def test_cold(ort_session, ortperf):
    ortperf.cold_launcher = ScriptedLauncher(
        create={"reference": SCRIPT["ref"], "candidate": SCRIPT["cand"], "model": SCRIPT["ref"]},
    )
    feeds = {"X": np.ones((2, 16), np.float32)}
    ortperf.compare_cold_start(models.deep_chain(3), models.deep_chain(4), feeds, name="cs",
                               launches=12, shape_feeds=False)
    ortperf.cold_start(models.deep_chain(3), feeds, name="one", launches=12)
"""

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none", "-s")


def script(pytester, ratio):
    rng = np.random.default_rng(0)
    ref = (0.05 * np.exp(rng.normal(0, 0.02, 12))).tolist()
    cand = [r * ratio * float(np.exp(rng.normal(0, 0.02))) for r in ref]
    (pytester.path / "script.json").write_text(json.dumps({"ref": ref, "cand": cand}))


def test_cold_start_is_reported_baselined_and_gated(pytester):
    pytester.makepyfile(test_perf=INNER)
    script(pytester, 1.0)
    first = pytester.runpytest(
        *RUN, "--ortperf", "--ortperf-json=out.json", "--ortperf-report=out.html",
        "--ortperf-markdown=out.md", "--ortperf-pr-comment=pr.md",
    )  # fmt: skip
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(
        [
            "*cold start (fresh processes)*create*first run*new shape*",
            "*test_cold::one*50.*ms*50.*ms*n/a*12*",
        ]
    )
    first.stdout.fnmatch_lines(["*test_cold::cs:create*ratio*new*"])
    first.stdout.fnmatch_lines(["*test_cold::one*cold_start.create*not_comparable*50.* ms*"])
    data = json.loads((pytester.path / "out.json").read_text())
    kinds = {r["name"]: r["kind"] for r in data["results"]}
    assert kinds == {"cs:create": "compare", "cs:first_run": "compare", "one": "cold_start"}
    one = next(r for r in data["results"] if r["kind"] == "cold_start")
    assert len(one["create"]) == 12 and one["new_shape"] == []
    assert [v["metric"] for v in one["verdicts"]] == ["cold_start.create", "cold_start.first_run"]
    # judged as absolute latencies are: against earlier runs in the store (none here)
    assert one["verdicts"][0]["message"].startswith("cold_start.create 50.")
    assert "not gated: 0 of 5 earlier runs" in one["verdicts"][0]["message"]
    html = (pytester.path / "out.html").read_text()
    assert "cs:create" in html and "cold_start.create" in html
    markdown = (pytester.path / "out.md").read_text()
    assert "| cs\\:create | ratio |" in markdown and "| one | cold\\_start.create | 50." in markdown
    assert "3 measurements, no regression" in (pytester.path / "pr.md").read_text()
    taken = pytester.runpytest(*RUN, "--ortperf", "--ortperf-update")
    taken.assert_outcomes(passed=1)
    entries = json.loads((pytester.path / "__ortperf__" / "test_perf.json").read_text())
    assert set(entries["entries"]) == {"test_cold::cs:create", "test_cold::cs:first_run"}
    assert entries["entries"]["test_cold::cs:create"]["api"] == "cold_start"
    same = pytester.runpytest(*RUN, "--ortperf")
    same.assert_outcomes(passed=1)
    same.stdout.fnmatch_lines(["*test_cold::cs:create*ratio*ok*"])
    script(pytester, 1.5)
    slower = pytester.runpytest(*RUN, "--ortperf")
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(
        [
            "*ortperf: 'cs:create' failed its performance gate*",
            "*FAIL ratio: ratio 1.49*+50.0%*regressed*",
        ]
    )


def test_plain_pytest_launches_each_model_once(pytester):
    pytester.makepyfile(test_perf=INNER)
    script(pytester, 1.0)
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=1)
    assert "cold start" not in result.stdout.str()


def test_scripted_launcher_names_a_missing_role():
    launcher = ScriptedLauncher(create={"model": [1.0]})
    with pytest.raises(ValueError, match="no times scripted for 'reference'"):
        launcher(Path("reference-spec.json"), "x", 1.0)


ONE = """
import json, pathlib
import numpy as np
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedLauncher

SCRIPT = json.loads(pathlib.Path(__file__).with_name("script.json").read_text())


def test_cold(ortperf):
    ortperf.cold_launcher = ScriptedLauncher(create={"model": SCRIPT["ref"]})
    feeds = {"X": np.ones((2, 16), np.float32)}
    ortperf.cold_start(models.deep_chain(3), feeds, name="one", launches=12)
"""


def test_one_model_cold_start_is_gated_against_the_stores_history(pytester):
    """As an absolute latency: the median of each figure against the medians that earlier
    runs on this machine stored (5 at least)."""
    pytester.makepyfile(test_perf=ONE)
    run = ("-p", "no:cacheprovider", "--ortperf", "--ortperf-store=results.sqlite")
    script(pytester, 1.0)
    for _ in range(5):  # too few earlier runs: reported, not gated
        result = pytester.runpytest(*run)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*test_cold::one*cold_start.create*not_comparable*"])
    result = pytester.runpytest(*run)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_cold::one*cold_start.create*ok*"])
    ref = json.loads((pytester.path / "script.json").read_text())["ref"]
    (pytester.path / "script.json").write_text(json.dumps({"ref": [r * 1.5 for r in ref]}))
    result = pytester.runpytest(*run)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FAIL cold_start.create*regressed*"])
