"""What determines a measurement's speed, as hashes: the recipe of a baseline entry.

A :class:`Recipe` names the model's bytes (their sha256, as the session got them), the
session settings, the onnxruntime distribution and version, the custom-op libraries (their
sha256) and the feeds' recipe (dtypes, shapes, the seed and range of random inputs, the
sha256 of pinned or recorded ones). Two recipes are equal, and have the same
:attr:`Recipe.digest`, exactly when nothing of these changed; :meth:`Recipe.differences`
names what did, field by field (``session.threads: 1 -> 4``).

Settings are normalized so that equal sessions hash equal: no providers is the CPU's,
options are sorted, a dotted config entry's value is the string ORT gets, the
``intra_op_num_threads`` and ``graph_optimization_level`` options fold into ``threads``
and ``optimization`` (they override them), and options that do not touch the run
(logging, the optimized model's file, the profile's prefix) are left out.

:meth:`Recipe.to_dict` is the form kept in a baseline entry: small and reviewable, hashes
and never bytes; :meth:`Recipe.from_dict` reads it back, with a :class:`RecipeError`
naming the field at fault. Nothing here imports onnxruntime at module level, and nothing
is read but the files whose bytes are hashed (a model path, a custom-op library).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pytest_ortperf.measuring.session import ModelLike

FORMAT = 1
"""Version of :meth:`Recipe.to_dict`'s form (its ``format`` key)."""

RANDOM = "random"
"""The ``values`` of an input drawn at random (from :attr:`FeedsRecipe.seed`)."""

OPTIMIZATIONS = ("disable", "basic", "extended", "all")
"""The ``optimization`` names of ``ort_session`` (``measuring.session.OPTIMIZATION_LEVELS``)."""

_LEVEL_NAMES = {
    "ORT_DISABLE_ALL": "disable",
    "ORT_ENABLE_BASIC": "basic",
    "ORT_ENABLE_EXTENDED": "extended",
    "ORT_ENABLE_ALL": "all",
}
_LEVEL_VALUES = {0: "disable", 1: "basic", 2: "extended", 99: "all"}

NOT_TIMED_OPTIONS = frozenset(
    {
        "log_severity_level",
        "log_verbosity_level",
        "logid",
        "optimized_model_filepath",
        "profile_file_prefix",
    }
)
"""``SessionOptions`` that do not change how fast a session runs: left out of the recipe."""

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_BLOB = re.compile(r"^[0-9a-f]{40}$")
_HASH_CHUNK = 1 << 20

_T = TypeVar("_T")


class RecipeError(ValueError):
    """A recipe that cannot be made or read; the message names the field or file at fault."""


# --------------------------------------------------------------------------- hashing


def sha256_bytes(data: bytes | bytearray | memoryview) -> str:
    """The sha256 of ``data``, as 64 lowercase hex digits."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str], what: str = "file") -> str:
    """The sha256 of a file's bytes, read in chunks; a :class:`RecipeError` naming ``what``
    and the path when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise RecipeError(f"{what} {os.fspath(path)}: cannot be read to hash ({exc})") from None
    return digest.hexdigest()


def model_bytes(model: ModelLike) -> tuple[bytes, str]:
    """The model's bytes as ``ort_session`` gives them to onnxruntime (a file's bytes, the
    bytes themselves, a ``ModelProto`` serialized), and its label. ONNX protos have no map
    fields, so a proto's serialization is deterministic."""
    if isinstance(model, bytes | bytearray | memoryview):
        return bytes(model), "<bytes>"
    serialize = getattr(model, "SerializeToString", None)
    if serialize is not None:
        graph = getattr(model, "graph", None)
        return serialize(), getattr(graph, "name", "") or "<ModelProto>"
    from pytest_ortperf.measuring.session import load_model_bytes

    return load_model_bytes(model)


