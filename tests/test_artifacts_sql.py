"""Artifacts in the results store (store/artifacts_sql.py): real SQLite files, a real
PostgreSQL server (the ``postgres`` fixture), real concurrent processes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from pg_server import Postgres

from pytest_ortperf import models
from pytest_ortperf.store.artifacts import ArtifactCorrupt, ArtifactError, ArtifactMissing, Usage
from pytest_ortperf.store.artifacts_sql import SqlArtifactStore, artifacts
from pytest_ortperf.store.read import list_runs


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new empty results store: an SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "results.sqlite")
        return
    server: Postgres = request.getfixturevalue("postgres")
    yield server.url(server.new_database())


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def engine_of(url: str) -> sa.Engine:
    return sa.create_engine(url if "://" in url else f"sqlite:///{url}")


def test_an_artifact_is_kept_once_beside_the_results(store_url: str) -> None:
    store = SqlArtifactStore(store_url)
    model = models.deep_chain(layers=3, width=8).SerializeToString()
    assert not store.has(sha(model)) and store.du() == Usage(0, 0)
    digest = store.put(model)
    assert digest == sha(model) and store.has(digest)
    assert store.put(model) == digest  # a second entry of the same model
    store.put(b"another model")
    assert store.du() == Usage(2, len(model) + len(b"another model"))
    assert store.get(digest, size=len(model)) == model
    # still a results store, readable as one
    assert len(list_runs(store_url)) == 0
    missing = sha(b"never kept")
    with pytest.raises(ArtifactMissing) as info:
        store.get(missing)
    assert str(info.value) == f"artifact {missing}: not in the results store {store.label}"


def test_no_store_file_is_no_artifact_and_makes_nothing(tmp_path: Path) -> None:
    store = SqlArtifactStore(tmp_path / "none.sqlite")
    digest = sha(b"x")
    assert not store.has(digest) and store.du() == Usage(0, 0)
    with pytest.raises(ArtifactMissing, match=rf"no results store at {tmp_path}/none\.sqlite$"):
        store.get(digest)
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_row_is_refused_naming_the_store_not_its_password(store_url: str) -> None:
    store = SqlArtifactStore(store_url)
    model = models.control(batch=4, width=64).SerializeToString()
    other = store.put(b"the other model")
    digest = store.put(model)
    engine = engine_of(store_url)
    with engine.begin() as conn:
        conn.execute(
            artifacts.update().where(artifacts.c.sha256 == digest).values(data=model[:100])
        )
    with pytest.raises(ArtifactCorrupt) as info:
        store.get(digest)
    message = str(info.value)
    assert message == (
        f"artifact {digest} in the results store {store.label} is damaged: its 100 bytes hash "
        f"to {sha(model[:100])}; not used. Keep the artifact again (pytest --ortperf-update)"
    )
    if "://" in store_url:
        password = sa.make_url(store_url).password
        assert password and str(password) not in message and "***" in message
    with pytest.raises(ArtifactCorrupt, match=r"is 100 bytes, the artifact [\d,]+ \(truncated\)"):
        store.get(digest, size=len(model))
    assert store.get(other) == b"the other model"  # nothing else lost
    assert store.put(model) == digest and store.get(digest) == model  # kept again: repaired
    engine.dispose()


def test_bytes_that_do_not_match_the_claimed_hash_are_refused(store_url: str) -> None:
    store = SqlArtifactStore(store_url)
    claimed = sha(b"v1")
    with pytest.raises(ArtifactCorrupt, match=rf"^artifact {claimed}: refused, the bytes given"):
        store.put(b"v2", sha256=claimed)
    with pytest.raises(ArtifactError, match=r"^not an artifact hash"):
        store.get("'; DROP TABLE runs; --")
    assert store.du() == Usage(0, 0)


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_ortperf.store.artifacts_sql import SqlArtifactStore

    url, go, index = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    shared = bytes(range(256)) * 4096
    while not go.exists():
        time.sleep(0.001)
    store = SqlArtifactStore(url)
    for r in range(2):
        store.put(shared)
        store.put(f"writer {index} model {r}".encode())
    """
)


def test_processes_keeping_artifacts_in_one_store_at_once(store_url: str, tmp_path: Path) -> None:
    writers = 3
    (tmp_path / "writer.py").write_text(WRITER)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "writer.py"), store_url, str(go), str(i)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    time.sleep(0.5)
    go.touch()  # all at once, on an empty store: they also race to create the schema
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    store = SqlArtifactStore(store_url)
    shared = bytes(range(256)) * 4096
    own = [f"writer {i} model {r}".encode() for i in range(writers) for r in range(2)]
    assert store.du() == Usage(1 + len(own), len(shared) + sum(map(len, own)))
    assert store.get(sha(shared)) == shared
    assert all(store.get(sha(b)) == b for b in own)
