import numpy as np
import onnx
import onnxruntime as ort
import onnxruntime.datasets
import pytest

from pytest_ortperf import models
from pytest_ortperf.measuring.calls import APIS, OrtBinding, make_call
from pytest_ortperf.measuring.feeds import input_specs, make_feeds
from pytest_ortperf.measuring.session import OrtSession, ProviderUnavailable, SessionSettings


def test_model_from_path_bytes_and_proto(tmp_path):
    proto = models.linear_regression()
    path = tmp_path / "lr.onnx"
    onnx.save(proto, str(path))
    for model, label in (
        (str(path), "lr.onnx"),
        (path, "lr.onnx"),
        (proto.SerializeToString(), "<bytes>"),
        (proto, "linear_regression"),
    ):
        s = OrtSession.create(model)
        assert s.label == label
        assert s.input_names == ["X"]


def test_missing_model_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.onnx"):
        OrtSession.create(tmp_path / "nope.onnx")


def test_invalid_model_bytes_name_the_model():
    with pytest.raises(RuntimeError, match="could not load model <bytes>"):
        OrtSession.create(b"not a model")


def test_settings_reach_the_session():
    s = OrtSession.create(
        models.linear_regression(),
        optimization="basic",
        threads=2,
        options={"session.x_custom": "1", "enable_mem_pattern": False},
    )
    so = s.sess.get_session_options()
    assert so.intra_op_num_threads == 2
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert so.get_session_config_entry("session.x_custom") == "1"
    assert so.enable_mem_pattern is False
    assert s.info().threads == 2 and s.info().optimization == "basic"


def test_settings_give_back_the_keywords_that_make_them():
    # What rebuilds a session in a worker (RemoteSession.derive, a baseline beside today's).
    settings = SessionSettings.of(
        providers=["CPUExecutionProvider"], optimization="basic", threads=2, spinning=True,
        options={"session.x_custom": "1", "enable_mem_pattern": False},
        custom_ops=["/opt/libcustom.so"],
    )  # fmt: skip
    assert SessionSettings.of(**settings.keywords()) == settings
    assert SessionSettings.of(**SessionSettings().keywords()) == SessionSettings()


def test_bad_optimization_level():
    with pytest.raises(ValueError, match="optimization='max' is not one of disable, basic"):
        SessionSettings(optimization="max")


def test_unavailable_provider_names_it_and_the_available_ones():
    with pytest.raises(
        ProviderUnavailable, match=r"'MIGraphXExecutionProvider'.*CPUExecutionProvider"
    ):
        OrtSession.create(models.linear_regression(), providers=["MIGraphXExecutionProvider"])


def test_misspelled_provider_is_an_error_not_a_skip():
    with pytest.raises(ValueError, match=r"unknown execution provider 'CPUExecutionProvidr'"):
        OrtSession.create(models.linear_regression(), providers=["CPUExecutionProvidr"])


def test_misspelled_option_is_an_error():
    with pytest.raises(ValueError, match=r"options key 'intra_op_num_thread' is neither"):
        OrtSession.create(models.linear_regression(), options={"intra_op_num_thread": 2})


def test_missing_custom_ops_library_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"custom ops library not found: .*libnope\.so"):
        OrtSession.create(models.linear_regression(), custom_ops=[tmp_path / "libnope.so"])


