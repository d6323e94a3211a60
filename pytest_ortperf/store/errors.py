"""What the store raises, and what names a store (:data:`StorePath`).

Pure Python: catching a StoreError loads no database code.
"""

from __future__ import annotations

import os

from pytest_ortperf.store.secrets import redact_url

StorePath = str | os.PathLike[str]
"""A store: an SQLite file's path or an SQLAlchemy URL."""


class StoreError(Exception):
    """The store cannot be opened, read or written; the message names the store.

    The message is masked by :func:`redact_url` (with the secrets of ``store``, when given):
    whatever a driver said, a StoreError never shows a password.
    """

    def __init__(self, message: str, *, store: StorePath | None = None) -> None:
        super().__init__(redact_url(message, store))


class UnstorableRun(StoreError):
    """The store works but cannot take this run (a field it cannot hold): writing other
    runs goes on (``ortperf sync`` sets the spool file aside)."""


class StoreUnreachable(StoreError):
    """No connection to the store's server (refused, or no answer within the connect
    timeout): the rest of the run does not try it again (it spools at once)."""
