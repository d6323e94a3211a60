"""Newcomers' mistakes are named where they are made (issue 12, items 5 and 6): a typo in
the marker or in ``ort_feeds``' names fails with the closest known name, and inputs that
onnxruntime rejects say that they were generated and how to pin them."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from onnx import TensorProto

from pytest_ortperf.measuring.calls import InputsRejected, make_call, run_checked
from pytest_ortperf.measuring.feeds import FeedError, GeneratedFeeds, InputSpec, make_feeds
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.text import did_you_mean

pytest_plugins = ["pytester"]

RUN = ("-p", "no:cacheprovider", "-p", "no:randomly")


def lookup_model() -> bytes:
    """``y = table[idx]`` with a table of 3: ort_feeds' random indices (0..9) are out of
    range, so onnxruntime refuses them."""
    table = oh.make_tensor("table", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    graph = oh.make_graph(
        [oh.make_node("Gather", ["table", "idx"], ["g"]), oh.make_node("Add", ["g", "x"], ["y"])],
        "lookup",
        [
            oh.make_tensor_value_info("idx", TensorProto.INT64, [4]),
            oh.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
        ],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        initializer=[table],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    return model.SerializeToString()  # type: ignore[no-any-return]


def test_did_you_mean():
    assert did_you_mean(["budgt"], ["budget", "block"]) == "; did you mean 'budget'?"
    assert did_you_mean(["q"], ["K", "Q", "V"]) == "; did you mean 'Q'?"
    assert did_you_mean(["zzz"], ["budget"]) == ""
    assert (
        did_you_mean(["budgt", "alpah"], ["budget", "alpha"])
        == "; did you mean 'budget' for 'budgt', 'alpha' for 'alpah'?"
    )


def test_marker_typo_fails_its_test_in_smoke_mode_with_or_without_the_fixture(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.ortperf(budgt=1)
        def test_plain():
            pass

        @pytest.mark.ortperf(budgt=1)
        def test_with_fixture(ortperf):
            pass

        @pytest.mark.ortperf(thresold="5%")
        class TestClass:
            def test_method(self):
                pass

        @pytest.mark.ortperf(budget="soon")
        def test_bad_value():
            pass

        @pytest.mark.ortperf(budget=0.5, threshold="5%")
        def test_fine():
            pass

        def test_unmarked():
            pass
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=2, errors=4)
    out = result.stdout.str()
    for name in ("test_plain", "test_with_fixture"):
        assert (
            f"{name}: unknown @pytest.mark.ortperf argument(s) ['budgt']; known: budget, "
            "block, threshold, alpha, structure, strict, latency, fingerprint_ignore, "
            "providers, slo; did you mean 'budget'?"
        ) in out
    assert "argument(s) ['thresold']; known: " in out and "did you mean 'threshold'?" in out
    assert "@pytest.mark.ortperf: budget must be a number of seconds, got 'soon'" in out
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert "pytest_ortperf/" not in out


def test_dims_typo_is_an_error_with_the_symbolic_dims_and_a_suggestion():
    specs = [
        InputSpec("input_ids", "tensor(int64)", ("batch_size", "sequence")),
        InputSpec("mask", "tensor(int64)", ("batch_size", "sequence")),
    ]
    with pytest.raises(FeedError) as info:
        make_feeds(specs, dims={"batch": 4, "sequence": 8})
    assert str(info.value) == (
        "dims names dim(s) ['batch'] that no input of the model has; its symbolic dims are "
        "['batch_size', 'sequence']; did you mean 'batch_size'?"
    )
    with pytest.raises(FeedError, match=r"\['input_id'\]; the model's inputs are .*; did you "):
        make_feeds(specs, dims={"batch_size": 1, "sequence": 2}, values={"input_id": 1})
    with pytest.raises(FeedError, match=r"shapes names unknown.*did you mean 'mask'\?$"):
        make_feeds(specs, dims={"batch_size": 1, "sequence": 2}, shapes={"Mask": (1, 2)})
    static = [InputSpec("x", "tensor(float)", (2,))]
    with pytest.raises(FeedError, match=r"\['batch'\] that no .*; it has no symbolic dims$"):
        make_feeds(static, dims={"batch": 4})


def test_ort_feeds_dims_typo_fails_the_test_with_a_suggestion(pytester):
    pytester.makepyfile(
        """
        import onnx.helper as oh
        from onnx import TensorProto

        def test_typo(ort_session, ort_feeds):
            graph = oh.make_graph(
                [oh.make_node("Relu", ["x"], ["y"])], "relu",
                [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["batch_size", 3])],
                [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["batch_size", 3])],
            )
            model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
            ort_feeds(ort_session(model), dims={"batch": 4})
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert (
        "FeedError: dims names dim(s) ['batch'] that no input of the model has; its symbolic "
        "dims are ['batch_size']; did you mean 'batch_size'?"
    ) in out
    assert "pytest_ortperf/" not in out


