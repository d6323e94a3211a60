"""The worker: one onnxruntime session driven by its parent over stdin/stdout.

Run as ``python -m pytest_ortperf.remote.worker`` where pytest-ortperf is installed, or by path
(the parent runs this file with ``runpy`` in an isolated interpreter of another
environment, so it imports nothing of pytest-ortperf: only the standard library, numpy and
the environment's own onnxruntime).

Protocol (version :data:`PROTOCOL`): one JSON object per line each way. The parent writes a
request ``{"op": NAME, ...}`` on the worker's stdin; the worker answers each with one line,
``{"ok": true, ...}`` or ``{"ok": false, "error": TEXT, "type": EXCEPTION}``, on the
descriptor that was its stdout (anything a library prints goes to stderr instead). Arrays
travel as ``.npz`` files that the parent writes (and removes): the worker reads them with
``numpy.load``. Requests:

- ``hello``: ``python``, ``onnxruntime`` and ``numpy`` versions, ``providers``, ``pid``.
- ``load``: ``model`` (a file path), ``providers``, ``optimization``, ``threads``,
  ``spinning``, ``options`` (``[key, value]`` pairs), ``custom_ops``; optionally
  ``optimized`` (a path where the ORT-optimized graph is saved) and ``scratch`` (the
  parent's directory for this session, which the worker removes if its input ends
  without ``exit``: the parent died). Answers the ``inputs``
  (``[name, type, shape]``), ``outputs`` (names) and the ``providers`` in use.
- ``feeds``: ``path`` (an ``.npz`` of the inputs) and ``api`` (``run`` or ``iobinding``):
  the call that blocks time, bound once.
- ``outputs``: runs once and saves the outputs to ``path`` (an ``.npz``, ``arr_0``...).
- ``warmup``: ``block_s``, ``warmup_s``, ``tolerance``, ``window``, ``max_calls``: the
  first call untimed, then ``k`` calls per block of about ``block_s``, blocks repeated
  until the last ``window`` agree within ``tolerance`` or ``warmup_s`` is spent. Answers
  ``k`` and ``settled``.
- ``block``: ``k`` and ``sizes``: the worker times ``k`` back-to-back calls with
  ``perf_counter_ns``, in groups of the given sizes (the parent's
  :func:`~pytest_ortperf.measuring.engine.group_sizes`), and its thread CPU time with
  ``thread_time_ns``; answers ``ns`` and ``cpu_ns`` (the whole block's) and ``per_call_ns``
  (the median group's nanoseconds per call). Nothing of the protocol happens between the
  clock reads.
- ``profile``: ``runs``, ``warmup``, ``dir``: a separate profiling session runs
  ``warmup + runs`` calls; answers the profile file's ``path`` (inside ``dir``).
- ``exit``: answers, then the worker ends. End of input also ends it.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
import traceback
from typing import Any

PROTOCOL = 2

_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


class Worker:
    """The state of one worker: its session, bound call and feeds."""

    def __init__(self) -> None:
        import numpy as np
        import onnxruntime as ort

        self.np = np
        self.ort = ort
        self.sess: Any = None
        self.load_request: dict[str, Any] = {}
        self.call: Any = None
        self.feeds: dict[str, Any] = {}

    def options(self, request: dict[str, Any], extra: dict[str, Any] | None = None) -> Any:
        ort = self.ort
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(
            ort.GraphOptimizationLevel, _LEVELS[request.get("optimization", "all")]
        )
        threads = int(request.get("threads", 1))
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1 if threads == 1 else 0
        spin = "1" if request.get("spinning") else "0"
        so.add_session_config_entry("session.intra_op.allow_spinning", spin)
        so.add_session_config_entry("session.inter_op.allow_spinning", spin)
        for library in request.get("custom_ops", []):
            so.register_custom_ops_library(str(library))
        pairs = list(request.get("options", [])) + list((extra or {}).items())
        for key, value in pairs:
            if hasattr(so, key) and not key.startswith("_"):
                setattr(so, key, value)
            else:
                so.add_session_config_entry(key, str(value))
        return so

    def session(self, request: dict[str, Any], extra: dict[str, Any] | None = None) -> Any:
        return self.ort.InferenceSession(
            request["model"],
            sess_options=self.options(request, extra),
            providers=list(request.get("providers") or ["CPUExecutionProvider"]),
        )

    def op_hello(self, request: dict[str, Any]) -> dict[str, Any]:
        import platform

        return {
            "protocol": PROTOCOL,
            "python": platform.python_version(),
            "executable": sys.executable,
            "onnxruntime": self.ort.__version__,
            "numpy": self.np.__version__,
            "providers": list(self.ort.get_available_providers()),
            "pid": os.getpid(),
        }

    def op_load(self, request: dict[str, Any]) -> dict[str, Any]:
        self.sess = self.session(request)
        self.load_request = request
        self.call = None
        if request.get("optimized"):
            extra = {"optimized_model_filepath": request["optimized"], "log_severity_level": 3}
            self.session(request, extra)
        return {
            "inputs": [[i.name, i.type, list(i.shape)] for i in self.sess.get_inputs()],
            "outputs": [o.name for o in self.sess.get_outputs()],
            "providers": list(self.sess.get_providers()),
        }

    def op_feeds(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.sess is None:
            raise RuntimeError("no session loaded")
        with self.np.load(request["path"], allow_pickle=True) as data:
            self.feeds = {name: data[name] for name in data.files}
        api = request.get("api", "iobinding")
        sess, feeds, ort, np = self.sess, self.feeds, self.ort, self.np
        # The same calls as pytest_ortperf.measuring.calls times in process: what a block repeats
        # is the bound C-level call and nothing else.
        if api == "run":
            call = functools.partial(sess.run, None, feeds)
        elif api == "iobinding":
            binding = sess.io_binding()
            self._keep = []  # the OrtValues must outlive the binding
            for name, array in feeds.items():
                contiguous = np.ascontiguousarray(array)  # shared, not copied: keep it too
                value = ort.OrtValue.ortvalue_from_numpy(contiguous)
                self._keep += [contiguous, value]
                binding.bind_ortvalue_input(name, value)
            warm = sess.run(None, feeds)
            for output, value in zip(sess.get_outputs(), warm):  # noqa: B905 (Python < 3.10)
                if isinstance(value, np.ndarray) and value.dtype.kind != "O":
                    out = ort.OrtValue.ortvalue_from_shape_and_type(
                        list(value.shape), value.dtype, "cpu", 0
                    )
                    self._keep.append(out)
                    binding.bind_ortvalue_output(output.name, out)
                else:
                    binding.bind_output(output.name, "cpu")
            self._binding = binding
            inner = getattr(sess, "_sess", None)
            if inner is not None and hasattr(binding, "_iobinding"):
                call = functools.partial(
                    inner.run_with_iobinding, binding._iobinding, ort.RunOptions()
                )
            else:
                call = functools.partial(sess.run_with_iobinding, binding)
        else:
            raise ValueError(f"api={api!r}: a worker times 'run' or 'iobinding'")
        self.call = call
        return {}

    def op_outputs(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.sess is None:
            raise RuntimeError("no session loaded")
        outputs = self.sess.run(None, self.feeds)
        arrays = [self.np.asarray(o) for o in outputs]
        self.np.savez(request["path"], *arrays)
        return {"count": len(arrays)}

    def _block(self, k: int) -> int:
        """Nanoseconds of ``k`` back-to-back calls (the warm-up's blocks)."""
        marks = self._groups([k])
        return marks[-1] - marks[0]

    def _groups(self, sizes: list[int]) -> list[int]:
        """Clock readings around groups of back-to-back calls of the given sizes."""
        call = self.call
        clock = time.perf_counter_ns
        marks = [clock()]
        for size in sizes:
            for _ in range(size):
                call()
            marks.append(clock())
        return marks

    def op_warmup(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.call is None:
            raise RuntimeError("no feeds bound")
        block_ns = float(request["block_s"]) * 1e9
        warmup_ns = float(request["warmup_s"]) * 1e9
        tolerance = float(request.get("tolerance", 0.05))
        window = int(request.get("window", 3))
        max_calls = int(request.get("max_calls", 1_000_000))
        self.call()
        start = time.perf_counter_ns()
        k = 1
        per_call = float(self._block(1))
        while per_call * k < block_ns / 2 and k < max_calls:
            k = min(max_calls, max(2 * k, int(block_ns / max(per_call, 1)) // 2))
            per_call = self._block(k) / k
        k = max(1, min(max_calls, round(block_ns / max(per_call, 1))))
        times = [per_call]

        def settled() -> bool:
            last = times[-window:]
            return len(times) >= window and max(last) - min(last) <= tolerance * min(last)

        while time.perf_counter_ns() - start < warmup_ns:
            times.append(self._block(k) / k)
            if settled():
                return {"k": k, "settled": True}
        return {"k": k, "settled": warmup_ns == 0 or settled()}

    def op_block(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.call is None:
            raise RuntimeError("no feeds bound")
        k = int(request["k"])
        sizes = [int(size) for size in request.get("sizes") or [k]]
        if sum(sizes) != k or min(sizes) < 1:
            raise ValueError(f"group sizes {sizes} do not split a block of {k} calls")
        c0 = time.thread_time_ns()
        marks = self._groups(sizes)
        cpu_ns = time.thread_time_ns() - c0
        per_call = statistics.median(
            (marks[i + 1] - marks[i]) / size for i, size in enumerate(sizes)
        )
        return {"ns": marks[-1] - marks[0], "cpu_ns": cpu_ns, "per_call_ns": per_call}

    def op_profile(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.sess is None:
            raise RuntimeError("no session loaded")
        prefix = os.path.join(request["dir"], "ort")
        extra = {"enable_profiling": True, "profile_file_prefix": prefix}
        profiling = self.session(self.load_request, extra)
        try:
            for _ in range(int(request.get("warmup", 3)) + int(request.get("runs", 10))):
                profiling.run(None, self.feeds)
        finally:
            path = profiling.end_profiling()
        return {"path": path}


def serve(stdin: Any, out: Any) -> int:
    """Answer requests from ``stdin`` on ``out`` until ``exit`` or end of input."""
    worker: Worker | None = None
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request["op"]
            if op == "exit":
                out.write(json.dumps({"ok": True}) + "\n")
                out.flush()
                return 0
            if worker is None:
                worker = Worker()
            handler = getattr(worker, f"op_{op}", None)
            if handler is None:
                raise ValueError(f"unknown op {op!r}")
            reply: dict[str, Any] = {"ok": True, **handler(request)}
        except Exception as exc:
            sys.stderr.write(traceback.format_exc())
            message = str(exc).strip() or type(exc).__name__
            reply = {"ok": False, "error": message, "type": type(exc).__name__}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    # End of input without "exit": the parent died; remove what it left for this session.
    scratch = worker.load_request.get("scratch") if worker is not None else None
    if scratch:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def main() -> int:
    # The protocol owns the original stdout; whatever else writes to fd 1 (a library's
    # print, ORT's logging) lands on stderr, where the parent keeps a tail for errors.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        return serve(sys.stdin, out)
    finally:
        out.close()


if __name__ == "__main__":
    sys.exit(main())