def test_optimized_graph_histogram_shows_fusion(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fused = OrtSession.create(models.attention())
    plain = OrtSession.create(models.attention(), optimization="disable")
    assert fused.op_histogram()["FusedMatMul"] == 1
    assert "Transpose" not in fused.op_histogram()
    assert plain.op_histogram() == {"MatMul": 4, "Softmax": 1, "Transpose": 1}
    assert list(tmp_path.iterdir()) == []  # the optimized model went to a temp dir


def test_derive_keeps_model_and_merges_options():
    s = OrtSession.create(models.linear_regression(), options={"enable_mem_pattern": False})
    d = s.derive(optimization="disable", options={"session.y": "2"})
    assert d.model_bytes is s.model_bytes
    assert dict(d.settings.options) == {"enable_mem_pattern": False, "session.y": "2"}
    assert d.settings.optimization == "disable" and s.settings.optimization == "all"


@pytest.mark.parametrize("api", APIS)
def test_every_run_api_gives_the_same_outputs(api):
    s = OrtSession.create(models.kmeans())
    feeds = make_feeds(input_specs(s.sess), dims={"N": 5})
    expected = s.run(feeds)
    call, outputs = make_call(s, feeds, api)
    call()
    got = outputs()
    assert len(got) == 2
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(e, g)


def test_unknown_api():
    s = OrtSession.create(models.linear_regression())
    with pytest.raises(ValueError, match="api='fast' is not one of run, run_c"):
        make_call(s, make_feeds(input_specs(s.sess), dims={"N": 1}), "fast")


def test_binding_preallocates_outputs_and_runs_in_place():
    s = OrtSession.create(models.linear_regression())
    feeds = make_feeds(input_specs(s.sess), dims={"N": 8})
    b = OrtBinding(s, feeds)
    assert b.bound_by_name == ()
    before = b.binding.get_outputs()[0].data_ptr()
    b.run()
    assert b.binding.get_outputs()[0].data_ptr() == before  # no new allocation
    np.testing.assert_allclose(b.outputs()[0], s.run(feeds)[0], rtol=1e-6)
    new = {"X": feeds["X"] * 2}
    b.copy_in(new)
    b.run()
    np.testing.assert_allclose(b.outputs()[0], s.run(new)[0], rtol=1e-6)


def test_binding_falls_back_to_by_name_for_zipmap():
    path = onnxruntime.datasets.get_example("logreg_iris.onnx")
    s = OrtSession.create(path)
    feeds = make_feeds(input_specs(s.sess))
    b = OrtBinding(s, feeds)
    assert b.bound_by_name == ("probabilities",)
    assert "bound_by_name=['probabilities']" in repr(b)
    b.run()
    label, probs = b.outputs()
    expected_label, expected_probs = s.run(feeds)
    np.testing.assert_array_equal(label, expected_label)
    assert probs == expected_probs


def test_binding_rejects_missing_feeds_and_bad_device():
    s = OrtSession.create(models.linear_regression())
    with pytest.raises(ValueError, match=r"feeds lack input\(s\) \['X'\]"):
        OrtBinding(s, {})
    with pytest.raises(ValueError, match="needs a session with CUDAExecutionProvider"):
        OrtBinding(s, make_feeds(input_specs(s.sess), dims={"N": 1}), device="cuda")


def test_a_binding_is_plain_only_as_iobinding_would_make_it():
    """Plain: what api="iobinding" binds of the session and feeds, so a check beside the
    baseline's model may rebuild it; run options change how it runs."""
    s = OrtSession.create(models.linear_regression())
    feeds = make_feeds(input_specs(s.sess), dims={"N": 1})
    assert OrtBinding(s, feeds).plain and OrtBinding(s, feeds, device="cpu").plain
    options = {"memory.enable_memory_arena_shrinkage": "cpu:0"}
    assert not OrtBinding(s, feeds, run_options=options).plain


def test_a_binding_call_keeps_its_inputs_alive() -> None:
    # The timed call of an IOBinding may outlive the OrtBinding and the feeds it was made
    # from (the control workload keeps only its call): the bound OrtValues share the numpy
    # arrays' memory, so freed arrays left the call reading whatever was put there next
    # (seen as a control workload 10x slower once another session was created).
    import gc

    import numpy as np

    from pytest_ortperf import models
    from pytest_ortperf.measuring.calls import OrtBinding
    from pytest_ortperf.measuring.feeds import input_specs, make_feeds
    from pytest_ortperf.measuring.session import OrtSession

    def build() -> tuple[object, object, np.ndarray]:
        session = OrtSession.create(models.control(), threads=1)
        feeds = make_feeds(input_specs(session.sess), seed=3)
        # a non-contiguous input too: the contiguous copy bound must stay alive as well
        feeds = {k: np.asfortranarray(v) for k, v in feeds.items()}
        expected = session.run({k: np.array(v) for k, v in feeds.items()})[0]
        binding = OrtBinding(session, feeds)
        return binding.call, binding._outputs[session.output_names[0]], expected

    call, out, expected = build()
    gc.collect()
    junk = [np.full(64 * 256, 1e30, dtype=np.float32) for _ in range(64)]
    others = [OrtSession.create(models.attention(dim=64), threads=1) for _ in range(2)]
    call()  # type: ignore[operator]
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)  # type: ignore[attr-defined]
    assert junk and others


def test_a_run_with_ort_values_call_keeps_its_inputs_alive() -> None:
    import gc

    from pytest_ortperf.measuring.calls import make_call

    def build() -> tuple[object, np.ndarray]:
        session = OrtSession.create(models.control(), threads=1)
        feeds = make_feeds(input_specs(session.sess), seed=4)
        feeds = {k: np.asfortranarray(v) for k, v in feeds.items()}
        expected = session.run({k: np.array(v) for k, v in feeds.items()})[0]
        return make_call(session, feeds, "run_with_ort_values")[0], expected

    call, expected = build()
    gc.collect()
    junk = [np.full(64 * 256, 1e30, dtype=np.float32) for _ in range(64)]
    (out,) = call()  # type: ignore[operator]
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)
    assert junk
