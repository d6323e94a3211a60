"""Recorded inputs: feeds loaded from files and checked against the model's signature.

``ort_feeds(session, from_path=PATH)`` reads, by what ``PATH`` is:

- a folder holding ``test_data_set_*`` folders (the layout of the ONNX model zoo and
  ``onnxruntime_perf_test``): one input set per ``test_data_set_N`` (in the order of N);
- one ``test_data_set_N`` folder (or any folder of ``input_*.pb`` files): one set;
- an ``.npz`` file: one set, an array per input name;
- an ``.npy`` file, or an ``input_N.pb`` file: one array, for a model with one input;
- a list of any of these: one set each.

Each ``input_N.pb`` is a serialized ``onnx.TensorProto`` (read with
``onnx.numpy_helper.to_array``); its ``name`` says which input it is, or, when empty, its
index ``N`` in the model's inputs. Every set is checked like pinned ``values=``: names,
dtypes and shapes against the model, with an error that names the file at fault. An
``.npy`` (or each array of an ``.npz``) is checked from its header *before* it is read:
names, dtype and shape against the model's inputs, and at most
:data:`~pytest_ortperf.measuring.feeds.MAX_FEED_BYTES` (2 GiB) per array, so a small file that
declares a huge array (or a deflated ``.npz`` that inflates to one) allocates nothing.
Pickled (object) arrays are refused; a damaged or truncated file is a
:class:`~pytest_ortperf.measuring.feeds.FeedError` naming it.

One set comes back as a plain ``dict``. Several come back as a :class:`FeedPool`: a
``dict`` of the first set (so anything that takes feeds takes it) that also holds every
set in ``.sets``. ``ortperf.latency`` and ``ortperf.compare`` rotate a pool's sets through
the timed calls, one set per call in turn (both arms of a comparison in the same order),
so caches and data-dependent kernels (TopK, NMS, early exits) do not see one input only;
the rotation costs one ``next()`` on a cycle per call (well under a microsecond). Outputs
are checked, and ``ort_binding``, ``profile`` and ``memory`` run, on the first set.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from pytest_ortperf.measuring.feeds import (
    MAX_FEED_BYTES,
    FeedError,
    InputSpec,
    check_dtype,
    check_shape,
    check_value,
)

PathLike = str | os.PathLike[str]
DATA_SET = re.compile(r"test_data_set_(\d+)$")
INPUT_FILE = re.compile(r"input_(\d+)\.pb$")
PB_OVERHEAD = 2**20
"""What an ``input_N.pb`` may hold beside its data (name, dims, type) within the bound."""


class FeedPool(dict[str, np.ndarray[Any, Any]]):
    """Several recorded input sets: a ``dict`` of the first, every set in :attr:`sets`
    and where each came from in :attr:`sources`."""

    def __init__(
        self, sets: Sequence[Mapping[str, np.ndarray[Any, Any]]], sources: Sequence[str]
    ) -> None:
        if not sets:
            raise FeedError("a feed pool needs at least one input set")
        super().__init__(sets[0])
        self.sets: tuple[dict[str, np.ndarray[Any, Any]], ...] = tuple(dict(s) for s in sets)
        self.sources: tuple[str, ...] = tuple(sources)

    def __repr__(self) -> str:
        return f"FeedPool({len(self.sets)} sets from {', '.join(self.sources)})"


def rotating(calls: Sequence[Callable[[], Any]]) -> Callable[[], Any]:
    """One call that runs ``calls`` in turn, one per call, round and round."""
    if len(calls) == 1:
        return calls[0]
    following = itertools.cycle(calls).__next__

    def call() -> Any:
        return following()()

    return call


def _numbered(paths: Iterable[Path], pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    found = []
    for path in paths:
        match = pattern.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def _read_tensor(path: Path) -> tuple[str, np.ndarray[Any, Any]]:
    import onnx
    from onnx import numpy_helper

    tensor = onnx.TensorProto()
    try:
        size = path.stat().st_size
        if size > MAX_FEED_BYTES + PB_OVERHEAD:
            raise FeedError(
                f"{path}: {size / 2**30:,.1f} GiB, more than a recorded input may hold "
                f"({MAX_FEED_BYTES / 2**30:g} GiB); nothing was read"
            )
        tensor.ParseFromString(path.read_bytes())
        array = numpy_helper.to_array(tensor)
    except FeedError:
        raise
    except Exception as exc:  # protobuf's DecodeError, onnx's own errors
        raise FeedError(f"{path}: not a serialized onnx TensorProto ({exc})") from None
    return tensor.name, array


def _check_names(
    specs: Sequence[InputSpec], found: Mapping[str, Path], where: Path, model: str
) -> None:
    """The input names found (each with its file) are exactly the model's."""
    names = [s.name for s in specs]
    missing = [n for n in names if n not in found]
    extra = sorted(set(found) - set(names))
    if extra:
        files = ", ".join(f"{n!r} ({found[n]})" for n in extra)
        raise FeedError(
            f"{where}: names input(s) {files} that {model} does not have; its inputs are {names}"
        )
    if missing:
        raise FeedError(f"{where}: lacks input(s) {missing} of {model}; its inputs are {names}")


