"""Immutable result records, their plain-dict form, and the ``user_properties`` keys.

Records travel as plain dicts (``to_dict``) through ``user_properties`` so that pytest-xdist
workers can hand them to the controller; ``from_dict`` rebuilds them. The store and the
reports take the typed records; the gate and the baseline files read the ``to_dict`` form.

Import them from here; the modules are:

- ``verdicts``: :class:`Outcome`, :class:`Verdict`, :class:`Judgement`, :class:`SloVerdict`;
- ``measurements``: :class:`SessionInfo`, :class:`LatencyResult`, :class:`Comparison`
  (with :class:`OutputDiff`), :class:`MemoryResult`, :class:`ColdStartResult`;
- ``tails``: :class:`PerCallResult`, :class:`ThroughputResult` (with
  :class:`ThroughputLevel`);
- ``codec``: ``from_dict`` of them all, with msgspec (``to_dict`` is each record's own: its
  dict form adds figures for readers, in a fixed key order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_ortperf.results.measurements import (
    COLD_START_FIGURES,
    ColdStartResult,
    Comparison,
    LatencyResult,
    MemoryResult,
    OutputDiff,
    SessionInfo,
)
from pytest_ortperf.results.tails import (
    MIN_TAIL_CALLS,
    TAIL_QUANTILES,
    PerCallResult,
    ThroughputLevel,
    ThroughputResult,
)
from pytest_ortperf.results.verdicts import (
    SLO_OUTCOMES,
    Judgement,
    Outcome,
    SloVerdict,
    Verdict,
)

__all__ = [
    "ATTRIBUTION_PROPERTY",
    "COLD_START_FIGURES",
    "GATED",
    "MIN_TAIL_CALLS",
    "OP_SHARES",
    "PROCESSES",
    "PROFILE_PROPERTY",
    "RECORD_TYPES",
    "SLO_OUTCOMES",
    "TAIL_QUANTILES",
    "USER_PROPERTY",
    "VERDICTS_PROPERTY",
    "ColdStartResult",
    "Comparison",
    "Judgement",
    "LatencyResult",
    "MemoryResult",
    "Outcome",
    "OutputDiff",
    "PerCallResult",
    "Record",
    "SessionInfo",
    "SloVerdict",
    "ThroughputLevel",
    "ThroughputResult",
    "Verdict",
    "figure_of",
    "record_from_dict",
]

# The ``user_properties`` entries a test's report carries (all of them live here, so the
# xdist controller reads them without importing the measuring code).
USER_PROPERTY = "ortperf"
"""Entry that carries one record (``to_dict`` form)."""
VERDICTS_PROPERTY = "ortperf-verdicts"
"""Entry that carries the verdicts of one measurement (:meth:`Judgement.to_dict`)."""
PROFILE_PROPERTY = "ortperf-profile"
"""Entry that carries a per-op profile summary (``{test, name, by_op: [...]}``)."""
ATTRIBUTION_PROPERTY = "ortperf-attribution"
"""Entry that carries the op types a regression's attribution found moving
(``{test, name, lines: [...]}``, the lines its failure message shows)."""
GATED = "gated"
"""Key set in a record's dict when it came from ``latency``/``compare`` (baseline-able)."""
OP_SHARES = "op_shares"
"""Key of a compare record's dict (and baseline entry) holding each arm's op-type shares."""
PROCESSES = "processes"
"""Key of a record's dict (and baseline entry) taken in several processes
(``--ortperf-update-processes``): how many of its ``runs`` each process took."""


Record = (
    LatencyResult | Comparison | MemoryResult | ColdStartResult | PerCallResult | ThroughputResult
)


RECORD_TYPES: dict[str, type[Record]] = {
    record_type.kind: record_type
    for record_type in (
        LatencyResult,
        Comparison,
        MemoryResult,
        ColdStartResult,
        PerCallResult,
        ThroughputResult,
    )
}
"""Every record type by its ``kind``: what :func:`record_from_dict` rebuilds and the store
keeps."""


def record_from_dict(data: Mapping[str, Any]) -> Record:
    """Rebuild a record from its ``to_dict`` form (kind-dispatched)."""
    kind = data.get("kind")
    record_type = RECORD_TYPES.get(str(kind))
    if record_type is not None:
        return record_type.from_dict(data)
    raise ValueError(f"unknown ortperf record kind {kind!r}")


def figure_of(row: Mapping[str, Any]) -> float | None:
    """The figure of a measurement (its dict form, or a row of the store): a comparison's
    ratio, else the median; None where it is missing or not a finite number (a memory
    record, a damaged row)."""
    value: Any = row.get("ratio") if row.get("kind") == "compare" else row.get("median")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
