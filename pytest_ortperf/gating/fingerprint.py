"""Fingerprints: the machine and software a gated figure was measured with.

A baseline entry is judged only against a current measurement whose fingerprint matches on
the keys its metric depends on: :data:`RATIO_KEYS` for a ratio (an interleaved comparison
cancels machine-wide drift, but not a change of kernels, ISA, ORT build or session
settings), :data:`LATENCY_KEYS` (all of :data:`KEYS`) for an absolute latency. A team may
let some keys differ on purpose (ini ``ortperf_fingerprint_ignore``, see
:func:`check_allowed`).

A key absent from a baseline's fingerprint (written by an older version) is not checked;
:func:`unchecked` names those keys. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SESSION_KEYS = ("providers", "threads", "spinning", "optimization")
"""Keys taken from the session (``SessionInfo.to_dict()``); the others from the environment."""

KEYS = (
    "cpu_model",
    "isa",
    "effective_cpus",
    "ort_version",
    "ort_build",
    "providers",
    "threads",
    "spinning",
    "optimization",
    "python_version",
    "numpy_version",
    "onnx_version",
)
"""Every key of a fingerprint, in the order verdicts list them."""

RATIO_KEYS = tuple(
    k
    for k in KEYS
    if k not in ("effective_cpus", "python_version", "numpy_version", "onnx_version")
)
"""Keys a ratio entry must match by default: what changes which kernels run."""

LATENCY_KEYS = KEYS
"""Keys an absolute latency entry must match by default: everything."""

_LIST_KEYS = frozenset({"isa", "providers"})
_SET_KEYS = frozenset({"isa"})  # order carries no meaning; providers' order is priority


def _as_list(key: str, value: Any) -> list[Any] | None:
    """A stored list value as a list (``isa`` may also be stored as one space-separated
    string, and is sorted); None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        items: list[Any] = value.split()
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    else:  # a hand-edited scalar: keep it comparable rather than fail
        items = [value]
    return sorted({str(v) for v in items}) if key in _SET_KEYS else items


def fingerprint_of(environment: Mapping[str, Any], session: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint of a figure measured in ``environment`` (``machine.collect_environment()``
    or a baseline entry's ``environment``) with ``session`` (``SessionInfo.to_dict()`` or an
    entry's session settings). Keys that their source lacks are left out, so an entry
    written before a key existed leaves that key unchecked; a key present as None stays."""
    out: dict[str, Any] = {}
    for key in KEYS:
        source = session if key in SESSION_KEYS else environment
        if key in source:
            value = source[key]
            out[key] = _as_list(key, value) if key in _LIST_KEYS else value
    return out


def _comparable(key: str, value: Any) -> Any:
    if key in _SET_KEYS:
        items = _as_list(key, value)
        return None if items is None else tuple(items)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def _show(value: Any) -> str:
    return repr(list(value) if isinstance(value, tuple) else value)


@dataclass(frozen=True)
class Difference:
    """One fingerprint key whose value differs between baseline and current."""

    key: str
    baseline: Any
    current: Any

    def describe(self) -> str:
        """``cpu_model: 'Xeon' -> 'EPYC'``; ISA changes as the flags lost and gained
        (``isa: -avx512f +amx_tile``)."""
        if self.key in _SET_KEYS and self.baseline is not None and self.current is not None:
            before = set(_as_list(self.key, self.baseline) or ())
            after = set(_as_list(self.key, self.current) or ())
            changes = [f"-{f}" for f in sorted(before - after)]
            changes += [f"+{f}" for f in sorted(after - before)]
            return f"{self.key}: {' '.join(changes)}"
        return f"{self.key}: {_show(self.baseline)} -> {_show(self.current)}"


def differences(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    keys: Sequence[str],
    allowed: Collection[str] = (),
) -> list[Difference]:
    """The keys (of ``keys``, in that order) whose values differ, skipping ``allowed`` ones
    and those absent from ``baseline``. None matches None; a baseline value that is None or
    absent now differs."""
    out = []
    for key in keys:
        if key in allowed or key not in baseline:
            continue
        before, now = baseline[key], current.get(key)
        if _comparable(key, before) != _comparable(key, now):
            out.append(Difference(key, before, now))
    return out


def unchecked(baseline: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    """The keys (of ``keys``) that ``baseline`` lacks, so :func:`differences` skipped them."""
    return [key for key in keys if key not in baseline]


def check_allowed(names: Iterable[str]) -> list[str]:
    """Validated fingerprint keys for the ini option ``ortperf_fingerprint_ignore``: items
    may hold several names separated by commas or whitespace; duplicates are dropped.
    Raises ValueError naming an unknown key and listing the valid ones."""
    out: list[str] = []
    for item in names:
        for name in re.split(r"[,\s]+", item.strip()):
            if not name or name in out:
                continue
            if name not in KEYS:
                raise ValueError(
                    f"ortperf_fingerprint_ignore: unknown fingerprint key {name!r}; "
                    f"valid keys: {', '.join(KEYS)}"
                )
            out.append(name)
    return out
