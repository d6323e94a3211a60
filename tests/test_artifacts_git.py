"""A committed model read back from git's history when the artifact store lacks it: real git
repositories, real pytest runs (``--ortperf-update``, the artifact store removed as on a
fresh runner, then ``--ortperf`` with the model file changed).

The slowed model has four times the layers of the baseline's (3-4x slower), so no
assertion depends on the machine's speed or load."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest

from pytest_ortperf import models
from pytest_ortperf.measuring.recipe import Recipe, RecipeError
from pytest_ortperf.store.artifacts import (
    ArtifactCorrupt,
    ArtifactError,
    ArtifactMissing,
    ArtifactStore,
)
from pytest_ortperf.store.artifacts_git import blob_id, read_blob

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

INNER = """
import pathlib

def test_mlp(ort_session, ort_feeds, ortperf):
    s = ort_session(str(pathlib.Path(__file__).with_name("model.onnx")))
    ortperf.latency(s, ort_feeds(s), name="mlp")
"""

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none", "--ortperf-budget=0.1")
BESIDE = "against the baseline's model (sha "
FALLBACK = "not judged beside the baseline's model"


def git(repo: Path, *args: str) -> str:
    """``git args`` in ``repo`` alone: no hooks, signing or repository from the caller's
    environment (a suite run from a git hook has GIT_DIR set)."""
    command = ["git", "-c", "user.name=ortperf", "-c", "user.email=ortperf@example.invalid",
               "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false",
               "-c", f"core.hooksPath={os.devnull}", *args]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def write_model(path: Path, layers: int) -> bytes:
    onnx.save(models.control(batch=16, width=128, layers=layers), path / "model.onnx")
    return (path / "model.onnx").read_bytes()


def recipe_of(path: Path) -> dict:
    entries = json.loads((path / "__ortperf__" / "test_mlp.json").read_text())["entries"]
    return entries["test_mlp::mlp"]["recipe"]


def verdict_message(path: Path) -> str:
    data = json.loads((path / "out.json").read_text())
    (verdict,) = [v for r in data["results"] for v in r.get("verdicts") or ()]
    return str(verdict["message"])


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A git repository whose test reads ``model.onnx`` (2 layers), its baseline taken."""
    monkeypatch.delenv("ORTPERF_ARTIFACTS", raising=False)
    pytester.makepyfile(test_mlp=INNER)
    write_model(pytester.path, layers=2)
    git(pytester.path, "init", "-q")
    pytester.runpytest(*RUN, "--ortperf-update").assert_outcomes(passed=1)
    return pytester


def fresh_runner_check(project: pytest.Pytester) -> pytest.RunResult:
    """The artifact store gone (a fresh runner), the model slowed, the check run."""
    shutil.rmtree(project.path / ".ortperf" / "artifacts")
    write_model(project.path, layers=8)
    return project.runpytest(*RUN, "--ortperf", f"--ortperf-json={project.path / 'out.json'}")


@needs_git
def test_the_recipe_keeps_the_models_git_blob_id(project):
    recipe = recipe_of(project.path)
    data = (project.path / "model.onnx").read_bytes()
    assert recipe["model"]["git"] == blob_id(data) == git(project.path, "hash-object", "model.onnx")


@needs_git
def test_a_committed_model_missing_from_the_store_is_read_back_from_git(project):
    git(project.path, "add", "model.onnx")
    git(project.path, "commit", "-q", "-m", "the baseline's model")
    result = fresh_runner_check(project)
    result.assert_outcomes(failed=1)
    message = verdict_message(project.path)
    assert BESIDE in message and FALLBACK not in message, message
    # Kept in the store for the next check.
    recipe = recipe_of(project.path)
    store = ArtifactStore(project.path / ".ortperf" / "artifacts")
    assert store.get(recipe["model"]["sha256"], size=recipe["model"]["bytes"])


@needs_git
def test_a_model_never_committed_falls_back_naming_the_blob_and_how_to_fetch(project):
    result = fresh_runner_check(project)
    result.assert_outcomes(failed=1)  # 3-4x slower: the normalized latency sees it too
    message = verdict_message(project.path)
    oid = recipe_of(project.path)["model"]["git"]
    assert f"{FALLBACK}: the baseline's model is missing" in message
    assert f"nor in git (git blob {oid}" in message
    assert "not in this repository's history" in message  # a full clone: nothing to fetch
    assert "or commit the model file" in message


