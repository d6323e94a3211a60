"""The artifact store: model bytes (and custom-op libraries) kept by content, once each.

An artifact is named by the sha256 of its bytes and lives in a directory at
``<root>/<first 2 hex digits>/<the other 62>``, so a model used by many baseline entries
is kept once, and two runs that keep the same model write the same file. The root
(:func:`resolve_artifacts`) is the value given (an option or ini key), else
``$ORTPERF_ARTIFACTS``, else ``.ortperf/artifacts`` under the rootdir: beside the results
store and the spool, in the directory that is never committed (so baselines stay small)
and that a CI cache step can keep by one path.

Writes are atomic (:func:`pytest_ortperf.files.replacing`: a temp file in the same
directory, fsync, a rename), so a reader sees a whole artifact or none, and two processes
writing the same artifact at once both leave the one right file (they write the same
bytes under the same name; the last rename wins). A writer killed mid-write leaves only a
``.<name>.<random>.tmp`` file, removed by a later write to that directory once stale.

Reads verify: :meth:`ArtifactStore.get` hashes what it read and refuses a file whose bytes
do not hash to its name (truncated, corrupt, replaced) with an :class:`ArtifactCorrupt`
naming the path and the hash; nothing is removed. :meth:`ArtifactStore.put` of an artifact
whose file is damaged writes it again (the only file a put ever replaces is the
artifact's own, with bytes that hash to its name).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_ortperf.files import STALE_TEMP_S, remove_stale_temps, replacing
from pytest_ortperf.units import format_bytes

ARTIFACTS_ENV = "ORTPERF_ARTIFACTS"
"""Environment variable naming the artifact store's directory."""

DEFAULT_ARTIFACTS = ".ortperf/artifacts"
"""The artifact store relative to the rootdir, when nothing else names one."""

MAX_ARTIFACT_BYTES = 1 << 31
"""The largest artifact kept or read: 2 GiB, protobuf's limit on a serialized model (a
larger model keeps its weights as external data, which is not an artifact)."""

_CHUNK = 1 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ArtifactError(Exception):
    """An artifact that cannot be kept or read; the message names the path and hash."""


class ArtifactMissing(ArtifactError):
    """The store holds no artifact of this hash."""


class ArtifactCorrupt(ArtifactError):
    """An artifact file whose bytes do not hash to its name (truncated, damaged)."""


@dataclass(frozen=True)
class Usage:
    """What the store holds: ``artifacts`` files of ``bytes`` bytes in all."""

    artifacts: int
    bytes: int

    def __str__(self) -> str:
        size = format_bytes(self.bytes) if self.bytes >= 1 << 20 else f"{self.bytes:,} bytes"
        return f"{self.artifacts} artifact{'s' * (self.artifacts != 1)}, {size}"


def resolve_artifacts(value: str | None, rootdir: Path) -> Path:
    """The artifact store's directory: ``value``, else ``$ORTPERF_ARTIFACTS``, else
    :data:`DEFAULT_ARTIFACTS` under ``rootdir`` (relative paths taken from ``rootdir``)."""
    text = (value or os.environ.get(ARTIFACTS_ENV, "")).strip() or DEFAULT_ARTIFACTS
    path = Path(text).expanduser()
    return path if path.is_absolute() else rootdir / path


def check_sha256(sha256: object) -> str:
    """``sha256`` when it is 64 lowercase hex digits; else an :class:`ArtifactError`
    (an artifact's name is its hash: nothing else may become a path)."""
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ArtifactError(f"not an artifact hash (64 lowercase hex digits): {sha256!r}")
    return sha256


def verified(
    data: bytes, sha256: str, size: int | None, *, where: str, damaged: str, fix: str
) -> bytes:
    """``data`` read back as artifact ``sha256`` (of ``size`` bytes, where known), or an
    :class:`ArtifactCorrupt` naming ``where`` it was read and ``fix``."""
    if size is not None and len(data) != size:
        raise ArtifactCorrupt(
            f"{where} is {len(data):,} bytes, the artifact {size:,}"
            f"{' (truncated)' if len(data) < size else ''}; not used. {fix}"
        )
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise ArtifactCorrupt(
            f"{where} is {damaged}: its {len(data):,} bytes hash to {actual}; not used. {fix}"
        )
    return data


