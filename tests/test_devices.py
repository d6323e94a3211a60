"""Execution providers beyond the CPU (issue 16): device-aware bindings, provider-aware
warm-up, skips that name the package, bfloat16 and float16 end to end, custom-op libraries.

Only the CPU runs here. The device code paths are the same as the CPU's (``device="cpu"``);
the tests marked ``providers=["CUDAExecutionProvider"]`` skip unless onnxruntime-gpu and a
GPU are present (``benchmarks/gpu_check.sh`` runs them there).
"""

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from custom_ops import extensions_library, inverse_model
from onnx import TensorProto

from pytest_ortperf import models
from pytest_ortperf.config import MarkerError, marker_providers, missing_providers
from pytest_ortperf.measuring.calls import OrtBinding, make_call
from pytest_ortperf.measuring.engine import Engine, EngineConfig, WarmupWarning, settled
from pytest_ortperf.measuring.feeds import input_specs, make_feeds
from pytest_ortperf.measuring.providers import device_for, install_hint, warmup_bound
from pytest_ortperf.measuring.session import CustomOpsError, OrtSession, ProviderUnavailable
from pytest_ortperf.recorder import Recorder
from pytest_ortperf.recorder.unsettled import warn_unsettled

ROOT = Path(__file__).resolve().parents[1]
HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()


def feeds_of(session, **kwargs):
    return make_feeds(input_specs(session.sess), **kwargs)


# --------------------------------------------------------------------------- bindings


@pytest.mark.parametrize(
    ("providers", "device"),
    [
        (["CPUExecutionProvider"], "cpu"),
        (["CUDAExecutionProvider", "CPUExecutionProvider"], "cuda"),
        (["TensorrtExecutionProvider", "CUDAExecutionProvider"], "cuda"),
        (["DmlExecutionProvider", "CPUExecutionProvider"], "dml"),
        (["OpenVINOExecutionProvider", "CPUExecutionProvider"], "cpu"),
        ([], "cpu"),
    ],
)
def test_the_device_follows_the_providers(providers, device):
    assert device_for(providers) == device


