"""Model bytes read back from git: a committed model that the artifact store does not hold.

At ``--ortperf-update`` a latency's recipe keeps, beside its model's sha256, the git blob id
of its bytes (:func:`blob_id`, what ``git hash-object`` prints for a file of those bytes).
A model file committed to the repository is in its history under that id, whatever its
path and whichever commit added it, so a check whose artifact store lacks the model (a
fresh runner, an evicted CI cache) reads it back with ``git cat-file blob <id>`` in the
rootdir's repository (:func:`read_blob`) and verifies its sha256 and size before use.

A shallow clone holds only its own commit's files, so a model changed by the commit under
test is found only with the history fetched (``actions/checkout`` with ``fetch-depth: 0``,
or ``git fetch --unshallow``). Ids are SHA-1 blob ids: a repository in git's SHA-256 object
format, or a model kept in Git LFS (git holds a pointer, not the bytes), never finds one.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from pytest_ortperf.store.artifacts import (
    MAX_ARTIFACT_BYTES,
    ArtifactCorrupt,
    ArtifactError,
    ArtifactMissing,
    verified,
)

GIT_TIMEOUT_S = 120.0
"""How long ``git cat-file`` may take to read one blob."""

FETCH_HISTORY = (
    "this is a shallow clone, which holds only its own commit's files: fetch the history "
    "(actions/checkout with fetch-depth: 0, or git fetch --unshallow)"
)
"""What to do when a blob is not in a shallow clone, as a message says it."""

NOT_COMMITTED = (
    "not in this repository's history: a model never committed, or kept in Git LFS or in a "
    "submodule, needs the artifact store"
)
"""Why a blob is not in a full clone, as a message says it."""

_LOCATING = frozenset(
    {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
     "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX"}
)  # fmt: skip
"""Variables that would point git at another repository than the one holding ``repo``."""

_BLOB_ID = re.compile(r"^[0-9a-f]{40}$")


def blob_id(data: bytes | bytearray | memoryview) -> str:
    """The git (SHA-1) blob id of ``data``: what ``git hash-object`` prints for a file of
    these bytes."""
    view = memoryview(data).cast("B")
    digest = hashlib.sha1(b"blob %d\0" % len(view), usedforsecurity=False)
    digest.update(view)
    return digest.hexdigest()


def read_blob(oid: str, *, sha256: str, size: int | None, repo: Path) -> bytes:
    """The bytes of git blob ``oid`` in the repository holding ``repo``, verified to be
    artifact ``sha256`` (of ``size`` bytes, where known). Raises :class:`ArtifactMissing`
    when git, the repository or the blob is not there, :class:`ArtifactCorrupt` when the
    blob's bytes are not the artifact's, :class:`ArtifactError` when git fails otherwise;
    each message names the blob and the repository."""
    if not isinstance(oid, str) or not _BLOB_ID.fullmatch(oid):
        raise ArtifactError(f"not a git blob id (40 lowercase hex digits): {oid!r}")
    where = f"git blob {oid} (artifact {sha256[:12]}) in {repo}"
    git = shutil.which("git")
    if git is None:
        raise ArtifactMissing(f"{where}: not read, git is not installed")
    if size is not None:
        stated = _git(git, repo, where, "cat-file", "-s", oid).strip()
        if stated != str(size).encode():
            raise ArtifactCorrupt(
                f"{where}: {stated.decode('ascii', 'replace')} bytes, the artifact {size:,}; "
                "not the baseline's model. Take the baseline again with --ortperf-update"
            )
    data = _git(git, repo, where, "cat-file", "blob", oid)
    if len(data) > MAX_ARTIFACT_BYTES:
        raise ArtifactCorrupt(f"{where}: more bytes than any artifact; not used")
    return verified(
        data, sha256, size, where=where,
        damaged="not the baseline's model",
        fix="Take the baseline again with --ortperf-update",
    )  # fmt: skip


def _git(git: str, repo: Path, where: str, *args: str) -> bytes:
    """What ``git -C repo args`` printed (``git``: the executable); :class:`ArtifactMissing`
    (git's own error, and what to do) when it failed, :class:`ArtifactError` when it could
    not run."""
    # Nothing goes through a shell, and the caller checked the id is hex, so it cannot be
    # taken for an option. No prompt: a partial clone fetching the blob must not wait on
    # a terminal.
    env = {k: v for k, v in os.environ.items() if k not in _LOCATING}
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        proc = _run(git, repo, env, *args)
    except subprocess.TimeoutExpired:
        raise ArtifactError(f"{where}: git {args[0]} took more than {GIT_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise ArtifactError(f"{where}: git could not run ({exc})") from None
    if proc.returncode == 0:
        return proc.stdout
    said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    errors = [line for line in said if line.startswith(("fatal:", "error:"))]
    why = (errors or said or [f"git exited {proc.returncode}"])[0]
    advice = FETCH_HISTORY if _shallow(git, repo, env) else NOT_COMMITTED
    raise ArtifactMissing(f"{where}: not found ({why}); {advice}")


def _shallow(git: str, repo: Path, env: dict[str, str]) -> bool:
    """Whether ``repo`` is in a shallow clone (False where git cannot say)."""
    try:
        proc = _run(git, repo, env, "rev-parse", "--is-shallow-repository")
    except (subprocess.TimeoutExpired, OSError):
        return False
    return proc.stdout.strip() == b"true"


def _run(
    git: str, repo: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[bytes]:
    """``git -C repo args`` run once, its output captured, bounded by :data:`GIT_TIMEOUT_S`."""
    return subprocess.run(
        [git, "-C", os.fspath(repo), *args],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=GIT_TIMEOUT_S, env=env,
        check=False,
    )  # fmt: skip
