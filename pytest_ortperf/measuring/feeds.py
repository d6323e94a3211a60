"""Random inputs generated from a session's signature."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from pytest_ortperf.text import did_you_mean

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
"""numpy has no bfloat16: such inputs are arrays of ``ml_dtypes.bfloat16`` (see
:mod:`pytest_ortperf.measuring.ortvalues` for how they reach onnxruntime)."""

ORT_TYPE_TO_DTYPE: dict[str, np.dtype[Any]] = {
    "tensor(float)": np.dtype(np.float32),
    "tensor(float16)": np.dtype(np.float16),
    "tensor(bfloat16)": BFLOAT16,
    "tensor(double)": np.dtype(np.float64),
    "tensor(int8)": np.dtype(np.int8),
    "tensor(int16)": np.dtype(np.int16),
    "tensor(int32)": np.dtype(np.int32),
    "tensor(int64)": np.dtype(np.int64),
    "tensor(uint8)": np.dtype(np.uint8),
    "tensor(uint16)": np.dtype(np.uint16),
    "tensor(uint32)": np.dtype(np.uint32),
    "tensor(uint64)": np.dtype(np.uint64),
    "tensor(bool)": np.dtype(np.bool_),
    "tensor(string)": np.dtype(np.object_),
}

Dim = int | str | None

MAX_FEED_BYTES = 2**31
"""The largest input ``ort_feeds`` generates: 2 GiB (a string counts
:data:`STRING_ITEM_BYTES`). Larger inputs are refused before any memory is allocated; pass
them with ``values=``."""

STRING_ITEM_BYTES = 64
"""What one generated string is counted as: a pointer and a small Python ``str``."""


class FeedError(ValueError):
    """Inputs could not be generated or do not match the model's signature."""


class GeneratedFeeds(dict[str, np.ndarray[Any, Any]]):
    """What :func:`make_feeds` returns: a plain ``dict`` of the inputs that also remembers
    which values it drew at random, from which seed and range, so that an error of
    onnxruntime on them can say so (:class:`pytest_ortperf.measuring.calls.InputsRejected`)."""

    seed: int
    low: float | None
    high: float | None

    def __init__(
        self,
        feeds: Mapping[str, np.ndarray[Any, Any]],
        *,
        generated: Iterable[str] = (),
        seed: int = 0,
        low: float | None = None,
        high: float | None = None,
    ) -> None:
        super().__init__(feeds)
        self._generated = {name: self[name] for name in generated}
        self.seed, self.low, self.high = seed, low, high

    @property
    def random(self) -> tuple[str, ...]:
        """The inputs that still hold the random values drawn for them (one replaced since,
        ``feeds["sr"] = ...``, is no longer listed)."""
        return tuple(n for n, a in getattr(self, "_generated", {}).items() if self.get(n) is a)

    def describe_random(self) -> str:
        """``"idx (int64 in [0, 10)), x (float32 in [-1, 1))"``: the random inputs and
        the ranges they were drawn from."""
        parts = []
        for name in self.random:
            dtype = self[name].dtype
            parts.append(f"{name} ({_range_text(dtype, self.low, self.high)})")
        return ", ".join(parts)


def _range_text(dtype: np.dtype[Any], low: float | None, high: float | None) -> str:
    """The values :func:`random_array` draws for a dtype, in words."""
    if _is_float(dtype):
        lo = -1.0 if low is None else float(low)
        hi = 1.0 if high is None else float(high)
        return f"{dtype} in [{lo:g}, {hi:g})"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo_i = max(0 if low is None else int(low), int(info.min))
        hi_i = min(10 if high is None else int(high), int(info.max) + 1)
        return f"{dtype} in [{lo_i}, {hi_i})"
    if dtype.kind == "b":
        return "random booleans"
    return "random strings"


@dataclass(frozen=True)
class InputSpec:
    """One model input as the session declares it."""

    name: str
    type: str
    shape: tuple[Dim, ...]

    @property
    def dtype(self) -> np.dtype[Any]:
        try:
            return ORT_TYPE_TO_DTYPE[self.type]
        except KeyError:
            raise FeedError(
                f"input {self.name!r} has type {self.type}, which ort_feeds cannot generate; "
                f"pass it with values={{{self.name!r}: ...}}"
            ) from None


