"""The records' ``from_dict``: their plain-dict form decoded with msgspec (:func:`decode`,
given to each record by :class:`Decoded`), and the optional parts of their ``to_dict``."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from pytest_ortperf.stats import Summary

R = TypeVar("R")
_DROP = object()
"""A null that stands for the field's default (the key is dropped before decoding)."""
NO_SUMMARY = Summary(0, *[math.nan] * 8)
"""The default of a derived summary field, replaced in ``__post_init__`` (msgspec decodes
a dataclass's fields whether ``init`` or not, so each needs a default)."""


@dataclass(frozen=True)
class _Plan:
    """How :func:`decode` treats a record type's fields beyond what msgspec does."""

    derived: frozenset[str]
    """Fields computed in ``__post_init__`` (their keys in a dict are figures for readers)."""
    nulls: Mapping[str, Any]
    """Field -> what a null stands for: its default (:data:`_DROP`), or NaN for a number."""
    nested: Mapping[str, tuple[Any, bool]]
    """Field -> (record type, whether a tuple of them): rebuilt by their own ``from_dict``."""


_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    hints = typing.get_type_hints(cls)
    nulls: dict[str, Any] = {}
    nested: dict[str, tuple[Any, bool]] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            nulls[f.name] = _DROP
        elif hints[f.name] is float:
            nulls[f.name] = math.nan  # a JSON writer's null for NaN
        hint = hints[f.name]
        many = typing.get_origin(hint) is tuple
        for arg in typing.get_args(hint) or (hint,):
            if isinstance(arg, type) and hasattr(arg, "from_dict"):
                nested[f.name] = (arg, many)
    derived = frozenset(f.name for f in dataclasses.fields(cls) if not f.init)
    plan = _PLANS[cls] = _Plan(derived, nulls, nested)
    return plan


def decode(cls: type[R], data: Mapping[str, Any]) -> R:
    """Rebuild a record of type ``cls`` from its ``to_dict`` form with msgspec: field types
    checked and coerced (``1`` for True, ``"2.5"`` for 2.5), absent fields given their
    defaults, keys that are no field (``kind``, figures derived for readers) ignored. A null
    stands for the default (NaN for a number without one); a nested record is rebuilt by
    its own ``from_dict``. A ValueError names the record type and the field's path."""
    plan = _PLANS.get(cls) or _plan(cls)
    if plan.derived:
        values = {k: v for k, v in data.items() if k not in plan.derived}
    else:
        values = dict(data)
    if None in values.values():
        for name, null in plan.nulls.items():
            if name in values and values[name] is None:
                if null is _DROP:
                    del values[name]
                else:
                    values[name] = null
    for name, (record_type, many) in plan.nested.items():
        value = values.get(name)
        if value is None:
            continue
        try:
            if many:
                values[name] = tuple(record_type.from_dict(v) for v in value)
            elif not value and plan.nulls.get(name) is _DROP:  # {} for "none"
                del values[name]
            else:
                values[name] = record_type.from_dict(value)
        except (ValueError, TypeError, LookupError, AttributeError) as exc:
            why = exc if isinstance(exc, ValueError) else repr(exc)  # KeyError('providers')
            raise ValueError(f"invalid {cls.__name__}: {name}: {why}") from None
    try:
        return msgspec.convert(values, cls, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(f"invalid {cls.__name__}: {exc}") from None


class Decoded:
    """A record's ``from_dict``: :func:`decode` of its ``to_dict`` form."""

    __slots__ = ()

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        return decode(cls, data)


class _ToDict(typing.Protocol):
    def to_dict(self) -> dict[str, Any]: ...


def session_dict(session: _ToDict | None) -> dict[str, Any] | None:
    """The ``session`` of a record's ``to_dict``: None where not recorded."""
    return None if session is None else session.to_dict()


def slo_dict(verdicts: Sequence[_ToDict]) -> dict[str, Any]:
    """The ``slo`` key of a record's ``to_dict``: its budgets' verdicts, none without one."""
    return {"slo": [v.to_dict() for v in verdicts]} if verdicts else {}
