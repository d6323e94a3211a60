"""Where a latency's artifacts are kept and whether unchanged latencies are measured
(``--ortperf-artifacts``, ``--ortperf-skip-unchanged``; :mod:`pytest_ortperf.recorder.beside`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

STORE = "store"
"""The ``ortperf_artifacts`` value that keeps artifacts in the results store."""


class ArtifactWarning(UserWarning):
    """An artifact that could not be kept: the baseline is taken, its later checks fall
    back to today's modes."""


class Artifacts(Protocol):
    """What the directory and the SQL artifact stores both do."""

    def put(self, data: bytes | bytearray | memoryview, *, sha256: str | None = None) -> str: ...
    def get(self, sha256: str, *, size: int | None = None) -> bytes: ...


@dataclass(frozen=True)
class BesideSettings:
    """Where artifacts are kept and whether unchanged latencies are measured."""

    artifacts: str | None = None
    """``--ortperf-artifacts`` / ini ``ortperf_artifacts``: a directory, or ``store``
    (None: ``$ORTPERF_ARTIFACTS``, else ``.ortperf/artifacts`` under the rootdir)."""
    rootdir: Path = Path(".")
    results_store: str | None = None
    """The results store (a path or URL; None: storing disabled), for ``store``."""
    skip_unchanged: bool = False

    def store(self) -> Artifacts:
        """The artifact store; an :class:`~pytest_ortperf.store.artifacts.ArtifactError`
        when ``store`` is asked for and no results store is kept."""
        from pytest_ortperf.store.artifacts import ArtifactError, ArtifactStore, resolve_artifacts

        if (self.artifacts or "").strip().lower() == STORE:
            if self.results_store is None:
                raise ArtifactError(
                    "ortperf_artifacts = store, but no results store is kept "
                    "(--ortperf-store=none): name a directory instead"
                )
            from pytest_ortperf.store.artifacts_sql import SqlArtifactStore

            return SqlArtifactStore(self.results_store)
        return ArtifactStore(resolve_artifacts(self.artifacts, self.rootdir))