def input_specs(session: Any) -> list[InputSpec]:
    """The input specs of an ``InferenceSession`` (or anything with ``get_inputs``)."""
    return [InputSpec(i.name, i.type, tuple(i.shape)) for i in session.get_inputs()]


def _is_symbolic(dim: Dim) -> bool:
    return not isinstance(dim, int) or dim < 0


def _is_size(value: object) -> bool:
    """A non-negative integer (``True`` is an int in Python, but no size)."""
    return (
        isinstance(value, int | np.integer)
        and not isinstance(value, bool | np.bool_)
        and bool(value >= 0)
    )


def symbolic_dims(specs: Iterable[InputSpec]) -> list[str]:
    """The names of the symbolic dims of some inputs, sorted (what ``dims=`` can set)."""
    return sorted({d for s in specs for d in s.shape if isinstance(d, str)})


def resolve_shape(
    spec: InputSpec,
    dims: Mapping[str, int],
    shapes: Mapping[str, Sequence[int]],
) -> tuple[int, ...]:
    """The concrete shape of one input: ``shapes[name]`` first, else dims resolved by name."""
    if spec.name in shapes:
        given = tuple(shapes[spec.name])
        if not all(_is_size(d) for d in given):
            raise FeedError(
                f"input {spec.name!r}: shapes= gives {list(given)}; expected non-negative integers"
            )
        shape = tuple(int(d) for d in given)
        check_shape(spec, shape)
        return shape
    out = []
    for axis, dim in enumerate(spec.shape):
        if not _is_symbolic(dim):
            out.append(int(dim))  # type: ignore[arg-type]
        elif isinstance(dim, str) and dim in dims:
            size = dims[dim]
            if not _is_size(size):
                raise FeedError(
                    f"input {spec.name!r}: axis {axis} is symbolic dim {dim!r}, which dims= "
                    f"sets to {size!r}; expected a non-negative integer"
                )
            out.append(int(size))
        else:
            what = f"symbolic dim {dim!r}" if isinstance(dim, str) else "a dim with no name"
            hint = (
                f"pass dims={{{dim!r}: N}}"
                if isinstance(dim, str)
                else f"pass shapes={{{spec.name!r}: (...)}}"
            )
            raise FeedError(
                f"input {spec.name!r}: axis {axis} is {what} (declared shape "
                f"{list(spec.shape)}); {hint}"
            )
    return tuple(out)


def check_shape(spec: InputSpec, shape: Sequence[int]) -> None:
    """Raise :class:`FeedError` when ``shape`` contradicts the declared static dims."""
    if len(shape) != len(spec.shape):
        raise FeedError(
            f"input {spec.name!r} expects rank {len(spec.shape)} (declared shape "
            f"{list(spec.shape)}), got shape {list(shape)}"
        )
    for axis, (declared, got) in enumerate(zip(spec.shape, shape, strict=True)):
        if not _is_symbolic(declared) and declared != got:
            raise FeedError(
                f"input {spec.name!r}: axis {axis} must be {declared} (declared shape "
                f"{list(spec.shape)}), got {got}"
            )