@needs_git
def test_a_shallow_clone_is_told_to_fetch_the_history(project, tmp_path):
    git(project.path, "add", "model.onnx", "test_mlp.py", "__ortperf__")
    git(project.path, "commit", "-q", "-m", "the baseline")
    write_model(project.path, layers=8)
    git(project.path, "commit", "-q", "-am", "a slower model")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth=1", project.path.as_uri(), str(clone))
    oid = recipe_of(clone)["model"]["git"]
    data = (project.path / "model.onnx").read_bytes()
    with pytest.raises(ArtifactMissing, match=r"shallow clone.*fetch-depth: 0"):
        read_blob(oid, sha256=hashlib.sha256(data).hexdigest(), size=None, repo=clone)
    git(clone, "fetch", "-q", "--unshallow")
    recipe = recipe_of(clone)["model"]
    assert read_blob(oid, sha256=recipe["sha256"], size=recipe["bytes"], repo=clone)


@needs_git
def test_blob_ids_are_gits(tmp_path):
    for data in (b"", b"model bytes\n", bytes(range(256)) * 100):
        (tmp_path / "f").write_bytes(data)
        assert blob_id(data) == git(tmp_path, "hash-object", "f")


@needs_git
def test_read_blob_reads_verifies_and_names_what_is_wrong(tmp_path):
    git(tmp_path, "init", "-q")
    data = b"the model's bytes"
    (tmp_path / "m.onnx").write_bytes(data)
    oid = git(tmp_path, "hash-object", "-w", "m.onnx")
    sha = hashlib.sha256(data).hexdigest()
    assert read_blob(oid, sha256=sha, size=len(data), repo=tmp_path) == data
    with pytest.raises(ArtifactCorrupt, match=rf"git blob {oid} .*not the baseline's model"):
        read_blob(oid, sha256="0" * 64, size=len(data), repo=tmp_path)
    with pytest.raises(ArtifactMissing, match=r"not found .*not in this repository's history"):
        read_blob("1" * 40, sha256=sha, size=len(data), repo=tmp_path)
    nowhere = tmp_path / "no such directory"
    with pytest.raises(ArtifactMissing, match=re.escape(f"in {nowhere}: not found")):
        read_blob(oid, sha256=sha, size=len(data), repo=nowhere)
    # Only an id reaches git: nothing that could be taken for an option.
    for bad in ("--output=/tmp/x", "", oid.upper()):
        with pytest.raises(ArtifactError, match="not a git blob id"):
            read_blob(bad, sha256=sha, size=None, repo=tmp_path)


@needs_git
def test_read_blob_ignores_a_repository_named_by_the_environment(tmp_path, monkeypatch):
    elsewhere, here = tmp_path / "elsewhere", tmp_path / "here"
    for repo in (elsewhere, here):
        repo.mkdir()
        git(repo, "init", "-q")
    (elsewhere / "m").write_bytes(b"elsewhere's bytes")
    oid = git(elsewhere, "hash-object", "-w", "m")
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))
    with pytest.raises(ArtifactMissing, match=f"git blob {oid} .* in {re.escape(str(here))}"):
        read_blob(oid, sha256=hashlib.sha256(b"elsewhere's bytes").hexdigest(), size=None,
                  repo=here)  # fmt: skip


def test_without_git_the_blob_is_missing_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(ArtifactMissing, match="not read, git is not installed"):
        read_blob("1" * 40, sha256="0" * 64, size=None, repo=tmp_path)


def test_the_recipe_reads_its_git_id_back_and_compares_without_it(tmp_path):
    data = write_model(tmp_path, layers=2)
    recipe = Recipe.of(tmp_path / "model.onnx", {})
    kept = Recipe.from_dict(
        {**recipe.to_dict(), "model": {**recipe.to_dict()["model"], "git": blob_id(data)}}
    )
    assert kept.model_git == blob_id(data)
    assert kept == recipe and kept.digest == recipe.digest  # a function of the bytes
    assert Recipe.from_dict(kept.to_dict()).model_git == kept.model_git
    for value in ("HEAD", "", 7):
        bad = {**recipe.to_dict(), "model": {**recipe.to_dict()["model"], "git": value}}
        with pytest.raises(RecipeError, match=r"recipe field model\.git: expected a git blob id"):
            Recipe.from_dict(bad)
