"""``ortperf`` for a newcomer: the store found from a subdirectory, ``profile`` on models
with unnamed dims and inputs that need a value, and ``compare`` ids that stay readable."""

from __future__ import annotations

from pathlib import Path

import pytest
from ortperf_store_factories import comparison, latency, save

from pytest_ortperf.cli import main
from pytest_ortperf.cli.ids import shorten_ids
from pytest_ortperf.cli.inputs import cli_spelling
from pytest_ortperf.store.location import DEFAULT_STORE, STORE_ENV

T0 = 1_700_000_000.0


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_store_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)


# --------------------------------------------------------------------------- store lookup


@pytest.mark.usefixtures("no_store_env")
def test_store_found_from_a_subdirectory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    db = tmp_path / DEFAULT_STORE
    save(db, [latency("tests/test_m.py::test_a")])
    deep = tmp_path / "tests" / "models"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    code, out, err = run(capsys, "runs")
    assert code == 0, err
    assert "Test CPU 3000" in out
    assert err == f"ortperf: using store {db}\n"
    code, out, err = run(capsys, "history")
    assert code == 0 and "test_a" in out and str(db) in err


@pytest.mark.usefixtures("no_store_env")
def test_the_search_stops_at_the_project_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    save(tmp_path / DEFAULT_STORE, [latency("t::a")])  # above the project: not used
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    monkeypatch.chdir(project / "tests")
    code, out, err = run(capsys, "runs")
    assert code == 2 and out == ""
    assert err.startswith("ortperf: error: no store found: looked for .ortperf/results.sqlite")
    assert f"in {project / 'tests'} and its parents up to {project};" in err
    assert len(err.strip().splitlines()) == 1
    assert not (project / ".ortperf").exists()  # nothing created


@pytest.mark.usefixtures("no_store_env")
def test_nearest_store_wins_and_explicit_choices_are_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    outer = tmp_path / DEFAULT_STORE
    save(outer, [latency("t::outer")])
    sub = tmp_path / "sub"
    inner = sub / DEFAULT_STORE
    save(inner, [latency("t::inner")])
    monkeypatch.chdir(sub)
    code, out, err = run(capsys, "history")
    assert code == 0 and "t::inner" in out and str(inner) in err
    # --store: as before, relative to the current directory, nothing said on stderr
    code, out, err = run(capsys, "history", "--store", "../.ortperf/results.sqlite")
    assert code == 0 and "t::outer" in out and err == ""
    code, _, err = run(capsys, "runs", "--store", "nothing.sqlite")
    assert code == 2 and str(sub / "nothing.sqlite") in err
    # $ORTPERF_STORE: as before, and named (passwords masked)
    monkeypatch.setenv(STORE_ENV, str(outer))
    code, out, err = run(capsys, "history")
    assert code == 0 and "t::outer" in out
    assert err == f"ortperf: using store {outer} (from ${STORE_ENV})\n"
    monkeypatch.setenv(STORE_ENV, "nosuchdb://u:hunter22@h/db")
    code, _, err = run(capsys, "runs")
    assert code == 2 and "hunter22" not in err and "nosuchdb://u:***@h/db" in err
    monkeypatch.setenv(STORE_ENV, "none")
    code, _, err = run(capsys, "runs")
    assert code == 2 and "storing is disabled" in err


# --------------------------------------------------------------------------- profile


def topk_model(path: Path) -> None:
    """X [None, 4] float (a dim with no name), K [1] int64 (must be 1..4): TopK(X, K)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("TopK", ["X", "K"], ["V", "I"], axis=1)],
        "topk",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4]),
            helper.make_tensor_value_info("K", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("V", TensorProto.FLOAT, [None, None]),
            helper.make_tensor_value_info("I", TensorProto.INT64, [None, None]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def gather_model(path: Path) -> None:
    """X [B, 4] float, J a rank-0 int64 (an index into axis 1): Gather(X, J, axis=1)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Gather", ["X", "J"], ["Y"], axis=1)],
        "gather",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, ["B", 4]),
            helper.make_tensor_value_info("J", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["B"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.fixture
def topk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    topk_model(tmp_path / "topk.onnx")
    return "topk.onnx"


def test_profile_unnamed_dim_and_pinned_value(
    topk: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "profile", topk, "--shape", "X=3x4", "--value", "K=2", "--runs", "2"
    )
    assert code == 0, err
    assert "TopK" in out and "per run: wall" in out
    code, out, err = run(capsys, "profile", topk, "--shape", "X=2x4", "--value", "K=4")
    assert code == 0, err  # K as large as the axis


def test_profile_says_which_option_is_missing(
    topk: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "profile", topk, "--value", "K=2")
    assert code == 2
    assert "a dim with no name" in err and "pass --shape 'X'=D1xD2..." not in err
    assert "pass --shape X=D1xD2..." in err and "(usage: --shape INPUT=D1xD2...)" in err
    assert "shapes=" not in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "profile", topk, "--shape", "X=3x4", "--value", "Q=1")
    assert code == 2
    assert "--value names unknown input(s) ['Q']" in err and "values" not in err
    code, _, err = run(capsys, "profile", topk, "--shape", "X=3x4", "--dim", "B=1")
    assert code == 2 and "--dim names dim(s) ['B']" in err and "(usage: --dim NAME=SIZE)" in err
    code, _, err = run(capsys, "profile", topk, "--shape", "X=3x5", "--value", "K=2")
    assert code == 2 and "axis 1 must be 4" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--shape", "X"], "argument --shape: expected INPUT=D1xD2... such as"),
        (["--shape", "=3x4"], "argument --shape: expected INPUT=D1xD2..."),
        (["--shape", "X=3xa"], "argument --shape: input 'X': 'a' is not a size"),
        (["--shape", "X=3x-1"], "argument --shape: input 'X': '-1' is not a size"),
        (["--value", "K"], "argument --value: expected INPUT=VALUE or INPUT=V1,V2,..."),
        (["--value", "K="], "argument --value: expected INPUT=VALUE"),
        (["--value", "K=two"], "argument --value: input 'K': 'two' is not a number"),
        (["--value", "K=1,,2"], "argument --value: input 'K': '' is not a number"),
        (["--dim", "B=²"], "argument --dim: expected NAME=SIZE"),
    ],
)
def test_profile_malformed_options_are_usage_errors(
    topk: str, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, out, err = run(capsys, "profile", topk, *argv)
    assert code == 2 and out == ""
    assert expected in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("K=2.5", "--value K=2.5: 2.5 is not a whole number"),
        ("K=1e30", "is not a whole number from -9223372036854775808"),
        ("K=2,3", "input 'K': axis 0 must be 1"),  # two numbers for shape [1]
    ],
)
def test_profile_values_the_dtype_cannot_hold(
    topk: str, capsys: pytest.CaptureFixture[str], value: str, expected: str
) -> None:
    code, _, err = run(capsys, "profile", topk, "--shape", "X=3x4", "--value", value)
    assert code == 2
    assert expected in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_profile_rank_0_int64_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    gather_model(tmp_path / "gather.onnx")
    code, out, err = run(capsys, "profile", "gather.onnx", "--dim", "B=2", "--value", "J=3")
    assert code == 0, err
    assert "Gather" in out
    # --shape with --value: a list reshaped, its size checked
    code, _, err = run(
        capsys, "profile", "gather.onnx", "--dim", "B=2", "--value", "J=1,2", "--shape", "J=3"
    )
    assert code == 2 and "2 numbers, but --shape J=3 holds 3" in err