def array_sha256(array: Any) -> str:
    """The sha256 of an array's values in C order (its dtype and shape are not hashed:
    the recipe keeps them beside). Strings (numpy ``U``/``S`` or objects) are hashed as
    UTF-8, each with its length first, so no two lists of strings hash alike."""
    import numpy as np

    values = np.asarray(array)
    digest = hashlib.sha256()
    if values.dtype.kind in "OUS":
        for item in values.reshape(-1).tolist():
            text = item.decode("utf-8", "surrogateescape") if isinstance(item, bytes) else item
            data = str(text).encode("utf-8", "surrogateescape")
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
    else:
        digest.update(np.ascontiguousarray(values).reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


def _dtype_name(array: Any) -> str:
    kind = array.dtype.kind
    return "string" if kind in "OUS" else str(array.dtype)


# --------------------------------------------------------------------------- parts


@dataclass(frozen=True)
class InputRecipe:
    """One input of the feeds: dtype, shape, and ``values``: :data:`RANDOM` or the
    ``sha256:<hex>`` of its pinned or recorded values."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    values: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "values": self.values,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> InputRecipe:
        got = _fields(data, where, ("name", "dtype", "shape", "values"))
        shape = _list(got["shape"], f"{where}.shape")
        values = _text(got["values"], f"{where}.values")
        if values != RANDOM and not (
            values.startswith("sha256:") and _SHA256.fullmatch(values[len("sha256:") :])
        ):
            raise RecipeError(
                f"recipe field {where}.values: expected {RANDOM!r} or 'sha256:' and 64 hex "
                f"digits, got {values!r}"
            )
        return cls(
            name=_text(got["name"], f"{where}.name"),
            dtype=_text(got["dtype"], f"{where}.dtype"),
            shape=tuple(_count(d, f"{where}.shape[{i}]") for i, d in enumerate(shape)),
            values=values,
        )


@dataclass(frozen=True)
class FeedsRecipe:
    """The recipe of a test's inputs. ``inputs`` are sorted by name; ``seed``, ``low``
    and ``high`` are kept when an input is random (``ort_feeds``' arguments); ``sets``
    counts recorded input sets (a ``FeedPool``), and with several, ``recorded`` is the
    sha256 of them all (``inputs`` then describe the first)."""

    inputs: tuple[InputRecipe, ...]
    seed: int | None = None
    low: float | None = None
    high: float | None = None
    sets: int = 1
    recorded: str | None = None

    @classmethod
    def of(cls, feeds: Mapping[str, Any]) -> FeedsRecipe:
        """The recipe of feeds as ``ort_feeds`` returns them: a ``GeneratedFeeds`` (its
        random inputs described by seed and range, the pinned ones hashed), a
        ``FeedPool`` of recorded sets, or any mapping of arrays (each hashed)."""
        random = set(getattr(feeds, "random", ()))
        inputs = tuple(
            InputRecipe(
                name=str(name),
                dtype=_dtype_name(_asarray(value)),
                shape=tuple(int(d) for d in _asarray(value).shape),
                values=RANDOM if name in random else f"sha256:{array_sha256(value)}",
            )
            for name, value in sorted(feeds.items(), key=lambda item: str(item[0]))
        )
        sets = getattr(feeds, "sets", None)
        recorded = None
        if sets is not None and len(sets) > 1:
            digest = hashlib.sha256()
            for one in sets:
                for name, value in sorted(one.items(), key=lambda item: str(item[0])):
                    array = _asarray(value)
                    head = f"{name}\0{_dtype_name(array)}\0{list(array.shape)}\0"
                    digest.update(head.encode("utf-8", "surrogateescape"))
                    digest.update(bytes.fromhex(array_sha256(array)))
            recorded = digest.hexdigest()
        if not random:
            return cls(inputs, sets=len(sets) if sets else 1, recorded=recorded)
        low, high = getattr(feeds, "low", None), getattr(feeds, "high", None)
        return cls(
            inputs,
            seed=int(getattr(feeds, "seed", 0)),
            low=None if low is None else float(low),
            high=None if high is None else float(high),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": [i.to_dict() for i in self.inputs],
            "seed": self.seed,
            "low": self.low,
            "high": self.high,
            "sets": self.sets,
            "recorded": self.recorded,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "feeds") -> FeedsRecipe:
        got = _fields(data, where, ("inputs", "seed", "low", "high", "sets", "recorded"))
        inputs = _list(got["inputs"], f"{where}.inputs")
        recorded = _optional(got["recorded"], f"{where}.recorded", _text)
        if recorded is not None and not _SHA256.fullmatch(recorded):
            raise RecipeError(
                f"recipe field {where}.recorded: expected 64 hex digits, got {recorded!r}"
            )
        return cls(
            inputs=tuple(
                InputRecipe.from_dict(item, f"{where}.inputs[{i}]") for i, item in enumerate(inputs)
            ),
            seed=_optional(got["seed"], f"{where}.seed", _integer),
            low=_optional(got["low"], f"{where}.low", _number),
            high=_optional(got["high"], f"{where}.high", _number),
            sets=_count(got["sets"], f"{where}.sets", low=1),
            recorded=recorded,
        )


def _asarray(value: Any) -> Any:
    import numpy as np

    return np.asarray(value)


OptionValue = str | int | float | bool


@dataclass(frozen=True)
class SessionRecipe:
    """A session's settings, normalized (see the module): what ``ort_session`` takes
    besides the model and its custom-op libraries (which :class:`Recipe` hashes)."""

    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    optimization: str = "all"
    threads: int = 1
    spinning: bool = False
    options: tuple[tuple[str, OptionValue], ...] = ()

    def __post_init__(self) -> None:
        if self.optimization not in OPTIMIZATIONS:
            raise RecipeError(
                f"recipe field session.optimization: {self.optimization!r} is not one of "
                f"{', '.join(OPTIMIZATIONS)}"
            )

    @classmethod
    def of(
        cls,
        *,
        providers: Iterable[str] | None = None,
        optimization: str = "all",
        threads: int = 1,
        spinning: bool = False,
        options: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
    ) -> SessionRecipe:
        """The recipe of ``ort_session``'s keyword arguments (or of a ``SessionSettings``'
        fields), normalized."""
        pairs = options.items() if isinstance(options, Mapping) else (options or ())
        kept: dict[str, OptionValue] = {}
        for key, value in pairs:
            key = str(key)
            if key in NOT_TIMED_OPTIONS:
                continue
            if key == "intra_op_num_threads":
                threads = _integer(value, "session.options.intra_op_num_threads")
            elif key == "graph_optimization_level" and _level(value) is not None:
                optimization = _level(value) or optimization
            else:
                kept[key] = _option_value(key, value)
        return cls(
            providers=tuple(str(p) for p in providers) if providers else ("CPUExecutionProvider",),
            optimization=optimization,
            threads=int(threads),
            spinning=bool(spinning),
            options=tuple(sorted(kept.items())),
        )

    def keywords(self) -> dict[str, Any]:
        """``ort_session``'s keyword arguments for these settings (custom-op libraries
        aside): what rebuilds the baseline's session. An option kept by its enum's name
        (``execution_mode: "ORT_SEQUENTIAL"``) is given as that enum of the onnxruntime
        in use (imported here); a name it lacks is a :class:`RecipeError`."""
        options: dict[str, Any] = {}
        probe = None
        for key, value in self.options:
            if "." not in key and isinstance(value, str):
                if probe is None:
                    import onnxruntime

                    probe = onnxruntime.SessionOptions()
                members = getattr(type(getattr(probe, key, None)), "__members__", None)
                if members is not None:
                    if value not in members:
                        raise RecipeError(
                            f"recipe field session.options.{key}: {value!r} is not one of "
                            f"{', '.join(members)} in this onnxruntime"
                        )
                    options[key] = members[value]
                    continue
            options[key] = value
        return {
            "providers": list(self.providers),
            "optimization": self.optimization,
            "threads": self.threads,
            "spinning": self.spinning,
            "options": options,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "providers": list(self.providers),
            "optimization": self.optimization,
            "threads": self.threads,
            "spinning": self.spinning,
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "session") -> SessionRecipe:
        got = _fields(data, where, ("providers", "optimization", "threads", "spinning", "options"))
        providers = _list(got["providers"], f"{where}.providers")
        options = got["options"]
        if not isinstance(options, dict):
            raise RecipeError(
                f"recipe field {where}.options: expected an object, got {type(options).__name__}"
            )
        for key, value in options.items():
            if not isinstance(value, str | int | float) or (
                isinstance(value, float) and not math.isfinite(value)
            ):
                raise RecipeError(
                    f"recipe field {where}.options.{key}: expected a string, number or "
                    f"boolean, got {value!r}"
                )
        spinning = got["spinning"]
        if not isinstance(spinning, bool):
            raise RecipeError(
                f"recipe field {where}.spinning: expected true or false, got {spinning!r}"
            )
        return cls(
            providers=tuple(_text(p, f"{where}.providers[{i}]") for i, p in enumerate(providers)),
            optimization=_text(got["optimization"], f"{where}.optimization"),
            threads=_count(got["threads"], f"{where}.threads"),
            spinning=spinning,
            options=tuple(sorted(options.items())),
        )


def _level(value: Any) -> str | None:
    """``optimization`` for a ``graph_optimization_level`` option (an ORT enum or its
    integer), None when unknown (it then stays an option)."""
    name = getattr(value, "name", None)
    if isinstance(name, str) and name in _LEVEL_NAMES:
        return _LEVEL_NAMES[name]
    if isinstance(value, int) and not isinstance(value, bool):
        return _LEVEL_VALUES.get(value)
    return None


def _option_value(key: str, value: Any) -> OptionValue:
    """An option's value as the recipe keeps it: a dotted config entry as the string ORT
    gets (``str(value)``), an attribute's as a JSON scalar (an enum by its name)."""
    if "." in key:
        return str(value)
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RecipeError(f"recipe field session.options.{key}: {value!r} is not finite")
        return value
    name = getattr(value, "name", None)  # pybind11 enums (ExecutionMode, ...)
    if isinstance(name, str):
        return name
    raise RecipeError(
        f"recipe field session.options.{key}: {value!r} ({type(value).__name__}) is not a "
        "string, number, boolean or enum"
    )


