"""Cold start: session creation and first runs, each launch a fresh Python process.

The parent (:func:`measure_cold_start`) writes the model, the feeds (one ``.npz``) and a
JSON spec into a temporary directory once, then launches ``python -m
pytest_ortperf.measuring.coldstart SPEC`` again and again.
Each child imports onnxruntime, builds the
session with the same settings as ``ort_session`` (:func:`~pytest_ortperf.measuring.session.
make_session_options`), and times three things with ``perf_counter``:

- ``create``: ``InferenceSession(...)`` (graph load, optimization, kernel creation);
- ``first_run``: the first ``run`` on the feeds;
- ``new_shape``: after a few warm-up runs at the first shape, the first run at another
  input shape (only when the model has a dynamic dim; otherwise not applicable).

It prints one line ``ORTPERF-COLDSTART {json}`` and exits. Several models are launched
interleaved (ABAB...), so that drift of the machine hits them alike and a comparison is a
ratio of paired launches. One untimed launch per model comes first: it fills the OS page
cache with the model file and compiles Python's bytecode, so "cold" means a fresh process,
not a cold disk. Every wait has a timeout; a child that times out is killed and reaped, as
is one still running when anything goes wrong (Ctrl-C included): no process is left
behind. A child that crashes or whose onnxruntime raises is a :class:`ColdStartError` with
the tail of its stderr.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pytest_ortperf.measuring.session import SessionSettings

MARKER = "ORTPERF-COLDSTART "
"""Prefix of the child's result line on stdout."""
DEFAULT_LAUNCHES = 12
"""Timed launches per model (each a fresh process): enough pairs for the signed-rank
interval at the gate's default alpha (0.01 needs 9)."""
MIN_LAUNCHES = 3
"""Fewest timed launches per model, whatever the time budget."""
DEFAULT_TIMEOUT_S = 120.0
"""How long one launch may take before it is killed."""
DEFAULT_BUDGET_S = 60.0
"""Wall time after which no further round of launches is started (at least
:data:`MIN_LAUNCHES` rounds run)."""
MAX_LAUNCHES = 1000
"""The most timed launches per model one cold start takes (each a fresh process)."""
WARMUP_RUNS = 3
"""Runs at the first shape before the first run at the new shape."""
STDERR_TAIL = 2000
"""Characters of a failed child's stderr quoted in the error."""


class ColdStartError(RuntimeError):
    """A cold-start launch failed: crashed, raised, printed no result or timed out."""


@dataclass(frozen=True)
class Launch:
    """One fresh process's figures, in seconds (``new_shape`` None: not applicable)."""

    create: float
    first_run: float
    new_shape: float | None
    imports: float


@dataclass(frozen=True)
class ColdStartSpec:
    """What one child process builds and runs (written as JSON for it: the session's
    settings as their fields, beside the files)."""

    model: str
    settings: SessionSettings
    feeds: str
    shape_feeds: str | None
    bfloat16: tuple[str, ...] = ()
    warmup_runs: int = WARMUP_RUNS

    def to_json(self) -> str:
        import msgspec

        data = {
            "model": self.model,
            **msgspec.to_builtins(self.settings),
            "feeds": self.feeds,
            "shape_feeds": self.shape_feeds,
            "bfloat16": list(self.bfloat16),
            "warmup_runs": self.warmup_runs,
        }
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> ColdStartSpec:
        import msgspec

        from pytest_ortperf.measuring.session import SessionSettings

        data = json.loads(text)
        return cls(
            model=str(data["model"]),
            settings=msgspec.convert(data, SessionSettings, strict=False),
            feeds=str(data["feeds"]),
            shape_feeds=data.get("shape_feeds"),
            bfloat16=tuple(data.get("bfloat16") or ()),
            warmup_runs=int(data.get("warmup_runs", WARMUP_RUNS)),
        )


def save_feeds(path: Path, feeds: Mapping[str, np.ndarray[Any, Any]]) -> tuple[str, ...]:
    """Write feeds to ``path`` (``.npz``); bfloat16 arrays go as their 16-bit patterns
    (``.npz`` has no bfloat16), and their names are returned for the child to view back."""
    from pytest_ortperf.measuring.ortvalues import is_bfloat16

    arrays: dict[str, np.ndarray[Any, Any]] = {}
    bf16: list[str] = []
    for name, value in feeds.items():
        array = np.ascontiguousarray(value)
        if is_bfloat16(array.dtype):
            array = array.view(np.uint16)
            bf16.append(name)
        arrays[name] = array
    with open(path, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]
    return tuple(bf16)


