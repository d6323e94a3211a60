"""A thin wrapper around ``onnxruntime.InferenceSession`` that remembers its settings."""

from __future__ import annotations

import collections
import dataclasses
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import onnx
import onnxruntime as ort

from pytest_ortperf.measuring.feeds import check_feed_names
from pytest_ortperf.measuring.ortvalues import run_plain
from pytest_ortperf.measuring.providers import device_for, install_hint
from pytest_ortperf.results import SessionInfo

if TYPE_CHECKING:
    from typing import Unpack

OPTIMIZATION_LEVELS: dict[str, ort.GraphOptimizationLevel] = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}

ModelLike = str | os.PathLike[str] | bytes | onnx.ModelProto


class ProviderUnavailable(RuntimeError):
    """A requested execution provider is not available in this onnxruntime build."""

    def __init__(self, provider: str, available: Iterable[str]) -> None:
        self.provider = provider
        self.available = tuple(available)
        super().__init__(
            f"execution provider {provider!r} is not available in onnxruntime "
            f"{ort.__version__} ({install_hint(provider)}); available: "
            f"{', '.join(self.available)}"
        )


class CustomOpsError(RuntimeError):
    """A custom-op library exists but onnxruntime could not load or register it."""


class SessionKeywords(TypedDict, total=False):
    """The keyword arguments that make a session's :class:`SessionSettings`, as
    ``ort_session``, :meth:`OrtSession.create` and ``RemoteEnvironment.session`` take them
    (their defaults: :meth:`SessionSettings.of`)."""

    providers: Iterable[str] | None
    optimization: str
    threads: int
    spinning: bool
    options: Mapping[str, Any] | None
    custom_ops: Iterable[str | os.PathLike[str]] | None


@dataclass(frozen=True)
class SessionSettings:
    """Everything used to build a session besides the model."""

    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    optimization: str = "all"
    threads: int = 1
    spinning: bool = False
    options: tuple[tuple[str, Any], ...] = ()
    custom_ops: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.optimization not in OPTIMIZATION_LEVELS:
            raise ValueError(
                f"optimization={self.optimization!r} is not one of {', '.join(OPTIMIZATION_LEVELS)}"
            )
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0 (0: onnxruntime's default), got {self.threads}")

    @classmethod
    def of(
        cls,
        *,
        providers: Iterable[str] | None = None,
        optimization: str = "all",
        threads: int = 1,
        spinning: bool = False,
        options: Mapping[str, Any] | None = None,
        custom_ops: Iterable[str | os.PathLike[str]] | None = None,
    ) -> SessionSettings:
        """The settings ``ort_session``'s keyword arguments ask for (no providers: the
        CPU's), validated."""
        return cls(
            providers=tuple(providers) if providers else ("CPUExecutionProvider",),
            optimization=optimization,
            threads=threads,
            spinning=spinning,
            options=tuple(sorted((options or {}).items())),
            custom_ops=tuple(os.fspath(p) for p in custom_ops or ()),
        )

    def keywords(self) -> SessionKeywords:
        """These settings as the keyword arguments that make them (:meth:`of` of them
        gives them back): what builds the same session elsewhere, e.g. in a worker."""
        return SessionKeywords(
            providers=self.providers,
            optimization=self.optimization,
            threads=self.threads,
            spinning=self.spinning,
            options=dict(self.options),
            custom_ops=self.custom_ops,
        )

    def replace(self, **changes: Any) -> SessionSettings:
        """A copy with some fields changed; ``options`` are merged, not replaced."""
        extra = changes.pop("options", None)
        if extra:
            merged = dict(self.options)
            merged.update(extra)
            changes["options"] = tuple(sorted(merged.items()))
        return dataclasses.replace(self, **changes)


class Configured(Protocol):
    """A session that remembers its :class:`SessionSettings` (local or remote)."""

    @property
    def settings(self) -> SessionSettings: ...


def watches_cpu(*sessions: Configured) -> bool:
    """Whether the engine may tell preempted blocks by the calling thread's CPU time: only
    where ORT computes on that thread, i.e. every session (local, or remote in a worker)
    runs on the CPU provider alone with one intra-op thread and no spinning. Elsewhere the
    thread mostly waits (for the intra-op pool, or a device), so its CPU time says nothing
    of the work's and every block is kept."""
    return all(
        s.settings.threads == 1
        and not s.settings.spinning
        and set(s.settings.providers) == {"CPUExecutionProvider"}
        and dict(s.settings.options).get("intra_op_num_threads", 1) == 1
        for s in sessions
    )


def load_model_bytes(model: ModelLike) -> tuple[bytes, str]:
    """Serialized model and a short label for reports (file name or graph name)."""
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString(), model.graph.name or "<ModelProto>"
    if isinstance(model, bytes | bytearray):
        return bytes(model), "<bytes>"
    path = Path(os.fspath(model))
    if path.is_dir():
        raise IsADirectoryError(f"ONNX model path is a directory, not a model file: {path}")
    if not path.exists():
        raise FileNotFoundError(f"ONNX model file not found: {path}")
    if not path.is_file():
        raise OSError(f"ONNX model path is not a regular file: {path}")
    return path.read_bytes(), path.name


def make_session_options(settings: SessionSettings) -> ort.SessionOptions:
    """``SessionOptions`` for the settings.

    Keys of ``settings.options`` that name a ``SessionOptions`` attribute are set as
    attributes; any other key is a session config entry (``session.xxx``).
    """
    so = ort.SessionOptions()
    so.graph_optimization_level = OPTIMIZATION_LEVELS[settings.optimization]
    so.intra_op_num_threads = settings.threads
    so.inter_op_num_threads = 1 if settings.threads == 1 else 0
    so.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if settings.spinning else "0"
    )
    so.add_session_config_entry(
        "session.inter_op.allow_spinning", "1" if settings.spinning else "0"
    )
    for library in settings.custom_ops:
        if not Path(library).is_file():
            raise FileNotFoundError(f"custom ops library not found: {library}")
        try:
            so.register_custom_ops_library(str(library))
        except Exception as exc:  # ORT raises its own Fail type, or RuntimeError
            message = str(exc).strip() or type(exc).__name__
            raise CustomOpsError(
                f"onnxruntime {ort.__version__} could not load custom ops library {library}: "
                f"{message}"
            ) from exc
    for key, value in settings.options:
        if hasattr(so, key) and not key.startswith("_"):
            setattr(so, key, value)
        elif "." in key:  # config entries are dotted: session.*, ep.*, optimization.*
            so.add_session_config_entry(key, str(value))
        else:
            raise ValueError(
                f"options key {key!r} is neither a SessionOptions attribute nor a config "
                "entry (config entries are dotted, such as 'session.intra_op.allow_spinning')"
            )
    return so