def _checked(
    specs: Sequence[InputSpec], values: Mapping[str, tuple[Any, Path]], where: Path, model: str
) -> dict[str, np.ndarray[Any, Any]]:
    """Values (each with the file it came from) checked against the model's inputs."""
    _check_names(specs, {n: path for n, (_, path) in values.items()}, where, model)
    out = {}
    for spec in specs:
        value, path = values[spec.name]
        try:
            out[spec.name] = check_value(spec, value)
        except FeedError as exc:
            raise FeedError(f"{path}: {exc}") from None
    return out


def _data_set(specs: Sequence[InputSpec], folder: Path, model: str) -> dict[str, Any]:
    files = _numbered(folder.iterdir(), INPUT_FILE)
    if not files:
        raise FeedError(f"{folder}: holds no input_N.pb files (nor test_data_set_N folders)")
    values: dict[str, tuple[Any, Path]] = {}
    for index, path in files:
        name, array = _read_tensor(path)
        if not name:
            if index >= len(specs):
                raise FeedError(
                    f"{path}: an unnamed tensor is matched by its index {index}, but {model} "
                    f"has {len(specs)} input(s)"
                )
            name = specs[index].name
        if name in values:
            raise FeedError(f"{path}: input {name!r} is given again (also {values[name][1]})")
        values[name] = (array, path)
    return _checked(specs, values, folder, model)


def _one_input(specs: Sequence[InputSpec], path: Path, model: str) -> str:
    if len(specs) != 1:
        raise FeedError(
            f"{path}: one array, but {model} has {len(specs)} inputs "
            f"{[s.name for s in specs]}; use an .npz file or a test_data_set folder"
        )
    return specs[0].name


DAMAGED = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error)
"""What reading a damaged or truncated .npy/.npz raises (OSError covers a missing file)."""


