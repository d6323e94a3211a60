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
import re
import shutil
import signal
import subprocess
import sys
import warnings
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


def _requirements(items: Sequence[str], given: str) -> tuple[str, ...]:
    """``items`` checked to be requirements: pip takes anything starting with ``-`` as an
    option (``--target=DIR`` installs into DIR, ``-r FILE`` reads a file), never that."""
    options = [item for item in items if item.startswith("-")]
    if options:
        raise ValueError(
            f"environment {given!r}: {options[0]!r} is a pip option, not a requirement; "
            "give requirements only, such as onnxruntime==1.32.0 (or the path of a Python "
            "interpreter or virtual environment)"
        )
    return tuple(items)


NUMPY_1_BEFORE = (1, 19)
"""onnxruntime releases before this one are built against numpy 1.x and do not import
under numpy 2 (1.19.0 is the first built for numpy 2): an environment that asks for one of
them and names no numpy gets ``numpy<2``."""

_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9][^\s;,]*)")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
NOT_RUNTIMES = ("onnxruntime-extensions", "onnxruntime-genai", "onnxruntime-tools")
"""Packages named onnxruntime-* that are not an onnxruntime build (their versions are
their own)."""


def _name(requirement: str) -> str:
    match = _NAME.match(requirement)
    return match.group(1).lower().replace("_", "-").replace(".", "-") if match else ""


def pinned_onnxruntime(requirements: Sequence[str]) -> str | None:
    """The onnxruntime version ``requirements`` pin exactly (``onnxruntime==1.31.1``, or a
    build such as ``onnxruntime-gpu==1.31.1``), else None."""
    for requirement in requirements:
        pin = _PIN.match(requirement)
        name = _name(requirement)
        if pin and name.startswith("onnxruntime") and not name.startswith(NOT_RUNTIMES):
            return pin.group(2)
    return None


def install_requirements(requirements: Sequence[str]) -> list[str]:
    """What pip installs for ``requirements``: them, plus ``numpy<2`` where they pin an
    onnxruntime older than :data:`NUMPY_1_BEFORE` and name no numpy themselves."""
    out = list(requirements)
    version = pinned_onnxruntime(requirements)
    if version is None or any(_name(r) == "numpy" for r in requirements):
        return out
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return out
    if (major, minor) < NUMPY_1_BEFORE:
        out.append("numpy<2")
    return out


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
            if _looks_like_path(text) and not text.startswith("-"):
                return cls(interpreter=text)
            return cls(requirements=_requirements(text.split(), text))
        items = tuple(str(s).strip() for s in spec)
        if not items or not all(items):
            raise ValueError(f"an environment needs requirements, got {list(spec)!r}")
        return cls(requirements=_requirements(items, " ".join(items)))

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
    requirements = install_requirements(requirements)
    uv = shutil.which("uv")
    python = _venv_python(root)
    if uv is not None:
        _run([uv, "venv", "--quiet", "--python", sys.executable, str(root)],
             f"uv venv for {label}", timeout)  # fmt: skip
        _run([uv, "pip", "install", "--quiet", "--python", str(python), "--", *requirements],
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
    _run([*pip, "install", "--quiet", "--disable-pip-version-check", "--", *requirements],
         f"pip install {label}", timeout)  # fmt: skip


VERIFY_TIMEOUT_S = 120.0
"""Longest the check of an environment (its interpreter importing onnxruntime) may take."""

_VERIFY = "import sys; del sys.path[0]; import numpy, onnxruntime; print(onnxruntime.__version__)"


def verify(python: Path, requirements: Sequence[str], expected: str | None = None) -> str:
    """The onnxruntime version that ``python`` imports (with numpy, as a worker does);
    :class:`EnvironmentSetupError` saying what is wrong where it cannot: no interpreter,
    an import that fails (its error quoted) or crashes (a damaged library), or another
    version than ``expected`` or than the requirements pin."""
    if not python.is_file():
        raise EnvironmentSetupError(f"its interpreter {python} is missing")
    try:
        done = subprocess.run(
            [str(python), "-c", _VERIFY], stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=VERIFY_TIMEOUT_S, env=_clean_env(),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise EnvironmentSetupError(
            f"importing onnxruntime took more than {VERIFY_TIMEOUT_S:g} s"
        ) from None
    except OSError as exc:
        raise EnvironmentSetupError(f"its interpreter {python} does not run: {exc}") from None
    if done.returncode != 0:
        if done.returncode < 0:
            try:
                how = f"crashed ({signal.Signals(-done.returncode).name})"
            except ValueError:
                how = f"crashed (signal {-done.returncode})"
        else:
            how = "failed"
        tail = "\n".join(f"    {line}" for line in done.stderr.strip().splitlines()[-12:])
        raise EnvironmentSetupError(f"importing onnxruntime {how}:\n{tail}".rstrip())
    version = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    want = expected or pinned_onnxruntime(requirements)
    if want and version != want:
        raise EnvironmentSetupError(f"it imports onnxruntime {version}, not {want}")
    return version


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _recorded_version(ready: Path) -> str | None:
    try:
        data = json.loads(ready.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = data.get("onnxruntime") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


def ensure(spec: EnvSpec, *, cache: Path | None = None, timeout: float = INSTALL_TIMEOUT_S) -> Path:
    """The Python executable of ``spec``: an existing interpreter checked, or the cached
    environment of its requirements, created first when missing (under a lock).

    A cached environment is verified before it is used (its interpreter imports
    onnxruntime, at the version it had when made): a damaged one (a removed interpreter,
    a truncated library, a package removed) is made again, with a warning that says why;
    ``ready.json`` is written only once a new environment passed that check."""
    if spec.interpreter is not None:
        return interpreter_of(spec.interpreter)
    root_dir = cache or cache_dir()
    key = spec.key()
    root = root_dir / key
    ready = root / READY
    python = _venv_python(root)
    if ready.is_file():
        try:
            verify(python, spec.requirements, _recorded_version(ready))
            return python
        except EnvironmentSetupError:
            pass  # checked again under the lock, then made again
    with file_lock(root_dir / f"{key}.lock", timeout=timeout, what=f"environment {spec.label}"):
        if ready.is_file():  # made (or repaired) by another process while we waited?
            try:
                verify(python, spec.requirements, _recorded_version(ready))
                return python
            except EnvironmentSetupError as exc:
                warnings.warn(
                    f"environment {spec.label} in the cache ({root}) is damaged: {exc}; "
                    "making it again",
                    stacklevel=2,
                )
        if root.exists():  # an install that was interrupted, or a damaged one
            shutil.rmtree(root, ignore_errors=True)
            if root.exists():
                raise EnvironmentSetupError(
                    f"environment {spec.label}: could not remove the damaged cache entry "
                    f"{root}; delete it and retry"
                )
        try:
            create(root, spec.requirements, timeout)
            try:
                version = verify(python, spec.requirements)
            except EnvironmentSetupError as exc:
                raise EnvironmentSetupError(
                    f"environment {spec.label}: installed, but not usable: {exc}"
                ) from None
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        info = {
            "requirements": list(spec.requirements),
            "python": sys.executable,
            "onnxruntime": version,
        }
        write_atomic(ready, json.dumps(info, indent=1, sort_keys=True) + "\n")
    return python