class ArtifactStore:
    """A content-addressed directory of artifacts (see the module)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.fspath(root))

    def __repr__(self) -> str:
        return f"ArtifactStore({str(self.root)!r})"

    def path_for(self, sha256: str) -> Path:
        """Where the artifact of ``sha256`` lives (whether or not it is there)."""
        check_sha256(sha256)
        return self.root / sha256[:2] / sha256[2:]

    def has(self, sha256: str) -> bool:
        """Whether a file for ``sha256`` is there (not verified: :meth:`get` does)."""
        try:
            return stat.S_ISREG(os.stat(self.path_for(sha256)).st_mode)
        except OSError:
            return False

    def put(self, data: bytes | bytearray | memoryview, *, sha256: str | None = None) -> str:
        """Keep ``data``; its sha256. A file already there that holds these bytes is left
        as it is (kept once); a damaged one is written again. With ``sha256``, ``data``
        must hash to it (else :class:`ArtifactCorrupt`, nothing written)."""
        view = memoryview(data).cast("B")
        _check_size(len(view), "artifact")
        digest = hashlib.sha256(view).hexdigest()
        if sha256 is not None and check_sha256(sha256) != digest:
            raise ArtifactCorrupt(
                f"artifact {sha256}: refused, the bytes given hash to {digest} ({len(view):,} "
                "bytes)"
            )
        path = self._writable(digest)
        if self._intact(path, digest, len(view)):
            return digest
        try:
            with replacing(path) as tmp, open(tmp, "wb") as fh:
                fh.write(view)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise ArtifactError(f"artifact {digest}: cannot write {path} ({exc})") from None
        return digest

    def put_file(self, source: str | os.PathLike[str]) -> str:
        """Keep a file's bytes (a model, a custom-op library); their sha256. Raises
        :class:`ArtifactError` naming ``source`` when it cannot be read."""
        try:
            with open(source, "rb") as fh:
                info = os.fstat(fh.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise ArtifactError(f"{os.fspath(source)}: not a regular file, not kept")
                _check_size(info.st_size, os.fspath(source))
                data = fh.read(MAX_ARTIFACT_BYTES + 1)
        except OSError as exc:
            raise ArtifactError(f"{os.fspath(source)}: cannot be read ({exc})") from None
        _check_size(len(data), os.fspath(source))
        return self.put(data)

    def get(self, sha256: str, *, size: int | None = None) -> bytes:
        """The bytes of the artifact ``sha256``, verified. Raises :class:`ArtifactMissing`
        when there is none, :class:`ArtifactCorrupt` when the file's bytes do not hash to
        its name (or are not ``size`` bytes long, when given: truncated), each naming the
        path and hash; the file is left where it is."""
        path = self.path_for(sha256)
        try:
            with open(path, "rb") as fh:
                info = os.fstat(fh.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise ArtifactCorrupt(f"artifact {sha256}: {path} is not a regular file")
                if info.st_size > MAX_ARTIFACT_BYTES:
                    raise ArtifactCorrupt(
                        f"artifact {sha256}: {path} is {format_bytes(info.st_size)}, more than any "
                        f"artifact ({format_bytes(MAX_ARTIFACT_BYTES)}); not read"
                    )
                data = fh.read()
        except FileNotFoundError:
            raise ArtifactMissing(
                f"artifact {sha256}: not in the artifact store {self.root} (no {path})"
            ) from None
        except OSError as exc:
            raise ArtifactError(f"artifact {sha256}: cannot read {path} ({exc})") from None
        return verified(
            data, sha256, size, where=f"artifact {sha256}: {path}",
            damaged="damaged (truncated or altered)",
            fix="Remove the file and keep the artifact again (pytest --ortperf-update)",
        )  # fmt: skip

    def du(self) -> Usage:
        """How many artifacts the store holds and their bytes (temp files not counted)."""
        count = total = 0
        for path in self._artifacts():
            try:
                total += path.stat().st_size
            except OSError:
                continue
            count += 1
        return Usage(count, total)

    def __iter__(self) -> Iterator[str]:
        """The hashes of the artifacts there (names only, not verified)."""
        for path in self._artifacts():
            yield path.parent.name + path.name

    def _artifacts(self) -> Iterator[Path]:
        try:
            shards = sorted(os.scandir(self.root), key=lambda e: e.name)
        except OSError:
            return
        for shard in shards:
            if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
                continue
            try:
                entries = sorted(os.scandir(shard.path), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if _SHA256.fullmatch(shard.name + entry.name) and entry.is_file(
                    follow_symlinks=False
                ):
                    yield Path(entry.path)

    def _writable(self, sha256: str) -> Path:
        """The artifact's path, its directory made (and cleared of stale temp files)."""
        path = self.path_for(sha256)
        if self.root.exists() and not self.root.is_dir():
            raise ArtifactError(f"artifact store {self.root} is not a directory")
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise ArtifactError(
                f"artifact {sha256}: {path} is not a regular file (a link, a directory?); "
                "not replaced"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArtifactError(
                f"artifact store {self.root}: cannot make {path.parent} ({exc})"
            ) from None
        remove_stale_temps(path.parent, older_than=STALE_TEMP_S)
        return path

    @staticmethod
    def _intact(path: Path, sha256: str, size: int) -> bool:
        """Whether ``path`` is a regular file of ``size`` bytes hashing to ``sha256``."""
        try:
            with open(path, "rb") as fh:
                info = os.fstat(fh.fileno())
                if not stat.S_ISREG(info.st_mode) or info.st_size != size:
                    return False
                digest = hashlib.sha256()
                while chunk := fh.read(_CHUNK):
                    digest.update(chunk)
        except OSError:
            return False
        return digest.hexdigest() == sha256


def _check_size(size: int, what: str) -> None:
    if size > MAX_ARTIFACT_BYTES:
        raise ArtifactError(
            f"{what}: {format_bytes(size)} is more than an artifact may hold "
            f"({format_bytes(MAX_ARTIFACT_BYTES)}, protobuf's limit on a model)"
        )
