"""The artifact store: model bytes kept once by content, read back verified
(store/artifacts.py). Real files, real processes, real kills."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_ortperf import models
from pytest_ortperf.files import STALE_TEMP_S
from pytest_ortperf.measuring.feeds import input_specs, make_feeds
from pytest_ortperf.measuring.recipe import Recipe
from pytest_ortperf.measuring.session import OrtSession
from pytest_ortperf.store import artifacts
from pytest_ortperf.store.artifacts import (
    ARTIFACTS_ENV,
    ArtifactCorrupt,
    ArtifactError,
    ArtifactMissing,
    ArtifactStore,
    Usage,
    resolve_artifacts,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ------------------------------------------------------------------------- keeping and reading


def test_an_artifact_is_kept_once_under_its_hash(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "a")
    data = models.deep_chain(layers=3, width=8).SerializeToString()
    digest = store.put(data)
    assert digest == sha(data)
    assert store.path_for(digest) == tmp_path / "a" / digest[:2] / digest[2:]
    assert store.has(digest) and store.get(digest) == data
    assert store.put(bytearray(data)) == digest  # again, from another entry: kept once
    assert files_under(tmp_path / "a") == [f"{digest[:2]}/{digest[2:]}"]
    assert store.du() == Usage(1, len(data))
    assert list(store) == [digest]
    other = store.put(b"another model")
    assert store.du() == Usage(2, len(data) + len(b"another model"))
    assert sorted(store) == sorted([digest, other])
    assert str(Usage(2, 1536)) == "2 artifacts, 1,536 bytes"
    assert str(Usage(1, 3 << 20)) == "1 artifact, 3.0 MiB"


def test_a_real_sessions_model_round_trips_through_the_store(tmp_path: Path) -> None:
    session = OrtSession.create(models.deep_chain(layers=3, width=8), threads=1)
    feeds = make_feeds(input_specs(session.sess), dims={"N": 4})
    recipe = Recipe.of_session(session, feeds)
    store = ArtifactStore(tmp_path / "a")
    assert store.put(session.model_bytes) == recipe.model_sha256
    again = OrtSession(
        store.get(recipe.model_sha256, size=recipe.model_size), session.settings, "baseline"
    )
    np.testing.assert_array_equal(again.run(feeds)[0], session.run(feeds)[0])
    assert Recipe.of_session(again, feeds) == recipe


def test_a_file_is_kept_by_its_bytes(tmp_path: Path) -> None:
    library = tmp_path / "libcustom.so"
    library.write_bytes(b"\x7fELF custom ops")
    store = ArtifactStore(tmp_path / "a")
    assert store.put_file(library) == sha(library.read_bytes())
    with pytest.raises(ArtifactError, match=rf"^{tmp_path}/missing\.so: cannot be read \("):
        store.put_file(tmp_path / "missing.so")
    with pytest.raises(ArtifactError, match=rf"^{tmp_path}: cannot be read|not a regular file"):
        store.put_file(tmp_path)


def test_a_missing_artifact_names_the_store(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "a")
    digest = sha(b"never kept")
    assert not store.has(digest)
    with pytest.raises(ArtifactMissing) as info:
        store.get(digest)
    assert str(info.value) == (
        f"artifact {digest}: not in the artifact store {tmp_path / 'a'} "
        f"(no {store.path_for(digest)})"
    )
    assert store.du() == Usage(0, 0)
    assert not (tmp_path / "a").exists()  # reading makes nothing


@pytest.mark.parametrize(
    "bad", ["../../etc/passwd", "A" * 64, "ab", "0" * 63 + "/", "0" * 64 + "\n", None]
)
def test_only_a_hash_names_an_artifact(tmp_path: Path, bad: object) -> None:
    store = ArtifactStore(tmp_path)
    uses: list[Callable[[Any], object]] = [store.path_for, store.get, store.has]
    if bad is not None:  # no hash claimed: the bytes' own
        uses.append(lambda h: store.put(b"x", sha256=h))
    for use in uses:
        with pytest.raises(ArtifactError) as info:
            use(bad)
        assert str(info.value) == f"not an artifact hash (64 lowercase hex digits): {bad!r}"
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------- damage


def test_a_truncated_artifact_is_refused_naming_it_and_nothing_else_is_lost(
    tmp_path: Path,
) -> None:
    store = ArtifactStore(tmp_path / "a")
    model = models.control(batch=4, width=64).SerializeToString()
    keep = store.put(b"the other model")
    digest = store.put(model)
    path = store.path_for(digest)
    path.write_bytes(model[: len(model) // 2])
    with pytest.raises(ArtifactCorrupt) as info:
        store.get(digest)
    assert str(info.value) == (
        f"artifact {digest}: {path} is damaged (truncated or altered): its "
        f"{len(model) // 2:,} bytes hash to {sha(model[: len(model) // 2])}; not used. "
        "Remove the file and keep the artifact again (pytest --ortperf-update)"
    )
    with pytest.raises(
        ArtifactCorrupt, match=r"bytes, the artifact [\d,]+ \(truncated\); not used"
    ):
        store.get(digest, size=len(model))
    # nothing removed or touched: the damaged file stays for a look, the others are whole
    assert path.read_bytes() == model[: len(model) // 2]
    assert store.get(keep) == b"the other model"
    # an empty file (a cache restored halfway) is refused the same way
    path.write_bytes(b"")
    with pytest.raises(ArtifactCorrupt, match="its 0 bytes hash to e3b0c442"):
        store.get(digest)
    # keeping it again repairs it
    assert store.put(model) == digest and store.get(digest) == model


def test_an_artifact_whose_bytes_do_not_match_its_hash_is_refused(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "a")
    real = store.put(b"model v1")
    store.path_for(real).write_bytes(b"model v2")  # same length, other bytes
    with pytest.raises(ArtifactCorrupt, match=rf"^artifact {real}: .* hash to {sha(b'model v2')}"):
        store.get(real, size=len(b"model v1"))
    # bytes given under a hash they do not have: refused, nothing written
    claimed = sha(b"model v3")
    with pytest.raises(ArtifactCorrupt) as info:
        store.put(b"model v4", sha256=claimed)
    assert str(info.value) == (
        f"artifact {claimed}: refused, the bytes given hash to {sha(b'model v4')} (8 bytes)"
    )
    assert not store.has(claimed) and not store.has(sha(b"model v4"))


def test_a_root_that_is_a_file_is_named(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    root.write_text("not a directory")
    with pytest.raises(ArtifactError, match=rf"^artifact store {root} is not a directory$"):
        ArtifactStore(root).put(b"x")
    assert root.read_text() == "not a directory"


def test_a_link_in_place_of_an_artifact_is_not_written_through(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "a")
    victim = store.put(b"another artifact")
    digest = sha(b"model")
    store.path_for(digest).parent.mkdir(parents=True, exist_ok=True)
    store.path_for(digest).symlink_to(store.path_for(victim))
    with pytest.raises(ArtifactError, match=r"is not a regular file \(a link, a directory\?\)"):
        store.put(b"model")
    assert store.get(victim) == b"another artifact"


def test_no_artifact_larger_than_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "MAX_ARTIFACT_BYTES", 1000)
    store = ArtifactStore(tmp_path / "a")
    with pytest.raises(ArtifactError, match=r"^artifact: 0\.0 MiB is more than an artifact"):
        store.put(b"x" * 1001)
    assert store.du() == Usage(0, 0)


# ------------------------------------------------------------------------- where it lives


def test_where_the_store_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    assert resolve_artifacts(None, tmp_path) == tmp_path / ".ortperf" / "artifacts"
    monkeypatch.setenv(ARTIFACTS_ENV, "ci-cache/models")
    assert resolve_artifacts(None, tmp_path) == tmp_path / "ci-cache" / "models"
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "abs"))
    assert resolve_artifacts("", tmp_path) == tmp_path / "abs"
    assert resolve_artifacts("given", tmp_path) == tmp_path / "given"


# ------------------------------------------------------------------------- processes

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_ortperf.store.artifacts import ArtifactStore

    base, go, index, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    shared = bytes(range(256)) * 65536  # 16 MiB, the same in every process
    own = f"model of writer {index}".encode() * 1000
    while not go.exists():
        time.sleep(0.001)
    for r in range(rounds):
        store = ArtifactStore(base / f"round{r}")
        store.put(shared)
        store.put(own)
    """
)