def test_cpu_binding_binds_once_and_copies_back_only_when_asked():
    session = OrtSession.create(models.attention())
    feeds = feeds_of(session, dims={"B": 2})
    binding = OrtBinding(session, feeds, device="cpu", device_id=0)
    assert binding.device == "cpu" and session.device == "cpu"
    assert not binding.explicit_sync
    binding.run()
    (got,) = binding.outputs()
    (expected,) = session.run(feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert repr(binding) == "OrtBinding('attention', device='cpu')"


def test_default_device_is_the_sessions():
    session = OrtSession.create(models.linear_regression())
    binding = OrtBinding(session, feeds_of(session, dims={"N": 3}))
    assert binding.device == "cpu"


def test_binding_synchronizes_itself_when_run_options_tell_ort_not_to():
    session = OrtSession.create(models.linear_regression())
    feeds = feeds_of(session, dims={"N": 5})
    options = {"disable_synchronize_execution_providers": "1"}
    binding = OrtBinding(session, feeds, device="cpu", run_options=options)
    assert binding.explicit_sync
    binding.run()
    np.testing.assert_allclose(binding.outputs()[0], session.run(feeds)[0], rtol=1e-6)
    run_options = ort.RunOptions()
    run_options.add_run_config_entry("disable_synchronize_execution_providers", "0")
    assert not OrtBinding(session, feeds, run_options=run_options).explicit_sync


def test_unknown_device_is_an_error():
    session = OrtSession.create(models.linear_regression())
    with pytest.raises(
        ValueError, match=r"device must be one of 'cpu', 'cuda', 'dml', 'cann', got 'gpu0'"
    ):
        OrtBinding(session, feeds_of(session, dims={"N": 2}), device="gpu0")


def test_device_the_session_does_not_compute_on_is_an_error():
    session = OrtSession.create(models.linear_regression())
    with pytest.raises(
        ValueError,
        match=r"device='cuda' needs a session with CUDAExecutionProvider or "
        r"TensorrtExecutionProvider; model linear_regression runs on \['CPUExecutionProvider'\]",
    ):
        OrtBinding(session, feeds_of(session, dims={"N": 2}), device="cuda")


@pytest.mark.parametrize("device_id", [-1, 1.5, True])
def test_bad_device_id_is_an_error(device_id):
    session = OrtSession.create(models.linear_regression())
    with pytest.raises(ValueError, match="device_id must be a non-negative integer"):
        OrtBinding(session, feeds_of(session, dims={"N": 2}), device_id=device_id)


def test_binding_fixture_takes_device_and_device_id(pytester):
    pytester.makepyfile(
        """
        from pytest_ortperf import models

        def test_cpu(ort_session, ort_feeds, ort_binding):
            s = ort_session(models.linear_regression())
            b = ort_binding(s, ort_feeds(s, dims={"N": 4}), device="cpu", device_id=0)
            b.run()
            assert b.outputs()[0].shape == (4, 1)

        def test_cuda_on_a_cpu_session(ort_session, ort_feeds, ort_binding):
            s = ort_session(models.linear_regression())
            ort_binding(s, ort_feeds(s, dims={"N": 4}), device="cuda")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ValueError: device='cuda' needs a session with CUDA*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


# --------------------------------------------------------------------------- warm-up


def test_settled_needs_the_last_blocks_within_the_tolerance():
    assert settled([9.0, 1.0, 1.02, 1.04], window=3, tolerance=0.05)
    assert not settled([1.0, 1.02, 1.2], window=3, tolerance=0.05)
    assert not settled([1.0, 1.0], window=3, tolerance=0.05)  # too few
    assert settled([2.0, 1.0, 1.0], window=2, tolerance=0.0)


class FakeClock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


def scripted_call(clock, per_call_ns):
    """A call whose n-th run takes ``per_call_ns[n]`` ns on ``clock`` (the last repeats)."""
    durations = list(per_call_ns)
    count = {"n": 0}

    def call():
        n = count["n"]
        clock.now += durations[min(n, len(durations) - 1)]
        count["n"] += 1

    call.count = count
    return call


def test_warm_up_ends_once_block_times_settle():
    clock = FakeClock()
    engine = Engine(EngineConfig(block_s=0.001, warmup_s=1.0), clock=clock)
    # a cold first call, then calls that speed up 10% every 10 calls (an algorithm search,
    # a growing arena) for 300 calls, then a steady 10 us
    ramp = [int(100_000 * 0.9 ** (i / 10)) + 10_000 for i in range(300)]
    call = scripted_call(clock, [50_000_000, *ramp, 10_000])
    k, warm = engine.warm_up(call)
    assert warm
    assert call.count["n"] > 300  # not settled while the calls still sped up
    assert clock.now < 50_000_000 + 0.1e9  # and stopped long before the 1 s bound
    assert k > 1


def test_warm_up_that_never_settles_is_bounded_and_says_so():
    clock = FakeClock()
    engine = Engine(EngineConfig(block_s=0.001, warmup_s=0.05), clock=clock)
    # calls of 1 ms and 2 ms in turn: no three blocks (of one call) agree within 5%
    jitter = [1_000_000, 2_000_000] * 1_000
    k, warm = engine.warm_up(scripted_call(clock, jitter))
    assert not warm and k == 1
    assert clock.now <= 0.05e9 + 2 * 2_000_000  # the bound, plus the block in progress
    engine = Engine(EngineConfig(block_s=0.001, warmup_s=0.05, budget_s=0.01), clock=clock)
    assert not engine.measure(scripted_call(clock, jitter), watch_cpu=False).settled


def test_no_warm_up_asked_claims_nothing():
    clock = FakeClock()
    engine = Engine(EngineConfig(warmup_s=0.0), clock=clock)
    assert engine.warm_up(scripted_call(clock, [1_000, 2_000, 3_000]))[1]


@pytest.mark.parametrize(
    ("providers", "bound"),
    [
        (["CPUExecutionProvider"], 0.1),
        (["CUDAExecutionProvider", "CPUExecutionProvider"], 2.0),
        (["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"], 60.0),
        (["SomeNewExecutionProvider"], 2.0),
    ],
)
def test_warm_up_bound_per_provider(providers, bound):
    assert warmup_bound(providers) == bound
    engine = Engine(EngineConfig(warmup_s=0.1)).for_providers(providers)
    assert engine.config.warmup_s == bound
    assert engine.config.cap_s(2) == 3 * engine.config.budget_s + 2 * bound


def test_unsettled_warm_up_warns_with_the_measurement_name(recwarn):
    from pytest_ortperf.measuring.engine import Samples

    warn_unsettled("lr", Samples((1e-3,), 1), Samples((1e-3,), 1))
    assert not recwarn.list
    with pytest.warns(WarmupWarning, match=r"'lr': block times had not settled"):
        warn_unsettled("lr", Samples((1e-3,), 1), Samples((1e-3,), 1, settled=False))


class NeverSettles(Engine):
    """The real engine, whose warm-up verdict is always 'not settled'."""

    def warm_up(self, call, *, deadline=None):
        return super().warm_up(call, deadline=deadline)[0], False


def test_recorder_warns_when_a_measurement_did_not_settle():
    session = OrtSession.create(models.linear_regression())
    feeds = feeds_of(session, dims={"N": 4})
    engine = NeverSettles(EngineConfig(budget_s=0.01, warmup_s=0.01))
    recorder = Recorder(
        test="t", measured=True, engine=engine, user_properties=[], latency_mode="absolute"
    )
    with pytest.warns(WarmupWarning, match="'lr'"):
        recorder.latency(session, feeds, name="lr")
    with pytest.warns(WarmupWarning, match="'pair'"):
        recorder.compare(session, session.derive(), feeds, name="pair")


# --------------------------------------------------------------------------- skips


@pytest.mark.parametrize(
    ("provider", "package"),
    [
        ("CUDAExecutionProvider", "onnxruntime-gpu"),
        ("TensorrtExecutionProvider", "onnxruntime-gpu"),
        ("DmlExecutionProvider", "onnxruntime-directml"),
        ("OpenVINOExecutionProvider", "onnxruntime-openvino"),
        ("QNNExecutionProvider", "onnxruntime-qnn"),
        ("CoreMLExecutionProvider", "macOS"),
    ],
)
def test_missing_provider_names_the_package(provider, package):
    assert package in install_hint(provider)
    if provider in ort.get_available_providers():
        assert missing_providers((provider,)) is None
    else:
        reason = missing_providers((provider,))
        assert reason is not None and provider in reason and package in reason


def test_marker_providers_are_checked():
    assert marker_providers({}) == ()
    assert marker_providers({"providers": "CPUExecutionProvider"}) == ("CPUExecutionProvider",)
    with pytest.raises(
        MarkerError, match=r"unknown execution provider\(s\) \['CUDAExecutionProvidr'\]"
    ):
        marker_providers({"providers": ["CUDAExecutionProvidr"]})
    with pytest.raises(MarkerError, match="providers must be a list"):
        marker_providers({"providers": [1]})


@pytest.mark.skipif(HAS_CUDA, reason="this onnxruntime has CUDA: nothing to skip")
def test_marker_skips_naming_provider_and_package(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.ortperf(providers=["CUDAExecutionProvider"])
        def test_needs_cuda():
            raise AssertionError("must not run")

        @pytest.mark.ortperf(providers=["CPUExecutionProvider"])
        def test_needs_cpu():
            pass

        @pytest.mark.ortperf(providers=["CUDAExecutionProvidr"])
        def test_misspelled():
            pass

        def test_session_on_cuda(ort_session):
            from pytest_ortperf import models
            ort_session(models.linear_regression(), providers=["CUDAExecutionProvider"])
            raise AssertionError("must not run")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=2, errors=1)  # a bad marker errors at setup
    result.stdout.fnmatch_lines(
        [
            "*unknown execution provider(s) ?'CUDAExecutionProvidr'?*did you mean "
            "'CUDAExecutionProvider'?",
            "*test_marker_skips_naming_provider_and_package.py:3: needs CUDAExecutionProvider (provided by onnxruntime-gpu), which "
            "onnxruntime * lacks; available: *CPUExecutionProvider*",
            "*'CUDAExecutionProvider' is not available in onnxruntime * (provided by "
            "onnxruntime-gpu)*",
        ]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_unavailable_provider_error_names_the_package():
    if HAS_CUDA:
        pytest.skip("this onnxruntime has CUDA")
    with pytest.raises(ProviderUnavailable, match=r"\(provided by onnxruntime-gpu\)"):
        OrtSession.create(models.linear_regression(), providers=["CUDAExecutionProvider"])


# --------------------------------------------------------------------------- bfloat16


def bf16_expected(x):
    """What models.bfloat16_mlp computes, in numpy."""
    proto = models.bfloat16_mlp()
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    h = np.maximum(x.astype(np.float32) @ inits["W"] + inits["b"], 0)
    return np.concatenate([h.astype(ml_dtypes.bfloat16), x], axis=-1)


def test_bfloat16_feeds_session_and_binding():
    session = OrtSession.create(models.bfloat16_mlp())
    feeds = feeds_of(session, dims={"B": 3})
    x = feeds["X"]
    assert x.dtype == ml_dtypes.bfloat16 and x.shape == (3, 32)
    values = x.astype(np.float32)
    assert values.min() >= -1 and values.max() <= 1 and len(np.unique(values)) > 10
    (plain,) = session.run(feeds)
    assert plain.dtype == ml_dtypes.bfloat16 and plain.shape == (3, 64)
    np.testing.assert_allclose(
        plain.astype(np.float32), bf16_expected(x).astype(np.float32), atol=1e-2, rtol=1e-2
    )
    binding = OrtBinding(session, feeds, device="cpu")
    binding.run()
    assert np.array_equal(binding.outputs()[0], plain)
    other = feeds_of(session, dims={"B": 3}, seed=1)
    binding.copy_in(other)
    binding.run()
    assert np.array_equal(binding.outputs()[0], session.run(other)[0])


def test_pinned_bfloat16_values_must_be_bfloat16():
    session = OrtSession.create(models.bfloat16_mlp())
    x = np.zeros((2, 32), dtype=np.float32)
    with pytest.raises(ValueError, match=r"expects dtype bfloat16 .*astype\(ml_dtypes.bfloat16\)"):
        feeds_of(session, values={"X": x})
    feeds = feeds_of(session, values={"X": x.astype(ml_dtypes.bfloat16)})
    assert session.run(feeds)[0].dtype == ml_dtypes.bfloat16


@pytest.mark.parametrize("api", ["run_with_ort_values", "iobinding_copy", "iobinding"])
def test_bfloat16_through_the_ortvalue_apis(api):
    session = OrtSession.create(models.bfloat16_mlp())
    feeds = feeds_of(session, dims={"B": 2})
    call, outputs = make_call(session, feeds, api)
    call()
    assert np.array_equal(outputs()[0], session.run(feeds)[0])


def test_bfloat16_with_a_numpy_api_is_a_clear_error():
    session = OrtSession.create(models.bfloat16_mlp())
    with pytest.raises(ValueError, match=r"bfloat16 inputs or outputs, which api='run' cannot"):
        make_call(session, feeds_of(session, dims={"B": 2}), "run")


END_TO_END = """
import numpy as np
import pytest
from onnx import TensorProto
from pytest_ortperf import models


def test_bfloat16(ort_session, ort_feeds, ort_binding, ortperf):
    ref = ort_session(models.bfloat16_mlp(), optimization="disable")
    cand = ort_session(models.bfloat16_mlp(extra_add=True))
    feeds = ort_feeds(ref, dims={"B": 8})
    r = ortperf.latency(ref, feeds, name="bf16")
    assert r.api == "run_with_ort_values"
    b = ortperf.latency(ort_binding(cand, feeds), name="bf16-bound")
    assert b.api == "iobinding"
    c = ortperf.compare(ref, cand, feeds, name="bf16-compare", atol=1e-2, rtol=1e-2)
    assert c.output_diffs[0].max_abs < 1e-2
    profile = ortperf.profile(cand, feeds, name="bf16-compare")
    ops = set(profile.by_op()["op_type"])
    assert {"Cast", "Concat"} <= ops
    sweep = ortperf.api_sweep(ref, feeds, name="bf16-api")
    assert set(sweep["api"]) == {"run_with_ort_values", "iobinding_copy", "iobinding"}


def test_float16_attention(ort_session, ort_feeds, ort_binding, ortperf):
    model = models.attention(dtype=TensorProto.FLOAT16)
    ref = ort_session(model, optimization="disable")
    cand = ort_session(model)
    feeds = ort_feeds(ref, dims={"B": 2})
    assert feeds["Q"].dtype == np.float16
    binding = ort_binding(cand, feeds)
    binding.run()
    (y,) = binding.outputs()
    assert y.dtype == np.float16 and y.shape == (2, 64, 32)
    ortperf.latency(binding, name="fp16-bound")
    c = ortperf.compare(ref, cand, feeds, name="fp16-compare", atol=1e-2, rtol=1e-2)
    assert c.low <= c.ratio <= c.high
    profile = ortperf.profile(cand, feeds, name="fp16-compare")
    assert "FusedMatMul" in set(profile.by_op()["op_type"])
"""


@pytest.mark.parametrize(
    "mode", [[], ["--ortperf", "--ortperf-budget=0.02"]], ids=["smoke", "measured"]
)
def test_bfloat16_and_float16_end_to_end(pytester, mode):
    pytester.makepyfile(test_dtypes=END_TO_END)
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", "--ortperf-store=none", *mode)
    result.assert_outcomes(passed=2)


# --------------------------------------------------------------------------- custom ops


def test_custom_ops_from_onnxruntime_extensions():
    library = extensions_library()
    session = OrtSession.create(inverse_model(), custom_ops=[library])
    x = np.array([[2, 0, 0], [0, 4, 0], [1, 0, 8]], dtype=np.float32)
    (y,) = session.run({"X": x})
    np.testing.assert_allclose(y @ x, np.eye(3), atol=1e-6)
    binding = OrtBinding(session, {"X": x})
    binding.run()
    np.testing.assert_allclose(binding.outputs()[0], y)
    assert session.settings.custom_ops == (library,)
    # derived sessions (fresh runs, profiles) register the library again
    np.testing.assert_allclose(session.derive().run({"X": x})[0], y)


def test_model_with_custom_op_but_no_library_fails_to_load():
    with pytest.raises(RuntimeError, match=r"could not load model inverse.*Inverse"):
        OrtSession.create(inverse_model())


def test_missing_custom_ops_library_is_named(tmp_path):
    missing = tmp_path / "libmissing_ops.so"
    with pytest.raises(
        FileNotFoundError, match=r"custom ops library not found: .*libmissing_ops\.so"
    ):
        OrtSession.create(inverse_model(), custom_ops=[missing])


def test_custom_ops_library_that_does_not_load_names_path_and_ort_message(tmp_path):
    broken = tmp_path / "libbroken_ops.so"
    broken.write_bytes(b"not a shared library")
    with pytest.raises(CustomOpsError) as info:
        OrtSession.create(inverse_model(), custom_ops=[broken])
    message = str(info.value)
    assert str(broken) in message
    assert f"onnxruntime {ort.__version__} could not load custom ops library" in message
    assert "Failed to load library" in message  # onnxruntime's own words


def test_custom_ops_in_a_suite(pytester):
    library = extensions_library()
    model = pytester.path / "inverse.onnx"
    onnx.save(inverse_model(), str(model))
    pytester.makepyfile(
        f"""
        import numpy as np

        MODEL = {str(model)!r}

        def test_inverse(ort_session, ort_binding, ortperf):
            s = ort_session(MODEL, custom_ops=[{library!r}])
            x = np.diag(np.array([2.0, 4.0, 8.0], dtype=np.float32))
            r = ortperf.latency(ort_binding(s, {{"X": x}}), name="inverse")
            assert r.median > 0

        def test_broken(ort_session, tmp_path):
            lib = tmp_path / "libbroken.so"
            lib.write_bytes(b"nope")
            ort_session(MODEL, custom_ops=[lib])
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*CustomOpsError: onnxruntime * could not load custom ops library *libbroken.so*"]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


# --------------------------------------------------------------------------- on CUDA


@pytest.mark.ortperf(providers=["CUDAExecutionProvider"])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_cuda_binding_matches_the_cpu(dtype):
    model = models.gemm_concat(fused=True, dtype=dtype)
    cpu = OrtSession.create(model)
    cuda = OrtSession.create(model, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    feeds = feeds_of(cpu, dims={"M": 64, "K": 32, "N": 16})
    binding = OrtBinding(cuda, feeds)
    assert binding.device == "cuda"
    binding.run()
    tolerance = 1e-2 if dtype == TensorProto.FLOAT16 else 1e-4
    np.testing.assert_allclose(
        binding.outputs()[0].astype(np.float32),
        cpu.run(feeds)[0].astype(np.float32),
        atol=tolerance,
        rtol=tolerance,
    )


@pytest.mark.ortperf(providers=["CUDAExecutionProvider"])
def test_cuda_binding_without_ort_synchronizing():
    model = models.gemm_concat(fused=False)
    cuda = OrtSession.create(model, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    feeds = feeds_of(cuda, dims={"M": 256, "K": 256, "N": 256})
    binding = OrtBinding(
        cuda, feeds, device="cuda", run_options={"disable_synchronize_execution_providers": "1"}
    )
    assert binding.explicit_sync
    binding.run()
    np.testing.assert_allclose(binding.outputs()[0], cuda.run(feeds)[0], atol=1e-3, rtol=1e-3)


@pytest.mark.ortperf(providers=["CUDAExecutionProvider"])
def test_cuda_bfloat16_binding():
    model = models.bfloat16_mlp()
    cuda = OrtSession.create(model, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    feeds = feeds_of(cuda, dims={"B": 4})
    binding = OrtBinding(cuda, feeds)
    binding.run()
    got = binding.outputs()[0].astype(np.float32)
    np.testing.assert_allclose(got, bf16_expected(feeds["X"]).astype(np.float32), atol=2e-2)


# --------------------------------------------------------------------------- GPU script


def test_gpu_check_script_parses_and_its_python_runs_on_the_cpu():
    script = ROOT / "benchmarks" / "gpu_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--cpu", "--sizes", "16",
         "--budget", "0.02"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "CPUExecutionProvider" in out and "float16" in out and "float32" in out
    assert "fused/unfused" in out
    assert "placement" in out and "Gemm" in out
