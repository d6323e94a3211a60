"""Stored values back to Python: JSON columns, samples, times, frames and records.

The inverse of :mod:`pytest_ortperf.store.write`'s rows. A value that cannot be decoded is
a StoreError naming the store, the row (``measurement 12 (run 3)``) and the column.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa

from pytest_ortperf.results import Comparison, LatencyResult, Record, record_from_dict
from pytest_ortperf.store.errors import StoreError
from pytest_ortperf.store.schema import _HEAD_COLUMNS, decode_samples
from pytest_ortperf.store.secrets import redact_url

if TYPE_CHECKING:
    import pandas as pd

_JSON_COLUMNS = ("providers", "session", "extra")


def _json_text(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A JSON column fetched as text: ``_frame`` decodes it once per distinct value."""
    return sa.type_coerce(column, sa.Text).label(column.key)


def _where(run_id: Any = None, measurement_id: Any = None) -> str:
    """A stored row in words: ``measurement 12 (run 3)``, ``run 3``."""
    if measurement_id is not None:
        return f"measurement {measurement_id}" + ("" if run_id is None else f" (run {run_id})")
    return "a row" if run_id is None else f"run {run_id}"


def _damaged(label: str, where: str, column: str, why: str) -> StoreError:
    return StoreError(f"{label}: {where}, column {column}: {why}; the store is damaged there")


class _BadValue(Exception):
    """A stored value that cannot be decoded: its index and what went wrong."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(why)
        self.index = index
        self.why = why


def _decode_json(values: Sequence[Any]) -> list[Any]:
    """JSON texts decoded (each distinct one once); raises _BadValue at the first invalid."""
    memo: dict[str, Any] = {}
    out = []
    for index, value in enumerate(values):
        if isinstance(value, str):  # drivers that decode JSON themselves hand over objects
            if value not in memo:
                try:
                    memo[value] = json.loads(value)
                except ValueError as exc:  # JSONDecodeError, or nesting too deep
                    raise _BadValue(index, f"not valid JSON ({exc})") from None
            value = memo[value]
        elif isinstance(value, bytes | bytearray | memoryview):
            raise _BadValue(index, "binary data where JSON text belongs")
        out.append(value)
    return out


def _json_value(value: Any, label: str, where: str, column: str) -> Any:
    try:
        return _decode_json([value])[0]
    except _BadValue as exc:
        raise _damaged(label, where, column, exc.why) from None


def _samples(blob: Any, label: str, where: str, column: str) -> tuple[float, ...]:
    """:func:`decode_samples` of a stored blob; a damaged one is a StoreError naming it."""
    if blob is not None and not isinstance(blob, bytes | bytearray | memoryview):
        why = f"not samples written by pytest-ortperf (a {type(blob).__name__}, not a blob)"
        raise _damaged(label, where, column, why)
    try:
        return decode_samples(None if blob is None else bytes(blob))
    except (zlib.error, ValueError) as exc:
        why = f"not samples written by pytest-ortperf ({type(exc).__name__}: {exc})"
        raise _damaged(label, where, column, why) from None


_TIME_RANGE = (-9_223_372_036.0, 9_223_372_036.0)
"""Epoch seconds that a pandas timestamp (nanoseconds in 64 bits) can hold."""


def _seconds(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and _TIME_RANGE[0] < value < _TIME_RANGE[1]
    )


def _frame(rows: Sequence[Any], columns: Sequence[str], label: str) -> pd.DataFrame:
    """Rows as a frame: JSON columns decoded, ``started``/``finished`` as UTC timestamps.
    A value that cannot be decoded is a StoreError naming the store, the row (its
    ``run_id``/``measurement_id`` columns) and the column."""
    import pandas as pd

    def where(index: int) -> str:
        row = rows[index]
        ids = {col: row[i] for i, col in enumerate(columns) if col.endswith("_id")}
        return _where(ids.get("run_id"), ids.get("measurement_id"))

    data = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
    decoded: dict[str, list[Any]] = {}
    for col, values in zip(columns, data, strict=True):
        if col in _JSON_COLUMNS:
            try:
                decoded[col] = _decode_json(values)
            except _BadValue as exc:
                raise _damaged(label, where(exc.index), col, exc.why) from None
        else:
            decoded[col] = list(values)
    frame = pd.DataFrame(decoded, columns=list(columns))
    for col in ("started", "finished"):
        if col in frame.columns:
            times = frame[col].to_numpy()
            low, high = _TIME_RANGE
            numbers = times.dtype.kind in "iuf"  # no text, no None, no bool
            if not (numbers and np.all((times > low) & (times < high))):
                for index, value in enumerate(decoded[col]):  # which row, and why
                    if not _seconds(value):
                        why = f"not a time in seconds since the epoch ({value!r})"
                        raise _damaged(label, where(index), col, why)
            frame[col] = pd.to_datetime(frame[col], unit="s", utc=True)
    if "command_line" in frame.columns:  # stores written before credentials were masked
        lines = frame["command_line"].tolist()
        masked = {v: redact_url(v) for v in set(lines) if isinstance(v, str)}
        frame["command_line"] = [masked[v] if isinstance(v, str) else v for v in lines]
    return frame


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)  # SQLite stores NaN as NULL


def _record_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``to_dict`` form of the record a ``measurements`` row holds (what ``from_dict``
    reads: summaries are derived from the samples and left out). ``row`` has its JSON
    columns and samples decoded."""
    extra = row["extra"] or {}
    head = {key: row[key] for key in _HEAD_COLUMNS}
    if row["kind"] == LatencyResult.kind:
        return {
            **extra,  # the preemption counts ({} in rows stored before them)
            **head,
            "samples": row["samples"],
            "calls_per_block": row["calls_per_block"],
            "session": row["session"],
        }
    if row["kind"] == Comparison.kind:
        return {
            **head,
            "reference": {**extra["reference"], "samples": row["ref_samples"]},
            "candidate": {**extra["candidate"], "samples": row["samples"]},
            "block_ratios": extra["block_ratios"],
            **{key: _number(row[key]) for key in ("ratio", "low", "high", "confidence")},
            "output_diffs": extra["output_diffs"],
        }
    return {**extra, **head}


def _record(row: sa.RowMapping, label: str) -> Record:
    """The record a ``measurements`` row holds; a damaged row is a StoreError naming it."""
    where = _where(row["run_id"], row["id"])
    decoded = {str(key): value for key, value in row.items()}
    for col in ("session", "extra"):
        decoded[col] = _json_value(row[col], label, where, col)
    for col in ("samples", "ref_samples"):
        decoded[col] = _samples(row[col], label, where, col)
    try:
        return record_from_dict(_record_dict(decoded))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        why = f"cannot rebuild its {row['kind']} record ({type(exc).__name__}: {exc})"
        raise _damaged(label, where, "extra", why) from None
