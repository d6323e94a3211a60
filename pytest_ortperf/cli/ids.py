"""Id shortening: measurement ids cut to fit a table's first column and still tell apart."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_ortperf.reports.terminal import ELLIPSIS, shorten_left
from pytest_ortperf.text import escape_control


def _shared_length(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _shared_head(ids: Sequence[str]) -> int:
    """Length of the longest prefix all ``ids`` share that ends at a ``/`` or ``::`` and
    leaves each of them something."""
    common = ids[0] if ids else ""
    for other in ids[1:]:
        common = common[: _shared_length(common, other)]

    def boundary(text: str) -> int:  # the end of the last separator in text, else 0
        return max(text.rfind("/") + 1, text.rfind("::") + 2 if "::" in text else 0)

    cut = boundary(common)
    while cut and any(len(i) <= cut for i in ids):
        cut = boundary(common[: cut - 1])
    return cut


def shorten_ids(ids: Sequence[str], budget: int) -> list[str]:
    """Measurement ids (escaped) that fit in ``budget`` columns and keep what tells them
    apart: the directory or module all of them share goes first (as ``...``), then each id
    too long is cut from the left, keeping its end (test, parameters, name); ids that would
    then read alike keep their head too, the middle elided."""
    ids = [escape_control(i) for i in ids]
    budget = max(budget, len(ELLIPSIS) + 4)
    if all(len(i) <= budget for i in ids):
        return ids
    head = _shared_head(ids) if len(set(ids)) > 1 else 0
    if head > len(ELLIPSIS):
        ids = [ELLIPSIS + i[head:] for i in ids]
    ends = [shorten_left(i, budget) for i in ids]
    seen: dict[str, set[str]] = {}
    for full, end in zip(ids, ends, strict=True):
        seen.setdefault(end, set()).add(full)
    keep = budget - len(ELLIPSIS)
    out = []
    for full, end in zip(ids, ends, strict=True):
        alike = seen[end] - {full}
        if not alike:
            out.append(end)
            continue
        # Keep the head up to a few characters past where it differs from the others.
        differs = max(_shared_length(full, other) for other in alike)
        head = max(keep // 2, min(keep - 4, differs + 6))
        out.append(full[:head] + ELLIPSIS + full[len(full) - (keep - head) :])
    return out


def fit_first_column(headers: Sequence[str], rows: list[list[str]], width: int) -> list[list[str]]:
    """``rows`` with their first column (measurement ids) shortened by :func:`shorten_ids`
    to what the other columns leave of ``width``."""
    if not rows:
        return rows
    others = sum(
        max(len(escape_control(h)), *(len(escape_control(r[i])) for r in rows))
        for i, h in enumerate(headers)
        if i
    )
    budget = width - others - 2 * (len(headers) - 1)
    ids = shorten_ids([r[0] for r in rows], max(budget, len(headers[0])))
    return [[short, *r[1:]] for short, r in zip(ids, rows, strict=True)]
