"""The machine and software a run measured on: environment, machine fingerprint, git state.

Nothing here raises on a missing tool or an unusual platform: unknown values are ``None``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

GIT_TIMEOUT_S = 5.0
_GIB = 1 << 30


def _cpu_model() -> str | None:
    """CPU model name: /proc/cpuinfo on Linux, ``platform.processor()`` elsewhere."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    # x86: "model name"; some ARM kernels: "Model" or "Hardware".
                    if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                        return value.strip()
        except OSError:
            pass
    name = platform.processor() or platform.machine()
    return name or None


def _total_memory() -> int | None:
    """Total physical memory in bytes, or None when it cannot be read."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/meminfo", encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("MemTotal:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
        if pages > 0 and size > 0:
            return int(pages * size)
    except (AttributeError, ValueError, OSError):
        pass
    return None


def _module_version(name: str) -> str | None:
    try:
        module = __import__(name)
    except Exception:  # a broken install must not break the run
        return None
    version = getattr(module, "__version__", None)
    return None if version is None else str(version)


def _providers() -> list[str]:
    try:
        import onnxruntime

        return [str(p) for p in onnxruntime.get_available_providers()]
    except Exception:
        return []


def collect_environment() -> dict[str, Any]:
    """Versions, platform and hardware of this machine, plus its ``fingerprint``."""
    env: dict[str, Any] = {
        "ort_version": _module_version("onnxruntime"),
        "providers": _providers(),
        "onnx_version": _module_version("onnx"),
        "numpy_version": _module_version("numpy"),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "os": platform.platform(),
        "system": platform.system(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "memory_bytes": _total_memory(),
    }
    env["fingerprint"] = machine_fingerprint(env)
    return env


def machine_fingerprint(env: Mapping[str, Any]) -> str:
    """Stable 12-hex-digit hash of the hardware: CPU model, cores, memory (GiB), OS, arch.

    Software versions (ORT, Python) are deliberately left out: they are separate keys.
    """
    memory = env.get("memory_bytes")
    key = {
        "cpu_model": env.get("cpu_model"),
        "logical_cores": env.get("logical_cores"),
        "memory_gib": None if memory is None else round(int(memory) / _GIB),
        "system": env.get("system"),
        "machine": env.get("machine"),
    }
    blob = json.dumps(key, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def _git(rootdir: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=rootdir,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip()


def git_info(rootdir: Path | str) -> dict[str, Any]:
    """``commit``, ``branch`` and ``dirty`` of the git checkout at rootdir (None when unknown).

    Never raises: outside a repository or without git every value is None.
    """
    root = Path(rootdir)
    commit = _git(root, "rev-parse", "HEAD")
    if not commit:
        return {"commit": None, "branch": None, "dirty": None}
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "branch": None if branch in (None, "", "HEAD") else branch,
        "dirty": None if status is None else bool(status),
    }