@dataclass(frozen=True)
class CustomOpsLibrary:
    """A custom-op library: its file name (for messages; not compared) and sha256."""

    sha256: str
    name: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> CustomOpsLibrary:
        got = _fields(data, where, ("name", "sha256"))
        return cls(
            sha256=_digest(got["sha256"], f"{where}.sha256"),
            name=_text(got["name"], f"{where}.name"),
        )


# --------------------------------------------------------------------------- the recipe


@dataclass(frozen=True)
class Difference:
    """One field that differs between two recipes, in words."""

    field: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.field}: {self.before} -> {self.after}"


@dataclass(frozen=True)
class Recipe:
    """What determines a measurement's speed (see the module). ``model_name`` is for
    messages only: two recipes of the same bytes under other names are equal.
    ``model_git``, where kept, is the git blob id of the model's bytes (a function of them,
    so left out of comparisons too): where a committed model can be read back from."""

    model_sha256: str
    model_size: int
    session: SessionRecipe
    onnxruntime: str
    """The distribution and its version, ``onnxruntime==1.22.0`` (``machine``'s ``ort_build``)."""
    feeds: FeedsRecipe
    custom_ops: tuple[CustomOpsLibrary, ...] = ()
    model_name: str = field(default="", compare=False)
    model_git: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _digest(self.model_sha256, "model.sha256")
        if self.model_git:
            _git_blob(self.model_git, "model.git")
        _count(self.model_size, "model.bytes")
        if "==" not in self.onnxruntime:
            raise RecipeError(
                f"recipe field onnxruntime: expected 'distribution==version', got "
                f"{self.onnxruntime!r}"
            )

    @classmethod
    def of(
        cls,
        model: ModelLike,
        feeds: Mapping[str, Any],
        *,
        onnxruntime: str | None = None,
        providers: Iterable[str] | None = None,
        optimization: str = "all",
        threads: int = 1,
        spinning: bool = False,
        options: Mapping[str, Any] | None = None,
        custom_ops: Iterable[str | os.PathLike[str]] | None = None,
    ) -> Recipe:
        """The recipe of a model (path, bytes or ``onnx.ModelProto``) with ``ort_session``'s
        keyword arguments and ``feeds``. ``onnxruntime``: ``name==version``, default the
        installed distribution of the imported (or importable) ``onnxruntime``."""
        data, label = model_bytes(model)
        return cls(
            model_sha256=sha256_bytes(data),
            model_size=len(data),
            model_name=label,
            session=SessionRecipe.of(
                providers=providers,
                optimization=optimization,
                threads=threads,
                spinning=spinning,
                options=options,
            ),
            onnxruntime=onnxruntime or installed_onnxruntime(),
            feeds=FeedsRecipe.of(feeds),
            custom_ops=custom_ops_recipe(custom_ops or ()),
        )

    @classmethod
    def of_session(
        cls, session: Any, feeds: Mapping[str, Any], *, onnxruntime: str | None = None
    ) -> Recipe:
        """The recipe of an ``OrtSession`` (or a remote session: anything with
        ``model_bytes``, ``settings`` and ``label``) run on ``feeds``: its model's bytes as
        it got them. A remote session's onnxruntime is its worker's version."""
        settings = session.settings
        if onnxruntime is None and getattr(session, "remote", False):
            onnxruntime = f"onnxruntime=={session.version}"
        data = session.model_bytes
        return cls(
            model_sha256=sha256_bytes(data),
            model_size=len(data),
            model_name=str(getattr(session, "label", "")),
            session=SessionRecipe.of(
                providers=settings.providers,
                optimization=settings.optimization,
                threads=settings.threads,
                spinning=settings.spinning,
                options=settings.options,
            ),
            onnxruntime=onnxruntime or installed_onnxruntime(),
            feeds=FeedsRecipe.of(feeds),
            custom_ops=custom_ops_recipe(settings.custom_ops),
        )

    @property
    def ort_version(self) -> str:
        """The onnxruntime version alone (``1.22.0``)."""
        return self.onnxruntime.split("==", 1)[1]

    @property
    def digest(self) -> str:
        """The sha256 of what the recipe compares (names left out): equal recipes, and
        only they, have the same digest."""
        data = self._plain()
        data["model"].pop("name")
        data["model"].pop("git", None)
        for library in data["custom_ops"]:
            library.pop("name")
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return sha256_bytes(text.encode("utf-8"))

    def differences(self, other: Recipe) -> list[Difference]:
        """What changed from this recipe (before) to ``other`` (after), field by field,
        in a fixed order; empty when they are equal."""
        out: list[Difference] = []

        def changed(name: str, before: object, after: object) -> None:
            if before != after:
                out.append(Difference(name, _shown(before), _shown(after)))

        if self.model_sha256 != other.model_sha256:
            out.append(
                Difference(
                    "model",
                    f"sha256 {self.model_sha256[:12]} ({self.model_size:,} bytes)",
                    f"sha256 {other.model_sha256[:12]} ({other.model_size:,} bytes)",
                )
            )
        for name in ("providers", "optimization", "threads", "spinning"):
            changed(f"session.{name}", getattr(self.session, name), getattr(other.session, name))
        mine, theirs = dict(self.session.options), dict(other.session.options)
        for key in sorted(set(mine) | set(theirs)):
            changed(f"session.options.{key}", mine.get(key, _UNSET), theirs.get(key, _UNSET))
        changed("onnxruntime", self.onnxruntime, other.onnxruntime)
        if self.custom_ops != other.custom_ops:
            out.append(
                Difference("custom_ops", _libraries(self.custom_ops), _libraries(other.custom_ops))
            )
        out.extend(_feeds_differences(self.feeds, other.feeds))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The plain form kept in a baseline entry (JSON types only, no bytes), with the
        :attr:`digest` that :meth:`from_dict` checks."""
        return self._plain() | {"digest": self.digest}

    def _plain(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "model": {
                "sha256": self.model_sha256,
                "bytes": self.model_size,
                "name": self.model_name,
                **({"git": self.model_git} if self.model_git else {}),
            },
            "session": self.session.to_dict(),
            "onnxruntime": self.onnxruntime,
            "custom_ops": [c.to_dict() for c in self.custom_ops],
            "feeds": self.feeds.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Recipe:
        """A recipe from :meth:`to_dict`'s form; a :class:`RecipeError` naming the field
        that is missing, unknown or of the wrong type, or saying that the ``digest``
        does not match the rest (an entry edited by hand)."""
        got = _fields(
            data, "", ("format", "model", "session", "onnxruntime", "custom_ops", "feeds", "digest")
        )
        if got["format"] != FORMAT:
            raise RecipeError(
                f"recipe field format: {got['format']!r} is not a recipe format this version "
                f"reads ({FORMAT}); update pytest-ortperf or the baseline (--ortperf-update)"
            )
        model = _fields(got["model"], "model", ("sha256", "bytes", "name"), optional=("git",))
        libraries = _list(got["custom_ops"], "custom_ops")
        recipe = cls(
            model_sha256=_digest(model["sha256"], "model.sha256"),
            model_size=_count(model["bytes"], "model.bytes"),
            model_name=_text(model["name"], "model.name"),
            model_git=_git_blob(model.get("git", ""), "model.git") if "git" in model else "",
            session=SessionRecipe.from_dict(got["session"]),
            onnxruntime=_text(got["onnxruntime"], "onnxruntime"),
            custom_ops=tuple(
                CustomOpsLibrary.from_dict(c, f"custom_ops[{i}]") for i, c in enumerate(libraries)
            ),
            feeds=FeedsRecipe.from_dict(got["feeds"]),
        )
        stated = _digest(got["digest"], "digest")
        if stated != recipe.digest:
            raise RecipeError(
                f"recipe field digest: {stated[:12]} does not match the recipe's fields "
                f"({recipe.digest[:12]}); the entry was edited by hand? Take the baseline "
                "again with --ortperf-update"
            )
        return recipe


def custom_ops_recipe(libraries: Iterable[str | os.PathLike[str]]) -> tuple[CustomOpsLibrary, ...]:
    """The custom-op libraries' hashes, in registration order; a :class:`RecipeError`
    names a library that cannot be read."""
    return tuple(
        CustomOpsLibrary(sha256_file(p, "custom ops library"), Path(os.fspath(p)).name)
        for p in libraries
    )


def installed_onnxruntime() -> str:
    """``name==version`` of the onnxruntime in use: its distribution (``onnxruntime-gpu``
    and others, :data:`pytest_ortperf.machine.ORT_DISTRIBUTIONS`) where installed
    metadata says, else ``onnxruntime==<its __version__>``."""
    import onnxruntime

    from pytest_ortperf.machine import _ort_build

    version = str(onnxruntime.__version__)
    return _ort_build(version) or f"onnxruntime=={version}"


# --------------------------------------------------------------------------- internals

_UNSET = object()


def _shown(value: object) -> str:
    if value is _UNSET or value is None:
        return "(not set)"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, str | bool) else str(value)


def _libraries(libraries: tuple[CustomOpsLibrary, ...]) -> str:
    if not libraries:
        return "(none)"
    return ", ".join(f"{c.name or '?'} (sha256 {c.sha256[:12]})" for c in libraries)


def _feeds_differences(before: FeedsRecipe, after: FeedsRecipe) -> list[Difference]:
    out = []
    mine = {i.name: i for i in before.inputs}
    theirs = {i.name: i for i in after.inputs}
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name), theirs.get(name)
        if a is None or b is None:
            out.append(
                Difference(
                    f"feeds.inputs.{name}",
                    "(none)" if a is None else "present",
                    "(none)" if b is None else "present",
                )
            )
            continue
        if a.dtype != b.dtype:
            out.append(Difference(f"feeds.inputs.{name}.dtype", a.dtype, b.dtype))
        if a.shape != b.shape:
            out.append(
                Difference(f"feeds.inputs.{name}.shape", str(list(a.shape)), str(list(b.shape)))
            )
        if a.values != b.values:
            out.append(
                Difference(f"feeds.inputs.{name}.values", _values(a.values), _values(b.values))
            )
    for name in ("seed", "low", "high", "sets"):
        x, y = getattr(before, name), getattr(after, name)
        if x != y:
            out.append(Difference(f"feeds.{name}", _shown(x), _shown(y)))
    if before.recorded != after.recorded:
        out.append(Difference("feeds.recorded", _values(before.recorded), _values(after.recorded)))
    return out


def _values(values: str | None) -> str:
    if values is None:
        return "(none)"
    return values if values == RANDOM else f"sha256 {values.removeprefix('sha256:')[:12]}"


def _fields(
    data: Any, where: str, names: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``data``'s fields, exactly ``names`` and any of ``optional``: a :class:`RecipeError`
    names what is missing or unknown."""
    label = f"recipe field {where}" if where else "recipe"
    if not isinstance(data, dict):
        raise RecipeError(f"{label}: expected an object, got {type(data).__name__}")
    missing = [n for n in names if n not in data]
    unknown = sorted(set(data) - set(names) - set(optional), key=str)
    if missing or unknown:
        parts = [f"missing {', '.join(missing)}"] if missing else []
        parts += [f"unknown {', '.join(map(str, unknown))}"] if unknown else []
        raise RecipeError(f"{label}: {'; '.join(parts)} (fields: {', '.join(names + optional)})")
    return data


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RecipeError(f"recipe field {where}: expected a string, got {value!r}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise RecipeError(f"recipe field {where}: expected a list, got {value!r}")
    return value


def _integer(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecipeError(f"recipe field {where}: expected an integer, got {value!r}")
    return value


def _count(value: Any, where: str, low: int = 0) -> int:
    number = _integer(value, where)
    if number < low:
        raise RecipeError(f"recipe field {where}: expected an integer >= {low}, got {number}")
    return number


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RecipeError(f"recipe field {where}: expected a finite number, got {value!r}")
    return float(value)


def _digest(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise RecipeError(f"recipe field {where}: expected 64 lowercase hex digits, got {value!r}")
    return value


def _git_blob(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _GIT_BLOB.fullmatch(value):
        raise RecipeError(
            f"recipe field {where}: expected a git blob id (40 lowercase hex digits), got {value!r}"
        )
    return value


def _optional(value: Any, where: str, read: Callable[[Any, str], _T]) -> _T | None:
    return None if value is None else read(value, where)