def test_generated_feeds_are_a_dict_that_knows_what_is_random():
    specs = [InputSpec("idx", "tensor(int64)", (4,)), InputSpec("x", "tensor(float)", (4,))]
    feeds = make_feeds(specs, seed=3, values={"x": np.zeros(4, np.float32)})
    assert isinstance(feeds, dict) and isinstance(feeds, GeneratedFeeds)
    assert feeds.random == ("idx",) and feeds.seed == 3
    assert feeds.describe_random() == "idx (int64 in [0, 10))"
    feeds["idx"] = np.zeros(4, np.int64)  # replaced by the user: no longer random
    assert feeds.random == ()
    assert make_feeds(specs, low=-2, high=2).describe_random() == (
        "idx (int64 in [-2, 2)), x (float32 in [-2, 2))"
    )


@pytest.mark.parametrize("api", ["run", "run_c", "iobinding"])
def test_rejected_generated_inputs_name_the_random_ones(api):
    session = OrtSession.create(lookup_model(), name="lookup")
    feeds = make_feeds(
        [InputSpec("idx", "tensor(int64)", (4,)), InputSpec("x", "tensor(float)", (4,))]
    )
    with pytest.raises(InputsRejected) as info:
        make_call(session, feeds, api)
    message = str(info.value)
    assert message.startswith("onnxruntime rejected the inputs of model lookup: ")
    assert "indices element out of data bounds" in message
    assert (
        "The inputs were generated by ort_feeds: random values for idx (int64 in [0, 10)), "
        "x (float32 in [-1, 1)) (seed 0); pin an input with "
        "ort_feeds(session, values={'idx': ...}), or draw from another range with low=/high="
    ) in message
    assert "\n" not in message


def test_rejected_hand_made_inputs_keep_onnxruntime_error():
    session = OrtSession.create(lookup_model(), name="lookup")
    feeds = {"idx": np.array([0, 1, 7, 2], np.int64), "x": np.zeros(4, np.float32)}
    with pytest.raises(Exception, match="out of data bounds") as info:
        run_checked(session, feeds)
    assert not isinstance(info.value, InputsRejected)
    pinned = make_feeds(
        [InputSpec("idx", "tensor(int64)", (4,)), InputSpec("x", "tensor(float)", (4,))],
        values={"idx": np.array([0, 1, 2, 0], np.int64)},
    )
    assert run_checked(session, pinned)[0].shape == (4,)


def test_rejected_inputs_fail_the_test_briefly(pytester):
    pytester.path.joinpath("lookup.onnx").write_bytes(lookup_model())
    pytester.makepyfile(
        """
        import numpy as np

        def test_latency(ort_session, ort_feeds, ortperf):
            session = ort_session("lookup.onnx")
            ortperf.latency(session, ort_feeds(session))

        def test_compare(ort_session, ort_feeds, ortperf):
            a, b = ort_session("lookup.onnx"), ort_session("lookup.onnx", optimization="basic")
            ortperf.compare(a, b, ort_feeds(a))

        def test_pinned(ort_session, ort_feeds, ortperf):
            session = ort_session("lookup.onnx")
            feeds = ort_feeds(session, values={"idx": np.array([0, 1, 2, 0])})
            ortperf.latency(session, feeds)
        """
    )
    result = pytester.runpytest(*RUN, "-rN")  # no short summary: each failure once
    result.assert_outcomes(failed=2, passed=1)
    out = result.stdout.str()
    assert out.count("InputsRejected: onnxruntime rejected the inputs of model lookup.onnx: ") == 2
    assert "random values for idx (int64 in [0, 10)), x (float32 in [-1, 1)) (seed 0)" in out
    assert "ort_feeds(session, values={'idx': ...})" in out
    assert "pytest_ortperf/" not in out and "onnxruntime/capi" not in out
    for name in ("test_latency", "test_compare"):
        section = out.split(f"_ {name} _", 1)[1]
        section = section.split("\n____", 1)[0].split("short test summary", 1)[0]
        assert len(section.splitlines()) < 40, section