def _header(stream: IO[bytes], what: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype an .npy stream declares, read from its header alone; a
    :class:`FeedError` naming ``what`` when it declares more than ``MAX_FEED_BYTES`` or
    pickled objects."""
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = npy.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = npy.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except DAMAGED as exc:
        raise FeedError(f"{what}: not a readable .npy array ({exc})") from None
    if dtype.hasobject:
        raise FeedError(f"{what}: holds pickled Python objects, which are not read")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_FEED_BYTES:
        raise FeedError(
            f"{what}: declares shape {list(shape)} of {dtype}, {nbytes / 2**30:,.1f} GiB, more "
            f"than a recorded input may hold ({MAX_FEED_BYTES / 2**30:g} GiB); nothing was read"
        )
    return tuple(shape), dtype


def _read(stream: IO[bytes], what: str) -> np.ndarray[Any, Any]:
    """The array of an .npy stream whose header was checked."""
    from numpy.lib import format as npy

    try:
        return npy.read_array(stream, allow_pickle=False)
    except DAMAGED as exc:
        raise FeedError(f"{what}: damaged or truncated .npy data ({exc})") from None


def _fits(spec: InputSpec | None, header: tuple[tuple[int, ...], np.dtype[Any]], what: str) -> None:
    if spec is None:
        return
    shape, dtype = header
    try:
        check_dtype(spec, dtype)
        check_shape(spec, shape)
    except FeedError as exc:
        raise FeedError(f"{what}: {exc}") from None


def _npy(path: Path, spec: InputSpec | None) -> np.ndarray[Any, Any]:
    """One .npy file's array, its header checked against ``spec`` first."""
    try:
        with path.open("rb") as stream:
            _fits(spec, _header(stream, str(path)), str(path))
            stream.seek(0)
            return _read(stream, str(path))
    except OSError as exc:
        raise FeedError(f"{path}: cannot read ({exc})") from None


def _npz(path: Path, specs: Sequence[InputSpec] | None, model: str) -> dict[str, Any]:
    """An .npz file's arrays by name: names, then every header checked against ``specs``
    (when given) before any array is read."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = {
                info.filename.removesuffix(".npy"): info
                for info in archive.infolist()
                if not info.is_dir()
            }
            by_name = {s.name: s for s in specs or ()}
            if specs is not None:
                _check_names(specs, dict.fromkeys(members, path), path, model)
            for name, info in members.items():
                with archive.open(info) as stream:
                    _fits(by_name.get(name), _header(stream, f"{path} [{name}]"), str(path))
            out = {}
            for name, info in members.items():
                with archive.open(info) as stream:
                    out[name] = _read(stream, f"{path} [{name}]")
            return out
    except FeedError:
        raise
    except DAMAGED as exc:
        raise FeedError(f"{path}: not a readable .npz file ({type(exc).__name__}: {exc})") from None


def read_npz(path: PathLike) -> dict[str, np.ndarray[Any, Any]]:
    """The arrays of an .npz file by name, for a model whose inputs are not at hand (``ortperf
    ab --feeds``): every header checked against the 2 GiB bound before anything is read;
    a :class:`FeedError` naming the file otherwise (an .npy holds no input names)."""
    where = Path(os.fspath(path))
    if not where.is_file():
        raise FeedError(f"{where}: no such file" if not where.exists() else f"{where}: not a file")
    if where.suffix.lower() != ".npz":
        raise FeedError(
            f"{where}: give an .npz file, one array per input name "
            "(numpy.savez(path, name=array)); an .npy holds a single unnamed array"
        )
    return _npz(where, None, "the model")


def _file(specs: Sequence[InputSpec], path: Path, model: str) -> dict[str, Any]:
    suffix = path.suffix.lower()
    if suffix == ".npz":
        values = {n: (a, path) for n, a in _npz(path, specs, model).items()}
        return _checked(specs, values, path, model)
    if suffix == ".npy":
        name = _one_input(specs, path, model)
        array = _npy(path, next(s for s in specs if s.name == name))
        return _checked(specs, {name: (array, path)}, path, model)
    if suffix == ".pb":
        name, array = _read_tensor(path)
        return _checked(specs, {name or _one_input(specs, path, model): (array, path)}, path, model)
    raise FeedError(
        f"{path}: cannot read inputs from a {suffix or 'suffixless'} file; give a "
        "test_data_set folder (input_N.pb files), an .npz, an .npy or an input_N.pb"
    )


def _sets(specs: Sequence[InputSpec], path: Path, model: str) -> list[tuple[dict[str, Any], str]]:
    if not path.exists():
        raise FeedError(f"recorded inputs not found: {path}")
    if path.is_dir():
        sets = _numbered((p for p in path.iterdir() if p.is_dir()), DATA_SET)
        if sets:
            return [(_data_set(specs, folder, model), str(folder)) for _, folder in sets]
        return [(_data_set(specs, path, model), str(path))]
    if not path.is_file():  # a FIFO or a device would block or never end
        raise FeedError(f"{path}: not a regular file")
    return [(_file(specs, path, model), str(path))]


def load_feeds(
    specs: Sequence[InputSpec], source: PathLike | Sequence[PathLike], *, model: str = "the model"
) -> dict[str, np.ndarray[Any, Any]]:
    """Recorded inputs from ``source`` (see the module's docstring), checked against
    ``specs``; a :class:`FeedPool` when there are several sets. Raises :class:`FeedError`
    naming the file or folder at fault."""
    paths = [source] if isinstance(source, str | os.PathLike) else list(source)
    if not paths:
        raise FeedError("from_path= names no file or folder")
    found = [s for p in paths for s in _sets(specs, Path(os.fspath(p)), model)]
    if len(found) == 1:
        return found[0][0]
    return FeedPool([s for s, _ in found], [where for _, where in found])


def write_data_set(folder: PathLike, feeds: Mapping[str, Any]) -> Path:
    """Write ``feeds`` as ``input_N.pb`` files (named TensorProtos, in the given order)
    in ``folder``, created if needed: the layout :func:`load_feeds` reads."""
    from onnx import numpy_helper

    out = Path(os.fspath(folder))
    out.mkdir(parents=True, exist_ok=True)
    for index, (name, value) in enumerate(feeds.items()):
        tensor = numpy_helper.from_array(np.asarray(value), name)
        (out / f"input_{index}.pb").write_bytes(tensor.SerializeToString())
    return out