def random_array(
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    rng: np.random.Generator,
    *,
    low: float | None = None,
    high: float | None = None,
) -> np.ndarray[Any, Any]:
    """Random values of a dtype: floats in [low, high) (default [-1, 1)), integers in
    [low, high) (default [0, 10): integers are often indices), booleans, strings.

    Generated in the target dtype (float16 through float32), after checking the range and
    that the array is at most :data:`MAX_FEED_BYTES`: a wrong size or range is a
    :class:`FeedError`, never numpy's allocation error.
    """
    check_size(dtype, shape)
    if _is_float(dtype):
        lo = -1.0 if low is None else float(low)
        hi = 1.0 if high is None else float(high)
        if lo > hi:
            note = "" if low is not None and high is not None else " (floats default to [-1, 1))"
            raise FeedError(f"low={lo:g} is above high={hi:g}{note}")
        limit = float(ml_dtypes.finfo(dtype).max)  # type: ignore[no-untyped-call]
        if not (abs(lo) <= limit and abs(hi) <= limit and hi - lo <= limit):
            raise FeedError(f"range [{lo:g}, {hi:g}) does not fit dtype {dtype}")
        work = np.float32 if dtype.itemsize <= 4 else np.float64
        values = rng.random(size=shape, dtype=work)
        values *= hi - lo
        values += lo
        return values.astype(dtype, copy=False)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo_i = 0 if low is None else int(low)
        hi_i = 10 if high is None else int(high)
        lo_i, hi_i = max(lo_i, int(info.min)), min(hi_i, int(info.max) + 1)
        if hi_i <= lo_i:
            raise FeedError(f"empty integer range [{low}, {high}) for dtype {dtype}")
        return rng.integers(lo_i, hi_i, size=shape, dtype=dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape, dtype=np.bool_)
    if dtype.kind == "O":
        words = rng.integers(0, 1000, size=shape)
        return (
            np.vectorize(lambda w: f"s{w}", otypes=[object])(words)
            if words.size
            else (np.empty(shape, dtype=object))
        )
    raise FeedError(f"cannot generate random values of dtype {dtype}")


def _is_float(dtype: np.dtype[Any]) -> bool:
    """numpy floats, and bfloat16 (whose numpy kind is ``V``)."""
    return dtype.kind == "f" or dtype == BFLOAT16


def check_size(dtype: np.dtype[Any], shape: Sequence[int]) -> None:
    """Raise :class:`FeedError` when an array of ``shape`` would exceed
    :data:`MAX_FEED_BYTES` (checked with Python integers: no overflow, nothing allocated)."""
    count = math.prod(shape)
    nbytes = count * (STRING_ITEM_BYTES if dtype.kind == "O" else dtype.itemsize)
    if nbytes > MAX_FEED_BYTES or any(d > MAX_FEED_BYTES for d in shape):
        raise FeedError(
            f"shape {list(shape)} of dtype {dtype} is {count:,} elements "
            f"({nbytes / 2**30:,.1f} GiB), more than ort_feeds generates (at most "
            f"{MAX_FEED_BYTES / 2**30:g} GiB per input); use smaller dims or shapes, or pass "
            "the input with values="
        )


def _check_bound(name: str, value: object) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool | np.bool_)
        or not isinstance(value, int | float | np.integer | np.floating)
        or not math.isfinite(value)
    ):
        raise FeedError(f"{name}= must be a finite number, got {value!r}")


def check_feed_names(
    input_names: Sequence[str], feeds: Mapping[str, Any], model: str = "the model"
) -> None:
    """Raise :class:`FeedError` when ``feeds`` lack an input or name one the model does
    not have (a misspelled name would otherwise be dropped without a word)."""
    missing = [n for n in input_names if n not in feeds]
    extra = sorted(set(feeds) - set(input_names), key=str)
    if missing or extra:
        # "feeds lack input(s) [...] of model ..." as runapi has always said it
        problems = [f"lack input(s) {missing} of {model}"] if missing else []
        owner = "it" if missing else model
        problems += [f"name input(s) {extra} that {owner} does not have"] if extra else []
        raise FeedError(
            f"feeds {' and '.join(problems)}; its inputs are {list(input_names)}"
            + did_you_mean(extra, missing or input_names)
        )