def _load_feeds(path: str, bf16: Sequence[str]) -> dict[str, np.ndarray[Any, Any]]:
    from pytest_ortperf.measuring.feeds import BFLOAT16

    with np.load(path, allow_pickle=True) as data:  # strings are object arrays
        feeds = {name: data[name] for name in data.files}
    for name in bf16:
        feeds[name] = feeds[name].view(BFLOAT16)
    return feeds


# --------------------------------------------------------------------------- the child


def child(spec_path: str) -> dict[str, Any]:
    """Build and run the session of one spec, timing each step (runs in the child)."""
    start = time.perf_counter()
    import onnxruntime as ort

    from pytest_ortperf.measuring.ortvalues import run_plain
    from pytest_ortperf.measuring.session import make_session_options

    imports = time.perf_counter() - start
    spec = ColdStartSpec.from_json(Path(spec_path).read_text(encoding="utf-8"))
    options = make_session_options(spec.settings)
    feeds = _load_feeds(spec.feeds, spec.bfloat16)
    other = _load_feeds(spec.shape_feeds, spec.bfloat16) if spec.shape_feeds else None
    t0 = time.perf_counter()
    sess = ort.InferenceSession(
        spec.model, sess_options=options, providers=list(spec.settings.providers)
    )
    t1 = time.perf_counter()
    run_plain(sess, feeds)
    t2 = time.perf_counter()
    new_shape = None
    if other is not None:
        for _ in range(spec.warmup_runs):
            run_plain(sess, feeds)
        t3 = time.perf_counter()
        run_plain(sess, other)
        new_shape = time.perf_counter() - t3
    return {"create": t1 - t0, "first_run": t2 - t1, "new_shape": new_shape, "imports": imports}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_ortperf.measuring.coldstart SPEC.json``: one cold start, its figures on
    stdout as ``ORTPERF-COLDSTART {json}``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pytest_ortperf.measuring.coldstart SPEC.json", file=sys.stderr)
        return 2
    figures = child(args[0])
    sys.stdout.write(MARKER + json.dumps(figures) + "\n")
    sys.stdout.flush()
    return 0


# --------------------------------------------------------------------------- the parent


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _tail(text: str) -> str:
    text = _ANSI.sub("", text).strip()  # ORT colours its log lines
    if not text:
        return " (stderr was empty)"
    if len(text) > STDERR_TAIL:
        text = "..." + text[-STDERR_TAIL:]
    return "; its stderr ends:\n" + text


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _child_env() -> dict[str, str]:
    """The environment of a child: this one, with this package importable first."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def launch(spec_path: Path, label: str, timeout: float) -> Launch:
    """One fresh process for ``spec_path``; raises :class:`ColdStartError`. The child is
    killed and reaped however this returns."""
    command = [sys.executable, "-m", "pytest_ortperf.measuring.coldstart", str(spec_path)]
    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=30)
            raise ColdStartError(
                f"cold start of {label}: no result within {timeout:g} s, the process was "
                "killed (raise timeout= for a model this slow to load)" + _tail(err)
            ) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    if proc.returncode != 0:
        raise ColdStartError(
            f"cold start of {label}: the process {_status(proc.returncode)}" + _tail(err)
        )
    lines = [line for line in out.splitlines() if line.startswith(MARKER)]
    if not lines:
        raise ColdStartError(f"cold start of {label}: the process printed no result" + _tail(err))
    data = json.loads(lines[-1][len(MARKER) :])
    new_shape = data.get("new_shape")
    return Launch(
        create=float(data["create"]),
        first_run=float(data["first_run"]),
        new_shape=None if new_shape is None else float(new_shape),
        imports=float(data["imports"]),
    )


Launcher = Callable[[Path, str, float], Launch]


def check_launch_settings(
    launches: object, timeout: object, budget: object
) -> tuple[int | None, float | None, float | None]:
    """A cold start's ``launches`` (1 to :data:`MAX_LAUNCHES`), ``timeout`` and ``budget``
    (seconds above 0, at most :data:`~pytest_ortperf.values.MAX_BUDGET_S`), each None for
    its default; a ``ValueError`` naming the argument at fault."""
    from pytest_ortperf.values import check_count, check_seconds  # not in the child

    return (
        None if launches is None else check_count("launches", launches, 1, MAX_LAUNCHES),
        None if timeout is None else check_seconds("timeout", timeout),
        None if budget is None else check_seconds("budget", budget),
    )


def interleaved(
    specs: Sequence[tuple[Path, str]],
    *,
    launches: int = DEFAULT_LAUNCHES,
    timeout: float = DEFAULT_TIMEOUT_S,
    budget: float = DEFAULT_BUDGET_S,
    warmup: bool = True,
    launcher: Launcher = launch,
    clock: Callable[[], float] = time.perf_counter,
) -> list[list[Launch]]:
    """Launches of every ``(spec, label)`` in rounds (A B A B ...): per spec, its
    ``launches`` timed ones (fewer when ``budget`` seconds ran out, never fewer than
    :data:`MIN_LAUNCHES`), after one untimed launch each when ``warmup``."""
    if launches < 1:
        raise ValueError(f"launches must be >= 1, got {launches}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
    if warmup:
        for path, label in specs:
            launcher(path, label, timeout)
    out: list[list[Launch]] = [[] for _ in specs]
    start = clock()
    for i in range(launches):
        if i >= MIN_LAUNCHES and clock() - start > budget:
            break
        for arm, (path, label) in zip(out, specs, strict=True):
            arm.append(launcher(path, label, timeout))
    return out


def shape_text(feeds: Mapping[str, Any]) -> str:
    """``"X[1,10] mask[1,10]"``: the inputs' shapes in one string."""
    return " ".join(f"{k}[{','.join(str(d) for d in np.shape(v))}]" for k, v in feeds.items())


