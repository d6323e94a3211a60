"""The ways to call an ORT session, as zero-argument callables the timing engine can loop.

API names (``api=``):

- ``run``: ``InferenceSession.run(None, feeds)``, what most code calls.
- ``run_c``: the C-level ``_sess.run(names, feeds, RunOptions)``, without the Python wrapper.
- ``run_with_ort_values``: inputs converted to OrtValues once, ``run_with_ort_values`` per call.
- ``iobinding_bind_per_call``: inputs and outputs bound on every call, outputs copied back.
- ``iobinding_copy``: bound once; each call copies the feeds into the bound input buffers.
- ``iobinding``: bound once, no copy at all: the cost of the kernels plus ORT's framework.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnxruntime as ort

from pytest_ortperf.feeds import check_feed_names
from pytest_ortperf.ort_session import OrtSession

APIS: tuple[str, ...] = (
    "run",
    "run_c",
    "run_with_ort_values",
    "iobinding_bind_per_call",
    "iobinding_copy",
    "iobinding",
)

Call = Callable[[], object]


class OrtBinding:
    """IOBinding-backed feeds: inputs bound once as OrtValues on the device, outputs
    pre-allocated from one warm run and bound, so :meth:`run` allocates and copies nothing.

    Outputs that are not tensors (sequences, maps such as ZipMap) or are strings cannot be
    pre-allocated: they are bound by name and listed in :attr:`bound_by_name`. ORT's Python
    API cannot turn such an OrtValue into Python objects, so :meth:`outputs` reads those from
    one plain ``run()`` on the same inputs.
    """

    def __init__(
        self,
        session: OrtSession,
        feeds: Mapping[str, np.ndarray[Any, Any]],
        *,
        device: str = "cpu",
        device_id: int = 0,
    ) -> None:
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
        if device == "cuda" and "CUDAExecutionProvider" not in session.settings.providers:
            raise ValueError(
                "device='cuda' needs a session with CUDAExecutionProvider; this one has "
                f"{list(session.settings.providers)}"
            )
        check_feed_names(session.input_names, feeds, f"model {session.label}")
        strings = sorted(n for n in session.input_names if feeds[n].dtype == object)
        if strings:
            raise ValueError(
                f"model {session.label} has string input(s) {strings}, which ORT cannot hold "
                "in OrtValues: IOBinding is not possible; time the session with api='run'"
            )
        self.session = session
        self.device = device
        self.device_id = device_id
        self.feeds = {name: feeds[name] for name in session.input_names}
        self.binding = session.sess.io_binding()
        self._inputs: dict[str, ort.OrtValue] = {}
        for name in session.input_names:
            value = ort.OrtValue.ortvalue_from_numpy(
                np.ascontiguousarray(feeds[name]), device, device_id
            )
            self._inputs[name] = value
            self.binding.bind_ortvalue_input(name, value)
        warm = session.sess.run(None, {n: feeds[n] for n in session.input_names})
        by_name = []
        for name, value in zip(session.output_names, warm, strict=True):
            if isinstance(value, np.ndarray) and value.dtype.kind != "O":
                out = ort.OrtValue.ortvalue_from_shape_and_type(
                    value.shape, value.dtype, device, device_id
                )
                self.binding.bind_ortvalue_output(name, out)
            else:
                self.binding.bind_output(name, device, device_id)
                by_name.append(name)
        self.bound_by_name: tuple[str, ...] = tuple(by_name)
        self._run_options = ort.RunOptions()
        # The C-level call: what a timed loop should repeat, nothing else.
        self.call: Call = functools.partial(
            session.sess._sess.run_with_iobinding, self.binding._iobinding, self._run_options
        )

    def run(self) -> None:
        """One inference on the bound inputs into the bound outputs."""
        self.call()

    def outputs(self) -> list[Any]:
        """The outputs of the last run as numpy arrays (Python objects for non-tensors)."""
        values = self.binding.get_outputs()
        if not self.bound_by_name:
            return [v.numpy() for v in values]
        plain = dict(
            zip(
                self.bound_by_name,
                self.session.sess.run(list(self.bound_by_name), self.feeds),
                strict=True,
            )
        )
        return [
            plain[name] if name in plain else value.numpy()
            for name, value in zip(self.session.output_names, values, strict=True)
        ]

    def copy_in(self, feeds: Mapping[str, np.ndarray[Any, Any]]) -> None:
        """Copy new input values (same shapes and dtypes) into the bound buffers."""
        for name, array in feeds.items():
            self._inputs[name].update_inplace(np.ascontiguousarray(array))
            self.feeds[name] = array

    def __repr__(self) -> str:
        extra = f", bound_by_name={list(self.bound_by_name)}" if self.bound_by_name else ""
        return f"OrtBinding({self.session.label!r}, device={self.device!r}{extra})"


def make_call(
    session: OrtSession, feeds: Mapping[str, np.ndarray[Any, Any]], api: str
) -> tuple[Call, Callable[[], list[Any]]]:
    """A zero-argument callable running ``session`` through ``api``, and a function that
    runs it once more and returns its outputs (to check them)."""
    sess = session.sess
    check_feed_names(session.input_names, feeds, f"model {session.label}")
    feeds = {name: feeds[name] for name in session.input_names}
    names = session.output_names
    strings = sorted(n for n, a in feeds.items() if np.asarray(a).dtype.kind == "O")
    if strings and api in ("run_with_ort_values", "iobinding_copy", "iobinding"):
        raise ValueError(
            f"model {session.label} has string input(s) {strings}, which ORT cannot hold in "
            f"OrtValues: time it with api='run' or 'run_c', not {api!r}"
        )
    if api == "run":
        call: Call = functools.partial(sess.run, None, feeds)
        return call, lambda: list(sess.run(None, feeds))
    if api == "run_c":
        call = functools.partial(sess._sess.run, names, feeds, ort.RunOptions())
        return call, lambda: list(sess.run(None, feeds))
    if api == "run_with_ort_values":
        values = {n: ort.OrtValue.ortvalue_from_numpy(a) for n, a in feeds.items()}
        call = functools.partial(sess.run_with_ort_values, names, values, ort.RunOptions())
        return call, lambda: list(sess.run(None, feeds))
    if api == "iobinding_bind_per_call":
        binding = sess.io_binding()

        def bind_per_call() -> list[Any]:
            for name, array in feeds.items():
                binding.bind_cpu_input(name, array)
            for name in names:
                binding.bind_output(name, "cpu")
            sess.run_with_iobinding(binding)
            return binding.copy_outputs_to_cpu()  # type: ignore[no-any-return]

        return bind_per_call, bind_per_call
    bound = OrtBinding(session, feeds, device=session.device)
    if api == "iobinding_copy":

        def copy_then_run() -> object:
            bound.copy_in(feeds)
            return bound.call()

        return copy_then_run, lambda: (copy_then_run(), bound.outputs())[1]
    if api == "iobinding":
        return bound.call, lambda: (bound.call(), bound.outputs())[1]
    raise ValueError(f"api={api!r} is not one of {', '.join(APIS)}")


def binding_call(binding: OrtBinding) -> tuple[Call, Callable[[], list[Any]]]:
    """The callable pair for a binding target (api ``iobinding``)."""
    return binding.call, lambda: (binding.call(), binding.outputs())[1]
