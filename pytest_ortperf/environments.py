"""Python environments that remote sessions run in: by requirement, or an existing one.

An environment is named either by pip requirements (``onnxruntime==1.31.1``, with extra
packages if needed: ``["onnxruntime==1.31.1", "onnxruntime-extensions"]``) or by an existing
Python interpreter or virtual environment (a path). Environments made from requirements are
created once, with ``uv`` when it is on the ``PATH`` and with ``venv`` + pip otherwise, in
the cache directory (:func:`cache_dir`: ``$ORTPERF_ENV_CACHE``, else
``$XDG_CACHE_HOME/pytest-ortperf/envs``, else ``~/.cache/pytest-ortperf/envs``), one
subdirectory per requirements and Python version, and reused. A file lock per environment
makes concurrent pytest processes (xdist workers, parallel jobs) wait for one another's
install instead of racing; an environment is used only once its ``ready.json`` is written,
so an install that was interrupted is redone.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_ortperf.files import file_lock, write_atomic

CACHE_ENV_VAR = "ORTPERF_ENV_CACHE"
"""Environment variable naming the cache directory of created environments."""

INSTALL_TIMEOUT_S = 900.0
"""Longest an environment's creation may take (and a second process waits for it)."""

READY = "ready.json"


class EnvironmentSetupError(RuntimeError):
    """An environment could not be created, or is not there."""


def cache_dir() -> Path:
    """Where environments made from requirements live (see the module's docstring)."""
    given = os.environ.get(CACHE_ENV_VAR)
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "pytest-ortperf" / "envs"


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "~", "/")) or os.sep in text or (os.altsep or "/") in text


@dataclass(frozen=True)
class EnvSpec:
    """What an environment is: requirements to install, or an existing interpreter."""

    requirements: tuple[str, ...] = ()
    interpreter: str | None = None

    @classmethod
    def parse(cls, spec: str | os.PathLike[str] | Sequence[str] | EnvSpec) -> EnvSpec:
        """A spec from a requirement (``"onnxruntime==1.31.1"``), several requirements (a
        list, or one string separated by spaces), or a path to a Python interpreter or a
        virtual environment's directory (anything with a path separator, or ``.``/``~``
        at the start)."""
        if isinstance(spec, EnvSpec):
            return spec
        if isinstance(spec, os.PathLike):
            return cls(interpreter=os.fspath(spec))
        if isinstance(spec, str):
            text = spec.strip()
            if not text:
                raise ValueError("an environment needs a requirement or an interpreter path")
            if _looks_like_path(text):
                return cls(interpreter=text)
            return cls(requirements=tuple(text.split()))
        items = tuple(str(s).strip() for s in spec)
        if not items or not all(items):
            raise ValueError(f"an environment needs requirements, got {list(spec)!r}")
        return cls(requirements=items)

    @property
    def label(self) -> str:
        """``onnxruntime==1.31.1`` or the interpreter's path."""
        return " ".join(self.requirements) if self.requirements else str(self.interpreter)

    def key(self) -> str:
        """The cache key of requirements on this Python (version, implementation, platform)."""
        what = {
            "requirements": sorted(self.requirements),
            "python": platform.python_version(),
            "implementation": sys.implementation.name,
            "platform": sys.platform,
            "machine": platform.machine(),
        }
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def interpreter_of(path: str | os.PathLike[str]) -> Path:
    """The Python executable of an interpreter path or a virtual environment's directory;
    :class:`EnvironmentSetupError` naming the path when there is none."""
    given = Path(path).expanduser()
    if given.is_dir():
        for candidate in (given / "bin" / "python", given / "Scripts" / "python.exe"):
            if candidate.is_file():
                return candidate
        raise EnvironmentSetupError(
            f"environment {os.fspath(path)!r}: a directory with no bin/python (not a "
            "virtual environment)"
        )
    if not given.is_file():
        raise EnvironmentSetupError(
            f"environment {os.fspath(path)!r}: no such Python interpreter or virtual environment"
        )
    if not os.access(given, os.X_OK):
        raise EnvironmentSetupError(f"environment {os.fspath(path)!r}: not executable")
    return given


def _venv_python(root: Path) -> Path:
    if sys.platform == "win32":
        return root / "Scripts" / "python.exe"
    return root / "bin" / "python"


def _run(command: Sequence[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentSetupError(f"{what}: gave up after {timeout:g} s") from None
    except OSError as exc:
        raise EnvironmentSetupError(f"{what}: {exc}") from None
    if done.returncode != 0:
        tail = "\n".join(done.stdout.strip().splitlines()[-15:])
        raise EnvironmentSetupError(f"{what} failed (exit status {done.returncode}):\n{tail}")


def _pip_supports_python() -> bool:
    """Whether this interpreter's pip can install into another one (``--python``, 22.3+)."""
    try:
        import pip
    except ImportError:
        return False
    major, minor = (int(p) for p in pip.__version__.split(".")[:2])
    return (major, minor) >= (22, 3)


def create(root: Path, requirements: Sequence[str], timeout: float) -> None:
    """Create a virtual environment at ``root`` with ``requirements`` installed."""
    label = " ".join(requirements)
    uv = shutil.which("uv")
    python = _venv_python(root)
    if uv is not None:
        _run([uv, "venv", "--quiet", "--python", sys.executable, str(root)],
             f"uv venv for {label}", timeout)  # fmt: skip
        _run([uv, "pip", "install", "--quiet", "--python", str(python), *requirements],
             f"uv pip install {label}", timeout)  # fmt: skip
        return
    if _pip_supports_python():
        # No pip inside the new environment: this one's pip installs into it (faster).
        _run([sys.executable, "-m", "venv", "--without-pip", str(root)],
             f"python -m venv for {label}", timeout)  # fmt: skip
        pip = [sys.executable, "-m", "pip", "--python", str(python)]
    else:
        _run([sys.executable, "-m", "venv", str(root)], f"python -m venv for {label}", timeout)
        pip = [str(python), "-m", "pip"]
    _run([*pip, "install", "--quiet", "--disable-pip-version-check", *requirements],
         f"pip install {label}", timeout)  # fmt: skip


def ensure(spec: EnvSpec, *, cache: Path | None = None, timeout: float = INSTALL_TIMEOUT_S) -> Path:
    """The Python executable of ``spec``: an existing interpreter checked, or the cached
    environment of its requirements, created first when missing (under a lock)."""
    if spec.interpreter is not None:
        return interpreter_of(spec.interpreter)
    root_dir = cache or cache_dir()
    key = spec.key()
    root = root_dir / key
    ready = root / READY
    if ready.is_file():
        return _venv_python(root)
    with file_lock(root_dir / f"{key}.lock", timeout=timeout, what=f"environment {spec.label}"):
        if ready.is_file():  # another process made it while we waited
            return _venv_python(root)
        if root.exists():  # an install that was interrupted
            shutil.rmtree(root, ignore_errors=True)
        try:
            create(root, spec.requirements, timeout)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        info = {"requirements": list(spec.requirements), "python": sys.executable}
        write_atomic(ready, json.dumps(info, indent=1, sort_keys=True) + "\n")
    return _venv_python(root)
