import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

from pytest_ortperf.measuring.feeds import FeedError, InputSpec, input_specs, make_feeds
from pytest_ortperf.measuring.session import OrtSession

ALL_TYPES = {
    TensorProto.FLOAT: np.float32,
    TensorProto.FLOAT16: np.float16,
    TensorProto.DOUBLE: np.float64,
    TensorProto.INT8: np.int8,
    TensorProto.INT16: np.int16,
    TensorProto.INT32: np.int32,
    TensorProto.INT64: np.int64,
    TensorProto.UINT8: np.uint8,
    TensorProto.UINT16: np.uint16,
    TensorProto.UINT32: np.uint32,
    TensorProto.UINT64: np.uint64,
    TensorProto.BOOL: np.bool_,
    TensorProto.STRING: np.object_,
}


def identity_model() -> onnx.ModelProto:
    """One Identity per dtype, each input with a symbolic batch dim."""
    inputs, outputs, nodes = [], [], []
    for i, elem in enumerate(ALL_TYPES):
        inputs.append(oh.make_tensor_value_info(f"x{i}", elem, ["batch", 3]))
        outputs.append(oh.make_tensor_value_info(f"y{i}", elem, ["batch", 3]))
        nodes.append(oh.make_node("Identity", [f"x{i}"], [f"y{i}"]))
    graph = oh.make_graph(nodes, "identities", inputs, outputs)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


@pytest.fixture(scope="module")
def session():
    return OrtSession.create(identity_model())


def test_every_dtype_runs_through_ort(session):
    feeds = make_feeds(input_specs(session.sess), dims={"batch": 2})
    for i, dtype in enumerate(ALL_TYPES.values()):
        assert feeds[f"x{i}"].dtype == np.dtype(dtype)
        assert feeds[f"x{i}"].shape == (2, 3)
    outputs = session.run(feeds)
    for i, out in enumerate(outputs):
        np.testing.assert_array_equal(out, feeds[f"x{i}"])


def test_integers_default_to_small_non_negative_and_range_is_settable(session):
    specs = input_specs(session.sess)
    feeds = make_feeds(specs, dims={"batch": 50})
    ints = feeds["x6"]  # int64
    assert ints.min() >= 0 and ints.max() < 10
    feeds = make_feeds(specs, dims={"batch": 50}, low=-5, high=3)
    assert feeds["x6"].min() >= -5 and feeds["x6"].max() < 3
    assert feeds["x6"].min() < 0
    assert feeds["x7"].min() >= 0  # uint8 clipped to its own range
    with pytest.raises(
        FeedError, match=r"input 'x7': empty integer range \[-5, -1\) for dtype uint8"
    ):
        make_feeds(specs, dims={"batch": 50}, low=-5, high=-1)


def test_seed_is_deterministic(session):
    specs = input_specs(session.sess)
    a = make_feeds(specs, dims={"batch": 4}, seed=3)
    b = make_feeds(specs, dims={"batch": 4}, seed=3)
    c = make_feeds(specs, dims={"batch": 4}, seed=4)
    np.testing.assert_array_equal(a["x0"], b["x0"])
    assert not np.array_equal(a["x0"], c["x0"])


def test_unresolved_symbolic_dim_names_input_and_dim(session):
    with pytest.raises(FeedError, match=r"input 'x0': axis 0 is symbolic dim 'batch'.*dims="):
        make_feeds(input_specs(session.sess))


def test_unnamed_dim_asks_for_shapes():
    spec = InputSpec("x", "tensor(float)", (None, 4))
    with pytest.raises(FeedError, match=r"input 'x': axis 0 is a dim with no name.*shapes="):
        make_feeds([spec])
    feeds = make_feeds([spec], shapes={"x": (7, 4)})
    assert feeds["x"].shape == (7, 4)
    with pytest.raises(FeedError, match=r"input 'x': axis 1 must be 4.*got 5"):
        make_feeds([spec], shapes={"x": (7, 5)})


def test_values_pin_inputs_and_are_checked():
    specs = [InputSpec("x", "tensor(float)", (2,)), InputSpec("sr", "tensor(int64)", ())]
    feeds = make_feeds(specs, values={"sr": np.array(16000, dtype=np.int64)})
    assert feeds["sr"].shape == () and int(feeds["sr"]) == 16000
    with pytest.raises(FeedError, match=r"input 'sr' expects dtype int64.*got float64"):
        make_feeds(specs, values={"sr": 16000.0})
    with pytest.raises(FeedError, match=r"input 'x' expects rank 1.*got shape \[2, 2\]"):
        make_feeds(specs, values={"x": np.zeros((2, 2), np.float32), "sr": np.int64(1)})
    with pytest.raises(
        FeedError, match=r"values names unknown input\(s\) \['nope'\].*\['sr', 'x'\]"
    ):
        make_feeds(specs, values={"nope": 1})


def test_unsupported_type_asks_for_values():
    spec = InputSpec("s", "seq(tensor(float))", ())
    with pytest.raises(FeedError, match=r"input 's' has type seq\(tensor\(float\)\).*values="):
        make_feeds([spec])


def test_bad_dims_and_shapes_name_the_input():
    spec = InputSpec("x", "tensor(float)", ("batch", 4))
    with pytest.raises(
        FeedError, match=r"input 'x': axis 0 is symbolic dim 'batch', which dims= sets to -1"
    ):
        make_feeds([spec], dims={"batch": -1})
    with pytest.raises(FeedError, match=r"input 'x': shapes= gives \[2.5, 4\]"):
        make_feeds([spec], shapes={"x": (2.5, 4)})


def test_string_inputs_cannot_be_bound():
    from pytest_ortperf.measuring.calls import OrtBinding, make_call

    graph = oh.make_graph(
        [oh.make_node("Identity", ["s"], ["t"])],
        "strings",
        [oh.make_tensor_value_info("s", TensorProto.STRING, [2])],
        [oh.make_tensor_value_info("t", TensorProto.STRING, [2])],
    )
    session = OrtSession.create(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]))
    feeds = make_feeds(input_specs(session.sess))
    call, outputs = make_call(session, feeds, "run")
    call()
    assert list(outputs()[0]) == list(feeds["s"])
    with pytest.raises(ValueError, match=r"string input\(s\) \['s'\].*api='run'"):
        make_call(session, feeds, "iobinding")
    with pytest.raises(ValueError, match=r"string input\(s\) \['s'\].*IOBinding is not possible"):
        OrtBinding(session, feeds)
    with pytest.raises(ValueError, match=r"feeds lack input\(s\) \['s'\]"):
        make_call(session, {}, "run")


def test_timed_calls_refuse_feeds_the_model_does_not_have():
    from pytest_ortperf import models
    from pytest_ortperf.measuring.calls import OrtBinding, make_call

    session = OrtSession.create(models.linear_regression(features=4))
    feeds = make_feeds(input_specs(session.sess), dims={"N": 2})
    typo = {**feeds, "X_typo": feeds[session.input_names[0]]}
    with pytest.raises(FeedError, match=r"name input\(s\) \['X_typo'\]"):
        make_call(session, typo, "run")
    with pytest.raises(FeedError, match=r"name input\(s\) \['X_typo'\]"):
        OrtBinding(session, typo)