@dataclass(frozen=True)
class Prepared:
    """The files of one model's launches, in a temporary directory the caller owns."""

    spec: Path
    label: str


def prepare(
    directory: Path,
    key: str,
    model_bytes: bytes,
    settings: SessionSettings,
    feeds: Mapping[str, np.ndarray[Any, Any]],
    shape_feeds: Mapping[str, np.ndarray[Any, Any]] | None,
    label: str,
) -> Prepared:
    """Write one model's files (model, feeds ``.npz``, spec) under ``directory``."""
    model = directory / f"{key}.onnx"
    model.write_bytes(model_bytes)
    feeds_path = directory / f"{key}-feeds.npz"
    bf16 = save_feeds(feeds_path, feeds)
    shape_path = None
    if shape_feeds is not None:
        shape_path = directory / f"{key}-shape-feeds.npz"
        save_feeds(shape_path, shape_feeds)
    spec = ColdStartSpec(
        model=str(model),
        settings=settings,
        feeds=str(feeds_path),
        shape_feeds=None if shape_path is None else str(shape_path),
        bfloat16=bf16,
    )
    path = directory / f"{key}-spec.json"
    path.write_text(spec.to_json(), encoding="utf-8")
    return Prepared(path, label)


def other_shape_feeds(
    specs: Sequence[Any], feeds: Mapping[str, np.ndarray[Any, Any]], seed: int = 1
) -> tuple[dict[str, np.ndarray[Any, Any]] | None, str]:
    """Random feeds at another shape for the new-shape figure: every dynamic dim of the
    inputs (``specs``: :class:`~pytest_ortperf.measuring.feeds.InputSpec`) doubled from its size in
    ``feeds`` (0 becomes 1; dims of equal size stay equal). ``(None, why)`` when the
    model has no dynamic dim or no such feeds can be made."""
    from pytest_ortperf.measuring.feeds import FeedError, make_feeds

    shapes: dict[str, list[int]] = {}
    dynamic = False
    for spec in specs:
        got = np.shape(feeds[spec.name])
        shape = []
        for declared, size in zip(spec.shape, got, strict=False):
            if isinstance(declared, int) and declared >= 0:
                shape.append(int(size))
                continue
            dynamic = True
            bigger = 2 * int(size) or 1
            shape.append(bigger)
        shapes[spec.name] = shape
    if not dynamic:
        return None, "not applicable: the model's inputs have no dynamic dim"
    try:
        return dict(make_feeds(specs, shapes=shapes, seed=seed)), ""
    except FeedError as exc:
        return None, f"not measured: no feeds at another shape ({exc}); pass shape_feeds="


def temp_directory() -> tempfile.TemporaryDirectory[str]:
    """The temporary directory of one cold-start measurement (removed on exit; in this
    run's scratch directory, which the next run reaps if this one is killed)."""
    from pytest_ortperf.scratch import run_dir

    return tempfile.TemporaryDirectory(prefix="ortperf-coldstart-", dir=run_dir())


if __name__ == "__main__":
    sys.exit(main())
