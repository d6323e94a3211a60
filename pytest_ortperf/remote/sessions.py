"""Sessions in worker processes of other environments.

:class:`RemoteEnvironment` is an environment (:mod:`pytest_ortperf.remote.venvs`);
:meth:`RemoteEnvironment.session` starts a worker process of it
(:mod:`pytest_ortperf.remote.worker`) that loads the model, and returns a :class:`RemoteSession`.
Several remote sessions are measured interleaved by :mod:`pytest_ortperf.remote.interleave`.
Both arms of an A/B always run in workers, even when one is this environment.

Every wait on a worker has a timeout; a worker that dies, hangs past its timeout or
answers an error raises :class:`WorkerError` with its stderr tail, and the worker is
killed. Workers end when their session is closed, when this process exits, or when their
stdin closes (this process died).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from pytest_ortperf import scratch
from pytest_ortperf.measuring.engine import NS, EngineConfig, group_sizes
from pytest_ortperf.measuring.feeds import InputSpec, check_feed_names
from pytest_ortperf.remote import worker as worker_module
from pytest_ortperf.remote.venvs import EnvSpec, ensure
from pytest_ortperf.results import SessionInfo

if TYPE_CHECKING:
    from typing import Unpack

    from pytest_ortperf.measuring.session import SessionKeywords

Feeds = Mapping[str, np.ndarray[Any, Any]]

TIMEOUT_S = 60.0
"""Default longest wait for a worker's answer to one request (a block, a warm-up)."""

LOAD_TIMEOUT_S = 300.0
"""Default longest wait for a worker to start, load a model or profile it."""

STDERR_LINES = 40
"""Lines of a worker's stderr kept to explain its failure."""

_BOOTSTRAP = (
    "import sys; del sys.path[0]; import runpy; path = sys.argv[1]; sys.argv = [path]; "
    "runpy.run_path(path, run_name='__main__')"
)
"""Runs the worker module by path in another environment's interpreter: ``-c`` puts the
current directory first on ``sys.path`` and runpy adds nothing, so only that
environment's packages are importable (none of this one's)."""


class WorkerError(RuntimeError):
    """A worker failed: it could not start, died, timed out, or answered an error."""


class WorkerTimeout(WorkerError):
    """A worker did not answer in time (it was killed)."""


_LIVE: weakref.WeakSet[WorkerProcess] = weakref.WeakSet()
_OPEN: weakref.WeakSet[RemoteSession] = weakref.WeakSet()


@atexit.register
def _kill_all() -> None:
    """At exit: no worker and no session's files left behind, whoever forgot to close."""
    for proc in list(_LIVE):
        proc.kill()
    for session in list(_OPEN):
        shutil.rmtree(session._dir, ignore_errors=True)


