"""Recorded inputs: ONNX test-data folders, .npz, .npy and .pb files round-trip exactly,
mismatches are clear errors naming the file, several sets rotate through the timed calls."""

import os
import sys
import tracemalloc
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

from pytest_ortperf import models
from pytest_ortperf.cli import main
from pytest_ortperf.measuring.feeds import FeedError, input_specs
from pytest_ortperf.measuring.recorded_feeds import (
    FeedPool,
    load_feeds,
    read_npz,
    rotating,
    write_data_set,
)
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.recorder.targets import calls

TYPES = {
    "f": (TensorProto.FLOAT, np.float32),
    "h": (TensorProto.FLOAT16, np.float16),
    "i": (TensorProto.INT64, np.int64),
    "b": (TensorProto.BOOL, np.bool_),
    "u": (TensorProto.UINT8, np.uint8),
}


def identity_model() -> onnx.ModelProto:
    """One Identity per dtype of :data:`TYPES`, inputs ``[N, 3]``."""
    nodes = [oh.make_node("Identity", [k], [f"{k}_out"]) for k in TYPES]
    graph = oh.make_graph(
        nodes,
        "identities",
        [oh.make_tensor_value_info(k, t, ["N", 3]) for k, (t, _) in TYPES.items()],
        [oh.make_tensor_value_info(f"{k}_out", t, ["N", 3]) for k, (t, _) in TYPES.items()],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=9)


@pytest.fixture(scope="module")
def session():
    return OrtSession.create(identity_model(), name="identities")


def random_set(seed, rows=2):
    rng = np.random.default_rng(seed)
    return {
        "f": rng.standard_normal((rows, 3)).astype(np.float32),
        "h": rng.standard_normal((rows, 3)).astype(np.float16),
        "i": rng.integers(-(2**40), 2**40, (rows, 3), dtype=np.int64),
        "b": rng.integers(0, 2, (rows, 3)).astype(np.bool_),
        "u": rng.integers(0, 256, (rows, 3), dtype=np.uint8),
    }


def write_with_numpy_helper(folder, feeds, *, named=True):
    folder.mkdir(parents=True)
    for index, (name, value) in enumerate(feeds.items()):
        tensor = numpy_helper.from_array(value, name if named else "")
        (folder / f"input_{index}.pb").write_bytes(tensor.SerializeToString())


def assert_same(got, want):
    assert list(got) == list(want)
    for name in want:
        assert got[name].dtype == want[name].dtype
        np.testing.assert_array_equal(got[name], want[name])


def test_test_data_sets_round_trip_exactly_and_make_a_pool(tmp_path, session):
    sets = [random_set(seed, rows=seed + 1) for seed in range(3)]
    for i, feeds in enumerate(sets):
        write_with_numpy_helper(tmp_path / f"test_data_set_{i}", feeds)
    pool = load_feeds(input_specs(session.sess), tmp_path, model="identities")
    assert isinstance(pool, FeedPool) and len(pool.sets) == 3
    for got, want in zip(pool.sets, sets, strict=True):
        assert_same(got, want)
    assert_same(dict(pool), sets[0])  # a pool is a dict of its first set
    assert pool.sources[2].endswith("test_data_set_2")
    outputs = session.run(pool.sets[1])
    for out, name in zip(outputs, TYPES, strict=True):
        np.testing.assert_array_equal(out, sets[1][name])