def make_feeds(
    specs: Sequence[InputSpec],
    *,
    dims: Mapping[str, int] | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
    values: Mapping[str, Any] | None = None,
    low: float | None = None,
    high: float | None = None,
) -> GeneratedFeeds:
    """Inputs for every spec: ``values`` pinned as given (checked), the rest random.

    Deterministic for a given ``seed``. Every error names the input and what was expected;
    a name in ``dims``, ``shapes`` or ``values`` that the model does not have is an error
    too, with the closest known names. The result is a ``dict`` (a
    :class:`GeneratedFeeds`) that remembers which inputs are random.
    """
    dims = dict(dims or {})
    shapes = dict(shapes or {})
    values = dict(values or {})
    known = {s.name for s in specs}
    for kind, mapping in (("values", values), ("shapes", shapes)):
        unknown = sorted(set(mapping) - known, key=str)
        if unknown:
            raise FeedError(
                f"{kind} names unknown input(s) {unknown}; the model's inputs are "
                f"{sorted(known)}" + did_you_mean(unknown, sorted(known))
            )
    names = symbolic_dims(specs)
    unknown = sorted(set(dims) - set(names), key=str)
    if unknown:
        have = f"its symbolic dims are {names}" if names else "it has no symbolic dims"
        raise FeedError(
            f"dims names dim(s) {unknown} that no input of the model has; {have}"
            + did_you_mean(unknown, names)
        )
    _check_bound("low", low)
    _check_bound("high", high)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray[Any, Any]] = {}
    for spec in specs:
        if spec.name in values:
            feeds[spec.name] = check_value(spec, values[spec.name])
        else:
            shape = resolve_shape(spec, dims, shapes)
            try:
                feeds[spec.name] = random_array(spec.dtype, shape, rng, low=low, high=high)
            except FeedError as exc:
                raise FeedError(f"input {spec.name!r}: {exc}") from None
    random = [s.name for s in specs if s.name not in values]
    return GeneratedFeeds(feeds, generated=random, seed=seed, low=low, high=high)


def check_dtype(spec: InputSpec, dtype: np.dtype[Any]) -> None:
    """Raise :class:`FeedError` when values of ``dtype`` cannot feed ``spec`` (strings
    take numpy strings or objects; every other type its own dtype only)."""
    expected = spec.dtype
    if expected.kind == "O":
        if dtype.kind not in "OUS":
            raise FeedError(f"input {spec.name!r} expects strings, got dtype {dtype}")
    elif dtype != expected:
        hint = (
            " (numpy has no bfloat16: pass values.astype(ml_dtypes.bfloat16))"
            if expected == BFLOAT16
            else ""
        )
        raise FeedError(
            f"input {spec.name!r} expects dtype {expected} ({spec.type}), got {dtype}" + hint
        )


def check_value(spec: InputSpec, value: Any) -> np.ndarray[Any, Any]:
    """A pinned input as an array of the declared dtype and a compatible shape."""
    array = np.asarray(value)
    check_dtype(spec, array.dtype)
    if spec.dtype.kind == "O":
        array = array.astype(object)
    check_shape(spec, array.shape)
    return np.require(array, requirements="C")


def numbers_as_dtype(spec: InputSpec, numbers: Sequence[int | float]) -> np.ndarray[Any, Any]:
    """``numbers`` as a 1-D array of ``spec``'s dtype (``ortperf profile --value``): a
    :class:`FeedError` for an input that takes no numbers, or a number its dtype cannot
    hold (beyond a float's range, not 0 or 1 for a bool, not a whole number in an integer's
    range); NaN and infinities are floats' own."""
    dtype = ORT_TYPE_TO_DTYPE.get(spec.type)
    if dtype is None or dtype.kind not in "biuf":
        raise FeedError(f"input {spec.name!r} has type {spec.type}, which takes no numbers")
    for n in numbers:
        if dtype.kind == "f":
            ok = not math.isfinite(n) or math.isfinite(float(np.asarray(n, dtype=dtype)))
            why = f"beyond the range of {dtype}"
        elif dtype.kind == "b":
            ok, why = n in (0, 1), "not 0 or 1 (a boolean)"
        else:
            info = np.iinfo(dtype)
            whole = isinstance(n, int) or n.is_integer()
            ok = whole and info.min <= n <= info.max
            why = f"not a whole number from {info.min} to {info.max}"
        if not ok:
            raise FeedError(f"{n} is {why}: input {spec.name!r} is {spec.type}")
    return np.asarray(numbers, dtype=dtype)