class WorkerProcess:
    """One worker process, driven by JSON lines (see :mod:`pytest_ortperf.remote.worker`)."""

    def __init__(self, python: Path, label: str, *, timeout: float = LOAD_TIMEOUT_S) -> None:
        self.label = label
        self.python = python
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env["PYTHONUNBUFFERED"] = "1"
        command = [str(python), "-c", _BOOTSTRAP, str(Path(worker_module.__file__))]
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # a ^C in the terminal reaches the parent only
            )
        except OSError as exc:
            raise WorkerError(f"{label}: could not start {python}: {exc}") from None
        _LIVE.add(self)
        self.pid = self.proc.pid
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        try:
            self.info = self.request("hello", timeout=timeout)
        except WorkerError as exc:
            # The worker's imports failed: the real cause is on its stderr (an old
            # onnxruntime under numpy 2 prints numpy's explanation, then raises a bare
            # ImportError), which the error quotes.
            self._stderr_settled()
            tail = self.stderr_tail()
            self.close()
            if tail and "stderr of the worker" not in str(exc):
                raise WorkerError(self._failure(str(exc))) from None
            raise
        except BaseException:
            self.close()
            raise

    def _pump(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def _drain(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    def _stderr_settled(self, timeout: float = 1.0) -> None:
        """Wait (briefly) until the worker's stderr stops growing: a worker writes its
        traceback there just before its answer, which can arrive first."""
        deadline = time.monotonic() + timeout
        seen = -1
        while time.monotonic() < deadline and len(self._stderr) != seen:
            seen = len(self._stderr)
            time.sleep(0.1)

    def stderr_tail(self) -> str:
        """The last lines the worker wrote to stderr (waits briefly for a dead one's)."""
        if self.proc.poll() is not None:
            self._threads[1].join(timeout=1.0)
        return "\n".join(self._stderr)

    def _failure(self, what: str) -> str:
        tail = self.stderr_tail()
        shown = "\n".join(f"    {line}" for line in tail.splitlines()) if tail else "    (empty)"
        return f"{what}\n  stderr of the worker (last lines):\n{shown}"

    def _status(self) -> str:
        code = self.proc.returncode
        if code is None:
            return "running"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by signal {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exit status {code}"

    def request(self, op: str, *, timeout: float, **fields: Any) -> dict[str, Any]:
        """Send one request and wait up to ``timeout`` seconds for its answer."""
        message = json.dumps({"op": op, **fields}) + "\n"
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(message.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._reap(1.0)
            raise WorkerError(
                self._failure(
                    f"{self.label}: worker (pid {self.pid}) died ({self._status()}) before {op!r}"
                )
            ) from None
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise WorkerTimeout(
                self._failure(
                    f"{self.label}: worker (pid {self.pid}) did not answer {op!r} within "
                    f"{timeout:g} s; it was killed"
                )
            ) from None
        if line is None:
            self._reap(5.0)
            raise WorkerError(
                self._failure(
                    f"{self.label}: worker (pid {self.pid}) died ({self._status()}) during {op!r}"
                )
            )
        try:
            reply = json.loads(line)
        except ValueError:
            self.kill()
            raise WorkerError(
                self._failure(f"{self.label}: worker answered {op!r} with {line[:200]!r}")
            ) from None
        if not reply.get("ok"):
            raise WorkerError(f"{self.label}: {reply.get('type', 'Error')}: {reply.get('error')}")
        return dict(reply)

    def _reap(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Kill the worker now and reap it."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10.0)
        self._close_pipes()

    def close(self, timeout: float = 5.0) -> None:
        """Ask the worker to exit; kill it if it does not within ``timeout`` seconds."""
        if self.proc.poll() is None:
            with contextlib.suppress(WorkerError):
                self.request("exit", timeout=timeout)
            self._reap(timeout)
        self.kill()
        _LIVE.discard(self)

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class RemoteEnvironment:
    """An environment whose sessions run in worker processes.

    ``spec``: a requirement (``"onnxruntime==1.31.1"``), requirements, or the path of a
    Python interpreter or virtual environment (see :meth:`EnvSpec.parse`). Environments
    from requirements are created in the cache (:func:`pytest_ortperf.remote.venvs.cache_dir`,
    or ``cache``) on first use. ``timeout_s`` bounds every wait for one answer of a worker
    (a block, a warm-up), ``load_timeout_s`` a worker's start, a model's load, a profile.
    """

    def __init__(
        self,
        spec: str | os.PathLike[str] | Sequence[str] | EnvSpec,
        *,
        cache: Path | None = None,
        timeout_s: float = TIMEOUT_S,
        load_timeout_s: float = LOAD_TIMEOUT_S,
    ) -> None:
        self.spec = EnvSpec.parse(spec)
        self.timeout_s = timeout_s
        self.load_timeout_s = load_timeout_s
        self.python = ensure(self.spec, cache=cache)
        self.sessions: list[RemoteSession] = []

    @property
    def label(self) -> str:
        return self.spec.label

    def __repr__(self) -> str:
        return f"RemoteEnvironment({self.label!r}, python={str(self.python)!r})"

    def session(
        self,
        model: Any,
        *,
        name: str | None = None,
        **keywords: Unpack[SessionKeywords],
    ) -> RemoteSession:
        """A session of ``model`` in a new worker of this environment, with the keyword
        arguments of ``ort_session``; a model this environment's onnxruntime cannot load
        raises :class:`WorkerError` naming the version and ORT's error."""
        from pytest_ortperf.measuring.session import SessionSettings

        session = RemoteSession(self, model, SessionSettings.of(**keywords), name)
        self.sessions.append(session)
        return session

    def close(self) -> None:
        """Close every session (and its worker) this environment started."""
        for session in self.sessions:
            session.close()
        self.sessions.clear()

    def __enter__(self) -> RemoteEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteSession:
    """A session in a worker process: what ``ortperf.compare`` and ``rank`` take beside
    (or instead of) local sessions. ``version`` is the worker's onnxruntime version,
    ``label`` the model's with it (``attention [onnxruntime 1.31.1]``)."""

    remote = True

    def __init__(
        self, environment: RemoteEnvironment, model: Any, settings: Any, name: str | None
    ) -> None:
        from pytest_ortperf.measuring.session import load_model_bytes

        model_bytes, model_label = load_model_bytes(model)
        self.environment = environment
        self.settings = settings
        self.model_bytes = model_bytes
        self._dir = scratch.mkdtemp("ortperf-remote-")
        _OPEN.add(self)
        self._bound: tuple[int, str] | None = None
        self._histogram: dict[str, int] | None = None
        try:
            self.worker = WorkerProcess(
                environment.python, environment.label, timeout=environment.load_timeout_s
            )
            self.version = str(self.worker.info["onnxruntime"])
            self.label = name or f"{model_label} [onnxruntime {self.version}]"
            model_path = self._dir / "model.onnx"
            model_path.write_bytes(model_bytes)
            self._optimized = self._dir / "optimized.onnx"
            loaded = self._request(
                "load", environment.load_timeout_s,
                model=str(model_path), optimized=str(self._optimized), scratch=str(self._dir),
                providers=list(settings.providers), optimization=settings.optimization,
                threads=settings.threads, spinning=settings.spinning,
                options=[list(kv) for kv in settings.options],
                custom_ops=list(settings.custom_ops),
            )  # fmt: skip
        except WorkerError as exc:
            self.close()
            what = str(exc)
            if "ModuleNotFoundError: No module named" in what:
                missing = what.rsplit("No module named", 1)[1].strip()
                raise WorkerError(
                    f"environment {environment.label!r} ({environment.python}) has no "
                    f"onnxruntime (no module named {missing}): install it there, or name a "
                    "requirement such as onnxruntime==1.32.0"
                ) from None
            raise WorkerError(f"could not load model {model_label}: {what}") from None
        except BaseException:
            self.close()
            raise
        self.inputs = [InputSpec(n, t, tuple(s)) for n, t, s in loaded["inputs"]]
        self.output_names: list[str] = list(loaded["outputs"])
        self.providers: tuple[str, ...] = tuple(loaded["providers"])
        absent = [p for p in settings.providers if p not in self.providers]
        if absent:  # ORT falls back to the CPU with a warning: an A/B must not
            available = ", ".join(self.worker.info.get("providers", []))
            self.close()
            raise WorkerError(
                f"execution provider(s) {absent} not available in onnxruntime "
                f"{self.version} of environment {environment.label!r}; available: {available}"
            )

    def derive(self) -> RemoteSession:
        """A new session of the same model and settings in a new worker (a fresh process,
        as a baseline's independent runs want)."""
        return self.environment.session(
            self.model_bytes, name=self.label, **self.settings.keywords()
        )

    def _request(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        try:
            return self.worker.request(op, timeout=timeout, **fields)
        except WorkerError as exc:
            if isinstance(exc, WorkerTimeout) or not self.worker.alive:
                raise
            raise WorkerError(f"onnxruntime {self.version}: {exc}") from None

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.inputs]

    @property
    def pid(self) -> int:
        return self.worker.pid

    def get_inputs(self) -> list[InputSpec]:
        """The inputs (``feeds.input_specs`` and ``make_feeds`` take this session)."""
        return list(self.inputs)

    def bind(self, feeds: Feeds, api: str = "iobinding", *, path: Path | None = None) -> None:
        """Send ``feeds`` to the worker (through ``path``, an ``.npz`` written once for
        several sessions, or a file of its own) and bind the call its blocks time."""
        check_feed_names(self.input_names, feeds, f"model {self.label}")
        key = (id(feeds), api)
        if self._bound == key and path is None:
            return
        own = path is None
        if path is None:
            path = write_feeds(feeds, self._dir)
        try:
            self._request("feeds", self.environment.load_timeout_s, path=str(path), api=api)
        finally:
            if own:
                path.unlink(missing_ok=True)
        self._bound = key

    def outputs(self) -> list[np.ndarray[Any, Any]]:
        """The outputs of one run on the bound feeds."""
        path = self._dir / "outputs.npz"
        try:
            reply = self._request("outputs", self.environment.load_timeout_s, path=str(path))
            with np.load(path, allow_pickle=True) as data:
                return [data[f"arr_{i}"] for i in range(int(reply["count"]))]
        finally:
            path.unlink(missing_ok=True)

    def run(self, feeds: Feeds) -> list[np.ndarray[Any, Any]]:
        """All outputs for ``feeds``."""
        self.bind(feeds, "run")
        return self.outputs()

    def warm_up(self, config: EngineConfig) -> tuple[int, bool]:
        """The worker's warm-up of the bound call: ``k`` calls per block, and whether the
        block times settled (as :meth:`pytest_ortperf.measuring.engine.Engine.warm_up`)."""
        reply = self._request(
            "warmup", max(self.environment.timeout_s, 4 * config.warmup_s),
            block_s=config.block_s, warmup_s=config.warmup_s,
            tolerance=config.settle_tolerance, window=config.settle_blocks,
            max_calls=config.max_calls_per_block,
        )  # fmt: skip
        return int(reply["k"]), bool(reply["settled"])

    def block(self, k: int) -> tuple[float, int, int]:
        """One block of ``k`` calls timed in the worker in groups
        (:func:`~pytest_ortperf.measuring.engine.group_sizes`): the median group's seconds
        per call, and the block's wall and thread CPU nanoseconds."""
        sizes = list(group_sizes(k))
        reply = self._request("block", self.environment.timeout_s, k=k, sizes=sizes)
        return float(reply["per_call_ns"]) * NS, int(reply["ns"]), int(reply["cpu_ns"])

    def profile_to(self, directory: Path, feeds: Feeds, *, runs: int, warmup: int) -> Path:
        """Profile ``warmup + runs`` calls on a separate profiling session in the worker
        (outside any timed run); the profile file is written in ``directory``, which the
        caller owns and removes. Returns its path."""
        self.bind(feeds, "run")
        reply = self._request(
            "profile", self.environment.load_timeout_s, dir=str(directory), runs=runs,
            warmup=warmup,
        )  # fmt: skip
        return Path(reply["path"])

    def op_histogram(self) -> dict[str, int]:
        """Op-type counts of the graph this worker's onnxruntime optimized."""
        if self._histogram is None:
            import onnx

            model = onnx.load(str(self._optimized), load_external_data=False)
            counts = collections.Counter(n.op_type for n in model.graph.node)
            self._histogram = dict(sorted(counts.items()))
        return dict(self._histogram)

    def info(self, *, with_histogram: bool = False) -> SessionInfo:
        """The record of this session attached to results (as ``OrtSession.info``)."""
        s = self.settings
        return SessionInfo(
            model=self.label,
            providers=self.providers,
            optimization=s.optimization,
            threads=s.threads,
            spinning=s.spinning,
            op_histogram=tuple(self.op_histogram().items()) if with_histogram else (),
        )

    def close(self) -> None:
        """Stop the worker and remove the session's files."""
        worker = getattr(self, "worker", None)
        if worker is not None:
            worker.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        _OPEN.discard(self)

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteSession({self.label!r}, pid={self.worker.pid})"


def is_remote(*targets: object) -> bool:
    """Whether any of ``targets`` is a :class:`RemoteSession`."""
    return any(isinstance(t, RemoteSession) for t in targets)


def write_feeds(feeds: Feeds, directory: Path) -> Path:
    """``feeds`` as an ``.npz`` in ``directory`` (written once, read by every worker)."""
    arrays = {name: np.asarray(value) for name, value in feeds.items()}
    bf16 = [n for n, a in arrays.items() if a.dtype.kind == "V"]
    if bf16:
        raise ValueError(
            f"input(s) {bf16} are bfloat16, which remote sessions cannot take yet "
            "(numpy has no bfloat16 in the worker)"
        )
    fd, name = tempfile.mkstemp(prefix="feeds-", suffix=".npz", dir=directory)
    with os.fdopen(fd, "wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]
    return Path(name)
