"""The spool: runs the store could not take, kept in local files until it can.

A CI run whose database server is down, unreachable or refusing writes must not lose its
results. :func:`spool_run` writes the whole run (its uid, times, git state, environment,
records and profiles) to one JSON file, atomically, under the spool directory; the next
``--ortperf`` run against the same store, or ``ortperf sync``, writes it with
:func:`sync` and removes the file. Every run carries the uid made when it started
(``runs.uid``): a run that reached the store before a failure, or that two syncs write at
once, is stored once.

A spooled run names the store it was meant for by its label (credentials masked): a
sync writes only the runs meant for the store it writes to.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ortperf import store as results_store
from pytest_ortperf.files import write_atomic
from pytest_ortperf.results import Record, record_from_dict
from pytest_ortperf.store import StoreError, StorePath, redact_url, store_label

SPOOL_ENV = "ORTPERF_SPOOL"
"""Environment variable naming the spool directory."""

DEFAULT_SPOOL = ".ortperf/spool"
"""The spool directory relative to the rootdir, when ``$ORTPERF_SPOOL`` is not set."""

FORMAT = 1
"""Version of the spool file's format (its ``format`` key)."""

_PREFIX, _SUFFIX = "run-", ".json"


class SpoolError(Exception):
    """A spool file that cannot be read or written (the message names it)."""


@dataclass(frozen=True)
class SpooledRun:
    """One run as :func:`~pytest_ortperf.store.save_run` takes it, and the store it was
    meant for (its label, credentials masked)."""

    uid: str
    store: str
    started: float
    finished: float
    command_line: str
    git: Mapping[str, Any]
    environment: Mapping[str, Any]
    records: Sequence[Record]
    profiles: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "uid": self.uid,
            "store": self.store,
            "started": self.started,
            "finished": self.finished,
            "command_line": self.command_line,
            "git": dict(self.git),
            "environment": dict(self.environment),
            "interrupted": self.interrupted,
            "records": [record.to_dict() for record in self.records],
            "profiles": [
                {"test": test, "name": name, "by_op": [dict(row) for row in rows]}
                for (test, name), rows in self.profiles.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpooledRun:
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, this version reads {FORMAT}")
        return cls(
            uid=str(data["uid"]),
            store=str(data["store"]),
            started=float(data["started"]),
            finished=float(data["finished"]),
            command_line=str(data["command_line"]),
            git=dict(data["git"]),
            environment=dict(data["environment"]),
            records=[record_from_dict(record) for record in data["records"]],
            profiles={(str(p["test"]), str(p["name"])): list(p["by_op"]) for p in data["profiles"]},
            interrupted=bool(data.get("interrupted", False)),
        )

    def save(self, store: StorePath) -> int:
        """Write this run to ``store`` (once: see ``save_run``'s uid); its run id there."""
        return results_store.save_run(
            store,
            started=self.started,
            finished=self.finished,
            command_line=self.command_line,
            git=self.git,
            environment=self.environment,
            records=self.records,
            profiles=self.profiles,
            interrupted=self.interrupted,
            uid=self.uid,
        )


def resolve_spool(value: str | None, rootdir: Path) -> Path:
    """The spool directory: ``value``, else ``$ORTPERF_SPOOL``, else ``DEFAULT_SPOOL``
    under ``rootdir`` (relative paths taken from ``rootdir``)."""
    text = (value or os.environ.get(SPOOL_ENV, "")).strip() or DEFAULT_SPOOL
    path = Path(text).expanduser()
    return path if path.is_absolute() else rootdir / path


def spool_path(directory: Path, uid: str) -> Path:
    return directory / f"{_PREFIX}{uid}{_SUFFIX}"


def spool_run(directory: Path, run: SpooledRun) -> Path:
    """Write ``run`` to its file in ``directory`` atomically; raises SpoolError."""
    path = spool_path(directory, run.uid)
    try:
        text = json.dumps(run.to_dict(), sort_keys=True)
        write_atomic(path, text + "\n")
    except (OSError, TypeError, ValueError) as exc:
        raise SpoolError(f"{path}: cannot spool the run ({exc})") from None
    return path


def pending(directory: Path) -> list[Path]:
    """The spool files in ``directory``, oldest first (none when it does not exist)."""
    try:
        found = [p for p in directory.iterdir() if p.name.startswith(_PREFIX)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise SpoolError(f"{directory}: cannot list the spool ({exc.strerror or exc})") from None
    files = [p for p in found if p.name.endswith(_SUFFIX)]

    def age(path: Path) -> tuple[float, str]:
        try:
            return path.stat().st_mtime, path.name
        except OSError:
            return 0.0, path.name

    return sorted(files, key=age)


def load(path: Path) -> SpooledRun:
    """The run of a spool file; a damaged file is a SpoolError naming it (and the line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpoolError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        where = f"{path}:{line}" if line else str(path)
        raise SpoolError(f"{where}: not a spooled run: invalid JSON ({exc})") from None
    try:
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object expected, found {type(data).__name__}")
        return SpooledRun.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SpoolError(f"{path}: not a spooled run ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class SyncResult:
    """What :func:`sync` did: runs written (spool file, run id), files left for another
    store (file, that store), damaged files (file, why), and the store's error that
    stopped it (None when every run meant for the store was written)."""

    written: list[tuple[Path, int]]
    other_store: list[tuple[Path, str]]
    damaged: list[tuple[Path, str]]
    error: str | None = None


def sync(store: StorePath, directory: Path, *, any_store: bool = False) -> SyncResult:
    """Write every spooled run meant for ``store`` (every one, with ``any_store``) to it,
    oldest first, removing each file once its run is stored. The first store error stops
    it (the files stay for the next try). Damaged files are reported and kept."""
    label = store_label(store)
    written: list[tuple[Path, int]] = []
    other: list[tuple[Path, str]] = []
    damaged: list[tuple[Path, str]] = []
    for path in pending(directory):
        try:
            run = load(path)
        except SpoolError as exc:
            damaged.append((path, str(exc)))
            continue
        if run.store != label and not any_store:
            other.append((path, run.store))
            continue
        try:
            run_id = run.save(store)
        except StoreError as exc:
            return SyncResult(written, other, damaged, redact_url(str(exc), store))
        path.unlink(missing_ok=True)
        written.append((path, run_id))
    return SyncResult(written, other, damaged)