def test_cli_spelling_of_feed_errors() -> None:
    said = cli_spelling("input 'q': axis 0 is symbolic dim 'B' (shape ['B']); pass dims={'B': N}")
    assert said.endswith("pass --dim B=SIZE (usage: --dim NAME=SIZE)")
    said = cli_spelling('input "it\'s" has type seq, ...; pass it with values={"it\'s": ...}')
    assert "pass it with --value it's=..." in said and "(usage: --value INPUT=V1,V2,...)" in said
    assert cli_spelling(
        "shape [3] of int8 is big; use smaller dims or shapes, or pass the input with values="
    ) == (
        "shape [3] of int8 is big; use smaller --dim or --shape sizes, or pass the input with "
        "--value (usage: --dim NAME=SIZE, --shape INPUT=D1xD2..., --value INPUT=V1,V2,...)"
    )
    assert cli_spelling("nothing to say") == "nothing to say"


# --------------------------------------------------------------------------- compare ids


LONG = "tests/integration/models/test_transformer_variants.py::test_attention_block"


@pytest.fixture
def long_ids(tmp_path: Path) -> Path:
    path = tmp_path / "r.sqlite"
    records = [
        comparison(f"{LONG}[fp16-batch{b}-seq{s}]", "fused_vs_ref")
        for b in (1, 8)
        for s in (128, 512)
    ] + [latency(f"{LONG}[fp32-batch1-seq128]", "latency")]
    save(path, records)
    save(path, records, started=T0 + 60)
    return path


def compare_lines(capsys: pytest.CaptureFixture[str], db: Path) -> list[str]:
    code, out, err = run(capsys, "compare", "1", "2", "--store", str(db))
    assert code in (0, 1), err
    return out.splitlines()


@pytest.mark.usefixtures("no_store_env")
def test_compare_ids_at_100_columns(long_ids: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = compare_lines(capsys, long_ids)
    assert max(len(line) for line in lines) <= 100
    rows = lines[2:7]
    ids = [row.split("  ")[0] for row in rows]
    assert len(set(ids)) == 5  # each still tells its measurement apart
    for b, s in ((1, 128), (1, 512), (8, 128), (8, 512)):
        assert any(f"batch{b}-seq{s}]::fused_vs_ref" in i for i in ids), ids
    assert all(len(i) > 12 for i in ids)
    assert all(i.startswith("...") for i in ids)


@pytest.mark.usefixtures("no_store_env")
def test_compare_ids_at_200_columns(
    long_ids: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    lines = compare_lines(capsys, long_ids)
    assert max(len(line) for line in lines) <= 200
    assert any(line.startswith(f"{LONG}[fp16-batch8-seq512]::fused_vs_ref  ") for line in lines)
    assert any(f"{LONG}[fp32-batch1-seq128]::latency" in line for line in lines)


def test_shorten_ids() -> None:
    ids = ["a/b/test_x.py::test_one::lat", "a/b/test_x.py::test_two::lat"]
    assert shorten_ids(ids, 100) == ids
    assert shorten_ids(ids, 20) == ["...test_one::lat", "...test_two::lat"]  # shared head out
    assert shorten_ids(ids, 11) == ["...one::lat", "...two::lat"]
    # Alike once cut from the left: the head stays too
    alike = ["tests/test_alpha.py::test_model::latency", "tests/test_beta.py::test_model::latency"]
    short = shorten_ids(alike, 24)
    assert len(set(short)) == 2 and all(len(i) <= 24 for i in short), short
    assert short == ["...test_alpha....latency", "...test_beta.p...latency"]
    # Control characters are escaped before measuring
    assert shorten_ids(["t::a\x1b[31m"], 100) == ["t::a\\x1b[31m"]