def check_providers(providers: Iterable[str]) -> None:
    """Raise :class:`ProviderUnavailable` for the first provider this build lacks."""
    available = ort.get_available_providers()
    known = ort.get_all_providers()
    for provider in providers:
        if provider not in known:
            raise ValueError(
                f"unknown execution provider {provider!r}; onnxruntime knows {', '.join(known)}"
            )
        if provider not in available:
            raise ProviderUnavailable(provider, available)


class OrtSession:
    """An ``InferenceSession`` (``.sess``) with the settings and model it was built from."""

    def __init__(self, model_bytes: bytes, settings: SessionSettings, label: str) -> None:
        check_providers(settings.providers)
        self.model_bytes = model_bytes
        self.settings = settings
        self.label = label
        options = make_session_options(settings)
        try:
            self.sess = ort.InferenceSession(
                model_bytes, sess_options=options, providers=list(settings.providers)
            )
        except Exception as exc:  # ORT raises its own Fail/InvalidGraph/... types
            raise RuntimeError(f"onnxruntime could not load model {label}: {exc}") from exc
        self._histogram: dict[str, int] | None = None

    @classmethod
    def create(
        cls,
        model: ModelLike,
        *,
        name: str | None = None,
        **keywords: Unpack[SessionKeywords],
    ) -> OrtSession:
        model_bytes, label = load_model_bytes(model)
        return cls(model_bytes, SessionSettings.of(**keywords), name or label)

    def derive(self, **changes: Any) -> OrtSession:
        """A new session on the same model with some settings changed (options merged)."""
        return OrtSession(self.model_bytes, self.settings.replace(**changes), self.label)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.sess.get_inputs()]

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.sess.get_outputs()]

    @property
    def device(self) -> str:
        """The device of this session's tensors: ``cuda`` for CUDA or TensorRT, ``dml``,
        ``cann``, else ``cpu`` (:func:`pytest_ortperf.measuring.providers.device_for`)."""
        return device_for(self.sess.get_providers())

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        """All outputs for ``feeds``, which must name exactly the model's inputs
        (bfloat16 as ``ml_dtypes.bfloat16`` arrays,
        see :mod:`pytest_ortperf.measuring.ortvalues`)."""
        check_feed_names(self.input_names, feeds, f"model {self.label}")
        return run_plain(self.sess, feeds)

    def optimized_model(self) -> onnx.ModelProto:
        """The graph as ORT optimized it for these settings (a fresh session saves it)."""
        with tempfile.TemporaryDirectory(prefix="ortperf-opt-") as tmp:
            path = Path(tmp) / "optimized.onnx"
            settings = self.settings.replace(
                options={"optimized_model_filepath": str(path), "log_severity_level": 3}
            )
            so = make_session_options(settings)
            ort.InferenceSession(self.model_bytes, so, providers=list(settings.providers))
            return onnx.load(str(path), load_external_data=False)

    def op_histogram(self) -> dict[str, int]:
        """Op-type counts of the ORT-optimized graph (``FusedMatMul``: 1, ...)."""
        if self._histogram is None:
            counts = collections.Counter(n.op_type for n in self.optimized_model().graph.node)
            self._histogram = dict(sorted(counts.items()))
        return dict(self._histogram)

    def info(self, *, with_histogram: bool = False) -> SessionInfo:
        """The record of this session attached to results. ``providers`` are those the
        session really uses (ORT may append CPU or drop one it could not load), not the
        requested ``settings.providers``."""
        return SessionInfo(
            model=self.label,
            providers=tuple(self.sess.get_providers()),
            optimization=self.settings.optimization,
            threads=self.settings.threads,
            spinning=self.settings.spinning,
            op_histogram=tuple(self.op_histogram().items()) if with_histogram else (),
        )

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"OrtSession({self.label!r}, providers={list(s.providers)}, "
            f"optimization={s.optimization!r}, threads={s.threads})"
        )
