"""The recipe of a measurement: what determines its speed, as hashes (measuring/recipe.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from pytest_ortperf import models
from pytest_ortperf.measuring.feeds import input_specs, make_feeds
from pytest_ortperf.measuring.recipe import (
    RANDOM,
    FeedsRecipe,
    Recipe,
    RecipeError,
    SessionRecipe,
    installed_onnxruntime,
)
from pytest_ortperf.measuring.recorded_feeds import load_feeds, write_data_set
from pytest_ortperf.measuring.session import OrtSession, SessionSettings

ORT = f"onnxruntime=={ort.__version__}"


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recipe") / "mlp.onnx"
    path.write_bytes(models.deep_chain(layers=3, width=8).SerializeToString())
    return path


@pytest.fixture(scope="module")
def session(model_file: Path) -> OrtSession:
    return OrtSession.create(model_file)


@pytest.fixture
def feeds(session: OrtSession) -> dict[str, Any]:
    return make_feeds(input_specs(session.sess), dims={"N": 4}, seed=0)


def recipe(model: Any, feeds: Any, **keywords: Any) -> Recipe:
    keywords.setdefault("onnxruntime", ORT)
    return Recipe.of(model, feeds, **keywords)


# ------------------------------------------------------------------------- the model's bytes


def test_a_real_sessions_model_bytes_hash_as_the_file(
    model_file: Path, session: OrtSession, feeds: Any
) -> None:
    from_session = Recipe.of_session(session, feeds)
    assert from_session.model_sha256 == hashlib.sha256(model_file.read_bytes()).hexdigest()
    assert from_session.model_size == model_file.stat().st_size
    assert from_session.model_name == "mlp.onnx"
    # the session really runs those bytes
    assert session.run(feeds)[0].shape == (4, 8)


def test_path_bytes_and_proto_of_one_model_make_one_recipe(model_file: Path, feeds: Any) -> None:
    proto = models.deep_chain(layers=3, width=8)
    from_proto_session = Recipe.of_session(OrtSession.create(proto), feeds, onnxruntime=ORT)
    recipes = [
        recipe(model_file, feeds),
        recipe(str(model_file), feeds),
        recipe(model_file.read_bytes(), feeds),
        recipe(proto, feeds),
        from_proto_session,
    ]
    assert len({r.digest for r in recipes}) == 1
    assert all(r == recipes[0] for r in recipes)
    # names are for messages only
    assert {r.model_name for r in recipes} == {"mlp.onnx", "<bytes>", "deep_chain"}


def test_the_installed_onnxruntime_is_named_with_its_version() -> None:
    assert installed_onnxruntime().endswith(f"=={ort.__version__}")
    assert installed_onnxruntime().startswith(("onnxruntime", "ort-nightly"))


# ------------------------------------------------------------------------- equal settings


@pytest.mark.parametrize(
    "keywords",
    [
        {"providers": ["CPUExecutionProvider"]},
        {"providers": None, "threads": 1, "optimization": "all", "spinning": False},
        {"options": {"intra_op_num_threads": 1}},
        {"options": {"graph_optimization_level": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}},
        {"options": {"log_severity_level": 3, "optimized_model_filepath": "/tmp/x.onnx"}},
    ],
)
def test_equal_settings_hash_equal(model_file: Path, feeds: Any, keywords: dict[str, Any]) -> None:
    assert recipe(model_file, feeds, **keywords).digest == recipe(model_file, feeds).digest


def test_options_are_normalized_whatever_their_order_and_spelling(
    model_file: Path, feeds: Any
) -> None:
    a = recipe(
        model_file,
        feeds,
        options={"session.set_denormal_as_zero": "1", "enable_mem_pattern": False},
    )
    b = recipe(
        model_file,
        feeds,
        options={"enable_mem_pattern": False, "session.set_denormal_as_zero": 1},
    )
    assert a == b and a.digest == b.digest
    assert a.session.options == (
        ("enable_mem_pattern", False),
        ("session.set_denormal_as_zero", "1"),
    )


def test_a_session_and_its_keywords_make_one_recipe(model_file: Path, feeds: Any) -> None:
    keywords: dict[str, Any] = {
        "optimization": "basic",
        "threads": 2,
        "options": {"execution_mode": ort.ExecutionMode.ORT_SEQUENTIAL},
    }
    live = Recipe.of_session(OrtSession.create(model_file, **keywords), feeds)
    assert live == recipe(model_file, feeds, **keywords)
    assert dict(live.session.options) == {"execution_mode": "ORT_SEQUENTIAL"}


def test_a_session_rebuilt_from_the_recipe_has_the_recipe(model_file: Path, feeds: Any) -> None:
    keywords: dict[str, Any] = {
        "optimization": "extended",
        "threads": 2,
        "options": {
            "execution_mode": ort.ExecutionMode.ORT_PARALLEL,
            "enable_mem_pattern": False,
            "session.set_denormal_as_zero": "1",
        },
    }
    made = recipe(model_file, feeds, **keywords)
    back = Recipe.from_dict(json.loads(json.dumps(made.to_dict())))
    rebuilt = OrtSession(
        model_file.read_bytes(), SessionSettings.of(**back.session.keywords()), "b"
    )
    assert Recipe.of_session(rebuilt, feeds, onnxruntime=ORT) == made
    assert rebuilt.sess.get_session_options().execution_mode == ort.ExecutionMode.ORT_PARALLEL
    np.testing.assert_array_equal(
        rebuilt.run(feeds)[0], OrtSession.create(model_file).run(feeds)[0]
    )
    bad = SessionRecipe.of(options={"execution_mode": "ORT_TURBO"})
    with pytest.raises(
        RecipeError, match=r"session.options.execution_mode: 'ORT_TURBO' is not one"
    ):
        bad.keywords()


def test_settings_of_a_session_settings_record() -> None:
    settings = SessionSettings.of(threads=4, options={"enable_cpu_mem_arena": 0})
    made = SessionRecipe.of(
        providers=settings.providers,
        optimization=settings.optimization,
        threads=settings.threads,
        spinning=settings.spinning,
        options=settings.options,
    )
    assert made == SessionRecipe.of(threads=4, options={"enable_cpu_mem_arena": 0})


# ------------------------------------------------------------------------- what changed


def changed(before: Recipe, after: Recipe) -> list[str]:
    assert before.digest != after.digest
    return [str(d) for d in before.differences(after)]


def test_an_unchanged_recipe_has_no_differences(model_file: Path, feeds: Any) -> None:
    assert recipe(model_file, feeds).differences(recipe(model_file, feeds)) == []


def test_changed_model_bytes_are_named_with_both_hashes(model_file: Path, feeds: Any) -> None:
    slower = models.deep_chain(layers=4, width=8).SerializeToString()
    before, after = recipe(model_file, feeds), recipe(slower, feeds)
    assert changed(before, after) == [
        f"model: sha256 {before.model_sha256[:12]} ({before.model_size:,} bytes) -> "
        f"sha256 {hashlib.sha256(slower).hexdigest()[:12]} ({len(slower):,} bytes)"
    ]


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"threads": 4}, ["session.threads: 1 -> 4"]),
        ({"optimization": "disable"}, ['session.optimization: "all" -> "disable"']),
        ({"spinning": True}, ["session.spinning: false -> true"]),
        (
            {"providers": ["XnnpackExecutionProvider", "CPUExecutionProvider"]},
            [
                "session.providers: [CPUExecutionProvider] -> "
                "[XnnpackExecutionProvider, CPUExecutionProvider]"
            ],
        ),
        (
            {"options": {"enable_mem_pattern": False}},
            ["session.options.enable_mem_pattern: (not set) -> false"],
        ),
        (
            {"options": {"intra_op_num_threads": 2}},
            ["session.threads: 1 -> 2"],
        ),
        (
            {"onnxruntime": "onnxruntime==1.20.1"},
            [f'onnxruntime: "{ORT}" -> "onnxruntime==1.20.1"'],
        ),
    ],
)
def test_each_changed_setting_is_named(
    model_file: Path, feeds: Any, keywords: dict[str, Any], named: list[str]
) -> None:
    assert changed(recipe(model_file, feeds), recipe(model_file, feeds, **keywords)) == named


def test_a_changed_custom_ops_library_is_named_by_its_hash(
    model_file: Path, feeds: Any, tmp_path: Path
) -> None:
    library = tmp_path / "libcustom.so"
    library.write_bytes(b"build 1")
    before = recipe(model_file, feeds, custom_ops=[library])
    library.write_bytes(b"build 2")
    after = recipe(model_file, feeds, custom_ops=[library])
    one, two = (hashlib.sha256(b).hexdigest()[:12] for b in (b"build 1", b"build 2"))
    assert changed(before, after) == [
        f"custom_ops: libcustom.so (sha256 {one}) -> libcustom.so (sha256 {two})"
    ]
    assert changed(recipe(model_file, feeds), before) == [
        f"custom_ops: (none) -> libcustom.so (sha256 {one})"
    ]
    # the same bytes elsewhere, under another name: the same library
    moved = tmp_path / "elsewhere" / "renamed.so"
    moved.parent.mkdir()
    moved.write_bytes(b"build 2")
    assert recipe(model_file, feeds, custom_ops=[moved]) == after


def test_a_missing_custom_ops_library_is_named(
    model_file: Path, feeds: Any, tmp_path: Path
) -> None:
    gone = tmp_path / "libgone.so"
    with pytest.raises(RecipeError, match=r"custom ops library .*libgone\.so: cannot be read"):
        recipe(model_file, feeds, custom_ops=[gone])


def test_changed_feeds_are_named_input_by_input(session: OrtSession, model_file: Path) -> None:
    specs = input_specs(session.sess)
    base = recipe(model_file, make_feeds(specs, dims={"N": 4}, seed=0))
    assert base.feeds.inputs[0].values == RANDOM and base.feeds.seed == 0
    assert changed(base, recipe(model_file, make_feeds(specs, dims={"N": 8}, seed=0))) == [
        "feeds.inputs.X.shape: [4, 8] -> [8, 8]"
    ]
    assert changed(base, recipe(model_file, make_feeds(specs, dims={"N": 4}, seed=1))) == [
        "feeds.seed: 0 -> 1"
    ]
    assert changed(base, recipe(model_file, make_feeds(specs, dims={"N": 4}, high=2.0))) == [
        "feeds.high: (not set) -> 2.0"
    ]
    pinned = np.ones((4, 8), np.float32)
    with_pinned = recipe(model_file, make_feeds(specs, values={"X": pinned}))
    digest = hashlib.sha256(pinned.tobytes()).hexdigest()
    assert with_pinned.feeds.inputs[0].values == f"sha256:{digest}"
    assert changed(base, with_pinned) == [
        f"feeds.inputs.X.values: random -> sha256 {digest[:12]}",
        "feeds.seed: 0 -> (not set)",
    ]
    other = recipe(model_file, make_feeds(specs, values={"X": pinned * 2}))
    assert [d.field for d in with_pinned.differences(other)] == ["feeds.inputs.X.values"]
    wider = recipe(model_file, {"X": pinned.astype(np.float64)})
    assert changed(with_pinned, wider) == [
        "feeds.inputs.X.dtype: float32 -> float64",
        f"feeds.inputs.X.values: sha256 {digest[:12]} -> sha256 "
        f"{hashlib.sha256(pinned.astype(np.float64).tobytes()).hexdigest()[:12]}",
    ]
    assert changed(with_pinned, recipe(model_file, {"X": pinned, "mask": pinned})) == [
        "feeds.inputs.mask: (none) -> present"
    ]


def test_recorded_inputs_hash_by_their_values(session: OrtSession, tmp_path: Path) -> None:
    specs = input_specs(session.sess)
    rng = np.random.default_rng(5)
    sets = [{"X": rng.random((4, 8), dtype=np.float32)} for _ in range(3)]
    for index, one in enumerate(sets):
        write_data_set(tmp_path / "rec" / f"test_data_set_{index}", one)
    pool = load_feeds(specs, tmp_path / "rec")
    recorded = FeedsRecipe.of(pool)
    assert recorded.sets == 3 and recorded.recorded is not None and recorded.seed is None
    assert FeedsRecipe.of(load_feeds(specs, tmp_path / "rec")) == recorded
    # one value changed in the last set: named, though the first set (inputs) is the same
    sets[2]["X"][0, 0] += 1.0
    write_data_set(tmp_path / "rec" / "test_data_set_2", sets[2])
    again = FeedsRecipe.of(load_feeds(specs, tmp_path / "rec"))
    assert again.inputs == recorded.inputs
    assert [d.field for d in _feeds_recipe(again).differences(_feeds_recipe(recorded))] == [
        "feeds.recorded"
    ]
    # one set, as a file: the same recipe as the same arrays given as a dict
    single = FeedsRecipe.of(load_feeds(specs, tmp_path / "rec" / "test_data_set_0"))
    assert single == FeedsRecipe.of({"X": sets[0]["X"]})


def test_string_inputs_hash_by_their_text() -> None:
    one = FeedsRecipe.of({"s": np.array(["ab", "c"], dtype=object)})
    assert FeedsRecipe.of({"s": np.array(["ab", "c"])}) == one
    assert FeedsRecipe.of({"s": np.array(["a", "bc"], dtype=object)}) != one
    assert one.inputs[0].dtype == "string"


def _feeds_recipe(feeds: FeedsRecipe) -> Recipe:
    return Recipe(
        model_sha256="0" * 64, model_size=0, session=SessionRecipe(), onnxruntime=ORT, feeds=feeds
    )


# ------------------------------------------------------------------------- the plain form


def test_the_plain_form_is_small_json_and_reads_back_equal(
    session: OrtSession, feeds: Any, tmp_path: Path
) -> None:
    big = models.control(batch=4, width=512, layers=2)  # about 2 MiB of weights
    library = tmp_path / "libops.so"
    library.write_bytes(b"\x7fELF...")
    made = recipe(
        big,
        {"X": np.zeros((4, 512), np.float32)},
        threads=2,
        options={"session.set_denormal_as_zero": "1", "enable_mem_pattern": False},
        custom_ops=[library],
    )
    text = json.dumps(made.to_dict(), sort_keys=True, indent=1)
    assert made.model_size > 1_000_000 and len(text) < 1500
    back = Recipe.from_dict(json.loads(text))
    assert back == made and back.digest == made.digest
    assert back.model_name == made.model_name and back.custom_ops[0].name == "libops.so"
    assert made.to_dict()["digest"] == made.digest
    assert Recipe.from_dict(Recipe.of_session(session, feeds).to_dict()).ort_version == (
        ort.__version__
    )


def _edited(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(data))
    *parents, last = path.split(".")
    target = copy
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return copy


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("session.threads", "two", "recipe field session.threads: expected an integer, got 'two'"),
        ("session.threads", -1, "recipe field session.threads: expected an integer >= 0, got -1"),
        ("session.spinning", KeyError, "recipe field session: missing spinning (fields: "),
        ("session.turbo", True, "recipe field session: unknown turbo (fields: "),
        ("session.optimization", "max", "session.optimization: 'max' is not one of disable,"),
        ("model.sha256", "1a2b", "recipe field model.sha256: expected 64 lowercase hex digits"),
        ("feeds.inputs.0.shape", [4, "N"], "recipe field feeds.inputs[0].shape[1]: expected an"),
        ("feeds.inputs.0.values", "zeros", "feeds.inputs[0].values: expected 'random' or"),
        ("feeds.seed", 1.5, "recipe field feeds.seed: expected an integer, got 1.5"),
        ("onnxruntime", "1.20", "recipe field onnxruntime: expected 'distribution==version'"),
        ("format", 2, "recipe field format: 2 is not a recipe format this version reads (1)"),
        ("session.threads", 2, "recipe field digest: "),
    ],
)
def test_a_bad_plain_form_is_refused_naming_the_field(
    model_file: Path, feeds: Any, path: str, value: Any, message: str
) -> None:
    data = recipe(model_file, feeds).to_dict()
    with pytest.raises(RecipeError) as info:
        Recipe.from_dict(_edited(data, path, value))
    assert message in str(info.value)


def test_a_hand_edited_entry_is_refused_with_its_digest(model_file: Path, feeds: Any) -> None:
    data = recipe(model_file, feeds).to_dict()
    with pytest.raises(RecipeError) as info:
        Recipe.from_dict(_edited(data, "session.threads", 2))
    assert str(info.value).startswith(f"recipe field digest: {data['digest'][:12]} does not match")
    assert "--ortperf-update" in str(info.value)
    with pytest.raises(RecipeError, match=r"^recipe: expected an object, got list$"):
        Recipe.from_dict([data])
