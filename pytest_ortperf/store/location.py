"""Where the results store is: the option's value, ``$ORTPERF_STORE`` or the default file,
resolved to a path or URL (pure Python: a run that stores nothing never imports
SQLAlchemy)."""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "ORTPERF_STORE"
"""Environment variable naming the store when no option or ini key does."""

DEFAULT_STORE = ".ortperf/results.sqlite"
"""Store used when none is configured, relative to the rootdir (or the current directory)."""


def resolve_store(value: str | None, rootdir: Path) -> str | None:
    """Where results go: a file path or SQLAlchemy URL, or None when storing is disabled.

    None or "" -> ``$ORTPERF_STORE`` (:data:`STORE_ENV`) when set, else ``DEFAULT_STORE``
    under rootdir; "none" -> disabled; a URL (``sqlite:///``, ``postgresql://``...) is
    passed through; any other path is taken relative to rootdir.
    """
    if value is None or not value.strip():
        value = os.environ.get(STORE_ENV, "")
    if not value.strip():
        return str(Path(rootdir) / DEFAULT_STORE)
    text = value.strip()
    if text.lower() == "none":
        return None
    if "://" in text:
        return text
    path = Path(text).expanduser()
    return str(path if path.is_absolute() else Path(rootdir) / path)
