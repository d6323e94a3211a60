"""The options that set a model's inputs (``--dim``, ``--shape``, ``--value``) of ``ortperf
profile`` and ``ortperf ab``, and ``make_feeds``' errors in their words."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_ortperf.cli.common import UsageError

if TYPE_CHECKING:
    import numpy as np

    from pytest_ortperf.measuring.feeds import InputSpec

_SIZE = re.compile(r"[0-9]+")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def dim(text: str) -> tuple[str, int]:
    """``--dim NAME=SIZE``: the size of a symbolic dim; argparse prefixes the option."""
    name, sep, size = text.partition("=")
    if not sep or not name or not _SIZE.fullmatch(size.strip()):
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE such as batch=1, got {text!r}")
    return name, int(size)


def shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``--shape INPUT=D1xD2...``: the whole shape of one input (as ``shapes=`` of
    ``ort_feeds``); argparse prefixes the option to an error."""
    name, sep, dims = text.rpartition("=")
    if not sep or not name or not dims.strip():
        raise argparse.ArgumentTypeError(
            f"expected INPUT=D1xD2... such as x=1x3x224x224, got {text!r}"
        )
    parts = [d.strip() for d in dims.split("x")]
    bad = [d for d in parts if not _SIZE.fullmatch(d)]
    if bad:
        raise argparse.ArgumentTypeError(
            f"input {name!r}: {bad[0]!r} is not a size (a whole number, 0 or more) in "
            f"{text!r}; expected INPUT=D1xD2... such as x=1x3x224x224"
        )
    return name, tuple(int(d) for d in parts)


class PinnedValue(NamedTuple):
    """``--value INPUT=V1,V2,...`` as parsed: numbers, converted to the input's dtype once
    the model is loaded (:func:`pinned_array`)."""

    name: str
    numbers: tuple[int | float, ...]
    scalar: bool


def _number(text: str) -> int | float:
    text = text.strip()
    if _INTEGER.fullmatch(text):
        return int(text)
    return float(text)  # ValueError: not a number ("1e-3", "nan" and "inf" are numbers)


def pinned_value(text: str) -> PinnedValue:
    """``--value INPUT=V`` (a scalar) or ``INPUT=V1,V2,...`` (a list): the input's value
    (as ``values=`` of ``ort_feeds``); argparse prefixes the option to an error."""
    name, sep, items = text.rpartition("=")
    if not sep or not name or not items.strip():
        raise argparse.ArgumentTypeError(
            f"expected INPUT=VALUE or INPUT=V1,V2,... such as k=3, got {text!r}"
        )
    numbers = []
    for item in items.split(","):
        try:
            numbers.append(_number(item))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"input {name!r}: {item.strip()!r} is not a number in {text!r}; expected "
                "INPUT=VALUE or INPUT=V1,V2,... such as k=3"
            ) from None
    return PinnedValue(name, tuple(numbers), scalar="," not in items)


def pinned_array(
    spec: InputSpec, pinned: PinnedValue, given_shape: tuple[int, ...] | None
) -> np.ndarray[Any, Any]:
    """``--value`` of ``spec`` as an array of its dtype
    (:func:`~pytest_ortperf.measuring.feeds.numbers_as_dtype`): shaped as ``--shape`` says,
    else as the declared shape when it is static (a scalar fills it, a list of as many
    numbers is reshaped), else a scalar or a 1-D list."""
    import numpy as np

    from pytest_ortperf.measuring.feeds import FeedError, numbers_as_dtype

    given = f"--value {pinned.name}={','.join(str(n) for n in pinned.numbers)}"
    try:
        array = numbers_as_dtype(spec, pinned.numbers)
    except FeedError as exc:
        raise UsageError(f"{given}: {exc}") from None
    declared = [d for d in spec.shape if isinstance(d, int) and d >= 0]
    static = tuple(declared) if len(declared) == len(spec.shape) else None
    target = given_shape if given_shape is not None else static
    if target is None:
        return array[0] if pinned.scalar else array
    if pinned.scalar:
        return np.full(target, array[0], dtype=array.dtype)
    if array.size == math.prod(target):
        return array.reshape(target)
    if given_shape is not None:
        dims = "x".join(str(d) for d in given_shape)
        raise UsageError(
            f"{given}: {array.size} numbers, but --shape {pinned.name}={dims} holds "
            f"{math.prod(given_shape)}"
        )
    return array  # the declared shape decides: make_feeds says what it expects


USAGE = {
    "--dim": "--dim NAME=SIZE",
    "--shape": "--shape INPUT=D1xD2...",
    "--value": "--value INPUT=V1,V2,...",
}
"""The options that set inputs, as an error that names one spells them."""

_REPR = r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"


def _name(match: re.Match[str]) -> str:
    import ast

    return str(ast.literal_eval(match.group(1)))


def cli_spelling(message: str) -> str:
    """An error of ``make_feeds`` in the words of ``ortperf profile``: ``dims=``,
    ``shapes=`` and ``values=`` become ``--dim``, ``--shape`` and ``--value``, followed by
    the usage of each option named."""
    rules: list[tuple[str, Callable[[re.Match[str]], str]]] = [
        (rf"\bdims=\{{{_REPR}: N\}}", lambda m: f"--dim {_name(m)}=SIZE"),
        (rf"\bshapes=\{{{_REPR}: \(\.\.\.\)\}}", lambda m: f"--shape {_name(m)}=D1xD2..."),
        (rf"\bvalues=\{{{_REPR}: \.\.\.\}}", lambda m: f"--value {_name(m)}=..."),
        (r"^(dims|shapes|values) names", lambda m: f"--{m.group(1)[:-1]} names"),
        (r"\b(dims|shapes|values)=", lambda m: f"--{m.group(1)[:-1]}"),
        (r"\bsmaller dims or shapes\b", lambda m: "smaller --dim or --shape sizes"),
    ]
    for pattern, spelled in rules:
        message = re.sub(pattern, spelled, message)
    named = [usage for option, usage in USAGE.items() if option in message]
    return f"{message} (usage: {', '.join(named)})" if named else message


def add_dim_and_shape(p: argparse.ArgumentParser, shape_help: str) -> None:
    p.add_argument(
        "--dim", action="append", type=dim, default=[], metavar="NAME=SIZE",
        help="size of a symbolic dim, e.g. --dim batch=1 (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--shape", action="append", type=shape, default=[], metavar="INPUT=D1xD2...",
        help=shape_help,
    )  # fmt: skip