READER = textwrap.dedent(
    """
    import hashlib, sys, time
    from pathlib import Path
    from pytest_ortperf.store.artifacts import ArtifactStore

    base, go, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    shared = hashlib.sha256(bytes(range(256)) * 65536).hexdigest()
    while not go.exists():
        time.sleep(0.001)
    seen = 0
    deadline = time.monotonic() + 60
    for r in range(rounds):
        store = ArtifactStore(base / f"round{r}")
        while not store.has(shared) and time.monotonic() < deadline:
            pass
        store.get(shared)  # raises if it ever sees a part of the file
        seen += 1
    print(seen)
    """
)


def test_processes_keeping_the_same_and_other_artifacts_at_once(tmp_path: Path) -> None:
    writers, rounds = 3, 8
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "reader.py").write_text(READER)
    base, go = tmp_path / "store", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "writer.py"), str(base), str(go), str(i), str(rounds)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    reader = subprocess.Popen(
        [sys.executable, str(tmp_path / "reader.py"), str(base), str(go), str(rounds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # all started and waiting
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    assert out.strip() == str(rounds)
    shared = bytes(range(256)) * 65536
    for r in range(rounds):
        store = ArtifactStore(base / f"round{r}")
        assert store.du() == Usage(
            1 + writers,
            len(shared) + sum(len(f"model of writer {i}".encode() * 1000) for i in range(writers)),
        )
        assert store.get(sha(shared)) == shared
        for i in range(writers):
            own = f"model of writer {i}".encode() * 1000
            assert store.get(sha(own)) == own
        # no temp file left behind
        assert all(not p.name.startswith(".") for p in (base / f"round{r}").rglob("*"))


KILLED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_ortperf.files import replacing

    with replacing(Path(sys.argv[1])) as tmp:
        tmp.write_bytes(b"half a mod")
        print(tmp, flush=True)
        time.sleep(60)
    """
)


def test_a_writer_killed_mid_write_leaves_no_artifact_and_its_temp_goes(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "a")
    data = b"a model" * 1000
    digest = sha(data)
    (tmp_path / "killed.py").write_text(KILLED)
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "killed.py"), str(store.path_for(digest))],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    temp = Path(proc.stdout.readline().strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    assert temp.exists() and not store.has(digest)
    assert store.du() == Usage(0, 0) and list(store) == []
    with pytest.raises(ArtifactMissing):
        store.get(digest)
    stale = time.time() - STALE_TEMP_S - 1
    os.utime(temp, (stale, stale))
    assert store.put(data) == digest and store.get(digest) == data
    assert not temp.exists()
    assert files_under(tmp_path / "a") == [f"{digest[:2]}/{digest[2:]}"]