def test_one_data_set_unnamed_tensors_npz_and_npy(tmp_path, session):
    specs = input_specs(session.sess)
    feeds = random_set(7)
    write_with_numpy_helper(tmp_path / "test_data_set_0", feeds, named=False)
    one = load_feeds(specs, tmp_path / "test_data_set_0")
    assert not isinstance(one, FeedPool)  # one set is a plain dict
    assert_same(one, feeds)
    np.savez(tmp_path / "feeds.npz", **feeds)
    assert_same(load_feeds(specs, tmp_path / "feeds.npz"), feeds)
    lr = OrtSession.create(models.linear_regression())
    x = np.arange(20, dtype=np.float32).reshape(2, 10)
    np.save(tmp_path / "x.npy", x)
    assert_same(load_feeds(input_specs(lr.sess), tmp_path / "x.npy"), {"X": x})
    write_data_set(tmp_path / "single", {"X": x})
    assert_same(load_feeds(input_specs(lr.sess), tmp_path / "single" / "input_0.pb"), {"X": x})
    both = load_feeds(input_specs(lr.sess), [tmp_path / "x.npy", tmp_path / "single"])
    assert isinstance(both, FeedPool) and len(both.sets) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda f: f.update(i=f["i"].astype(np.int32)),
            r"input_2\.pb: input 'i' expects dtype int64",
        ),
        (
            lambda f: f.update(b=np.ones((2, 4), np.bool_)),
            r"input_3\.pb: input 'b': axis 1 must be 3",
        ),
        (lambda f: f.update(u=np.ones(3, np.uint8)), r"input_4\.pb: input 'u' expects rank 2"),
    ],
    ids=["dtype", "shape", "rank"],
)
def test_a_wrong_file_is_an_error_naming_it(tmp_path, session, change, message):
    feeds = random_set(1)
    change(feeds)
    write_with_numpy_helper(tmp_path / "test_data_set_0", feeds)
    with pytest.raises(FeedError, match=message) as info:
        load_feeds(input_specs(session.sess), tmp_path)
    assert str(tmp_path / "test_data_set_0") in str(info.value)


def test_names_that_do_not_match_are_errors_naming_the_file(tmp_path, session):
    specs = input_specs(session.sess)
    feeds = random_set(2)
    feeds["F"] = feeds.pop("f")
    write_with_numpy_helper(tmp_path / "a", feeds)
    with pytest.raises(FeedError, match=r"names input\(s\) 'F' \(.*a/input_4\.pb\) that "):
        load_feeds(specs, tmp_path / "a", model="identities")
    del feeds["F"]
    np.savez(tmp_path / "short.npz", **feeds)
    with pytest.raises(FeedError, match=r"short\.npz: lacks input\(s\) \['f'\] of identities"):
        load_feeds(specs, tmp_path / "short.npz", model="identities")


def test_unreadable_and_missing_sources(tmp_path, session):
    specs = input_specs(session.sess)
    bad = tmp_path / "test_data_set_0"
    bad.mkdir()
    (bad / "input_0.pb").write_bytes(b"\xff\xff not protobuf")
    with pytest.raises(FeedError, match=r"input_0\.pb: not a serialized onnx TensorProto"):
        load_feeds(specs, tmp_path)
    with pytest.raises(FeedError, match=r"recorded inputs not found: .*nowhere"):
        load_feeds(specs, tmp_path / "nowhere")
    (tmp_path / "feeds.csv").write_text("1,2")
    with pytest.raises(FeedError, match=r"feeds\.csv: cannot read inputs from a \.csv file"):
        load_feeds(specs, tmp_path / "feeds.csv")
    np.save(tmp_path / "one.npy", np.ones((1, 3), np.float32))
    with pytest.raises(FeedError, match=r"one\.npy: one array, but the model has 5 inputs"):
        load_feeds(specs, tmp_path / "one.npy")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FeedError, match=r"holds no input_N\.pb files"):
        load_feeds(specs, empty)


# ----------------------------------------------------- headers checked before reading (issue 24)

HUGE_ROWS = 500_000_000  # [N, 10] float32: 20 GB


def header_only_npy(path, shape, dtype="<f4", data=b""):
    """An .npy whose header declares ``shape`` and which holds only ``data`` after it."""
    with path.open("wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": dtype, "fortran_order": False, "shape": shape}
        )
        f.write(data)
    return path


def lr_specs():
    return input_specs(OrtSession.create(models.linear_regression()).sess)


def peak_bytes(fn):
    """``fn()``'s error and the most memory it held (tracemalloc sees numpy's arrays)."""
    tracemalloc.start()
    try:
        with pytest.raises(FeedError) as info:
            fn()
        return info.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_tiny_npy_declaring_20_gb_is_refused_before_any_allocation(tmp_path):
    path = header_only_npy(tmp_path / "huge.npy", (HUGE_ROWS, 10))
    assert path.stat().st_size <= 129
    error, peak = peak_bytes(lambda: load_feeds(lr_specs(), path))
    assert str(path) in str(error) and "18.6 GiB" in str(error) and "2 GiB" in str(error)
    assert "nothing was read" in str(error)
    assert peak < 10 * 2**20


def test_an_npy_header_is_checked_against_the_model_before_its_data(tmp_path):
    specs = lr_specs()
    wrong_dim = header_only_npy(tmp_path / "wide.npy", (4, 11))  # no data: never read
    with pytest.raises(FeedError, match=r"wide\.npy: input 'X': axis 1 must be 10"):
        load_feeds(specs, wrong_dim)
    wrong_type = header_only_npy(tmp_path / "ints.npy", (4, 10), "<i8")
    with pytest.raises(FeedError, match=r"ints\.npy: input 'X' expects dtype float32"):
        load_feeds(specs, wrong_type)
    truncated = header_only_npy(tmp_path / "short.npy", (4, 10), data=b"\0" * 12)
    with pytest.raises(FeedError, match=r"short\.npy: damaged or truncated \.npy data"):
        load_feeds(specs, truncated)
    np.save(tmp_path / "objects.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    with pytest.raises(FeedError, match=r"objects\.npy: holds pickled Python objects"):
        load_feeds(specs, tmp_path / "objects.npy")


def deflated_npz(path, name, shape, data_bytes):
    """An .npz of one member whose header declares ``shape`` and whose deflated data is
    ``data_bytes`` zeros (a small file that inflates to whatever the header says)."""
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open(f"{name}.npy", "w", force_zip64=True) as member,
    ):
        header = {"descr": "<f4", "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_1_0(member, header)
        chunk = bytes(2**20)
        for _ in range(data_bytes // len(chunk)):
            member.write(chunk)
    return path


def test_a_deflated_npz_declaring_3_gb_is_refused_before_inflating(tmp_path):
    path = deflated_npz(tmp_path / "bomb.npz", "X", (75_000_000, 10), 8 * 2**20)
    assert path.stat().st_size < 3 * 2**20
    error, peak = peak_bytes(lambda: load_feeds(lr_specs(), path))
    assert f"{path} [X]: declares shape [75000000, 10] of float32, 2.8 GiB" in str(error)
    assert peak < 10 * 2**20
    error, peak = peak_bytes(lambda: read_npz(path))  # ortperf ab --feeds: no model at hand
    assert "2.8 GiB" in str(error) and peak < 10 * 2**20


def test_a_truncated_npz_is_a_feed_error_naming_the_file(tmp_path):
    specs = lr_specs()
    whole = tmp_path / "whole.npz"
    np.savez(whole, X=np.ones((64, 10), np.float32))
    assert load_feeds(specs, whole)["X"].shape == (64, 10)
    for cut in (len(whole.read_bytes()) // 2, 10, 0):
        cut_path = tmp_path / f"cut{cut}.npz"
        cut_path.write_bytes(whole.read_bytes()[:cut])
        with pytest.raises(FeedError, match=rf"cut{cut}\.npz: not a readable \.npz file"):
            load_feeds(specs, cut_path)
    with pytest.raises(FeedError, match=r"cut0\.npz: not a readable \.npz file"):
        read_npz(tmp_path / "cut0.npz")


def test_an_oversized_pb_is_refused_before_it_is_read(tmp_path):
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    with (folder / "input_0.pb").open("wb") as f:
        f.truncate(3 * 2**30)  # sparse: 3 GiB that take no disk
    error, peak = peak_bytes(lambda: load_feeds(lr_specs(), tmp_path))
    assert "input_0.pb: 3.0 GiB, more than a recorded input may hold (2 GiB)" in str(error)
    assert peak < 10 * 2**20


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "inputs.npy"
    os.mkfifo(fifo)
    with pytest.raises(FeedError, match=r"inputs\.npy: not a regular file"):
        load_feeds(lr_specs(), fifo)
    with pytest.raises(FeedError, match=r"inputs\.npy: not a file"):
        read_npz(fifo)


def test_ortperf_ab_feeds_take_an_npz_and_refuse_an_npy_clearly(tmp_path, capsys):
    model = tmp_path / "lr.onnx"
    onnx.save(models.linear_regression(), model)
    np.save(tmp_path / "x.npy", np.ones((4, 10), np.float32))
    args = ["ab", str(model), "--a", sys.executable, "--b", sys.executable]
    assert main([*args, "--feeds", str(tmp_path / "x.npy")]) == 2
    err = capsys.readouterr().err
    assert "--feeds " in err and "x.npy: give an .npz file, one array per input name" in err
    assert "Traceback" not in err and "TypeError" not in err
    deflated_npz(tmp_path / "bomb.npz", "X", (75_000_000, 10), 2**20)
    assert main([*args, "--feeds", str(tmp_path / "bomb.npz")]) == 2
    assert "bomb.npz [X]: declares shape [75000000, 10] of float32" in capsys.readouterr().err
    np.savez(tmp_path / "ok.npz", X=np.ones((4, 10), np.float32))
    assert read_npz(tmp_path / "ok.npz")["X"].shape == (4, 10)


def test_a_pool_rotates_through_the_timed_calls(tmp_path):
    lr = OrtSession.create(models.linear_regression())
    xs = [np.full((1, 10), float(i), np.float32) for i in range(3)]
    for i, x in enumerate(xs):
        write_data_set(tmp_path / f"test_data_set_{i}", {"X": x})
    pool = load_feeds(input_specs(lr.sess), tmp_path)
    call = calls(lr, pool, "run")[0]
    seen = [float(call()[0][0, 0]) for _ in range(4)]
    expected = [float(lr.run({"X": x})[0][0, 0]) for x in (*xs, xs[0])]
    assert seen == expected and len(set(seen)) == 3


def test_rotating_one_call_is_the_call_itself():
    def f():
        return 1

    assert rotating([f]) is f


INNER = """
import numpy as np
from pytest_ortperf import models


def test_recorded(ort_session, ort_feeds, ortperf):
    s = ort_session(models.linear_regression())
    feeds = ort_feeds(s, from_path="inputs")
    assert len(feeds.sets) == 2
    ortperf.latency(s, feeds, name="lr")


def test_wrong(ort_session, ort_feeds):
    s = ort_session(models.linear_regression())
    ort_feeds(s, from_path="wrong.npz")


def test_mixed(ort_session, ort_feeds):
    s = ort_session(models.linear_regression())
    ort_feeds(s, from_path="inputs", seed=3)
"""


def test_the_fixture_loads_recorded_inputs_and_fails_clearly(pytester):
    pytester.makepyfile(test_inputs=INNER)
    for i in range(2):
        write_data_set(
            pytester.path / "inputs" / f"test_data_set_{i}", {"X": np.ones((i + 1, 10), np.float32)}
        )
    np.savez(pytester.path / "wrong.npz", X=np.ones((1, 10), np.float64))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*FeedError: *wrong.npz: input 'X' expects dtype float32 (tensor(float)), got float64",
            "*TypeError: ort_feeds(from_path=...) loads recorded inputs as they are; seed= apply*",
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str()
