"""The machine and software a run measured on: environment, machine fingerprint, git state.

Nothing here raises on a missing tool or an unusual platform: unknown values are ``None``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

_T = TypeVar("_T")
GIT_TIMEOUT_S = 5.0
_GIB = 1 << 30
CPUINFO = Path("/proc/cpuinfo")
CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")

X86_ISA = frozenset(
    {
        "sse3", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c",
        "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx512vbmi",
        "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "avx_vnni_int8",
        "amx_tile", "amx_int8", "amx_bf16", "amx_fp16",
    }
)  # fmt: skip
"""x86 flags (``/proc/cpuinfo`` names) that select ORT's MLAS kernels."""
ARM_ISA = frozenset(
    {
        "asimd", "asimddp", "asimdhp", "fphp", "i8mm", "bf16",
        "sve", "sve2", "svei8mm", "svebf16", "sme", "sme2",
    }
)  # fmt: skip
"""ARM ``Features`` that select ORT's MLAS kernels."""
_FLAG_ALIASES = {"pni": "sse3"}  # the kernel's name for SSE3 ("Prescott New Instructions")

ORT_DISTRIBUTIONS = (
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxruntime-openvino",
    "onnxruntime-directml",
    "onnxruntime-qnn",
    "onnxruntime-rocm",
    "onnxruntime-migraphx",
    "onnxruntime-cann",
    "onnxruntime-training",
    "onnxruntime-silicon",
    "ort-nightly",
    "ort-nightly-gpu",
    "ort-nightly-directml",
)
"""Distributions that install the ``onnxruntime`` package, in the order they are looked up."""


def _read_text(path: Path | str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None


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


def parse_isa(cpuinfo: str) -> list[str] | None:
    """The sorted ORT-relevant CPU flags of a ``/proc/cpuinfo`` text (x86 ``flags``, ARM
    ``Features``), or None when it has no such line. Only the flags common to every
    processor listed count; other flags are dropped so a kernel or microcode update that
    adds an unrelated one keeps baselines comparable."""
    common: set[str] | None = None
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep or key.strip() not in ("flags", "Features"):
            continue
        flags = {_FLAG_ALIASES.get(f, f) for f in value.split()}
        common = flags if common is None else common & flags
    if common is None:
        return None
    return sorted(common & (X86_ISA | ARM_ISA))


def _isa(cpuinfo: Path | str = CPUINFO) -> list[str] | None:
    if not sys.platform.startswith("linux"):
        return None
    text = _read_text(cpuinfo)
    return None if text is None else parse_isa(text)


def _whole_cpus(quota: int, period: int) -> int | None:
    if quota <= 0 or period <= 0:
        return None
    return max(1, math.ceil(quota / period))


def parse_cpu_max(text: str) -> int | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` (``"quota period"``), rounded up; None for
    ``max`` (no limit) or an unreadable text."""
    fields = text.split()
    if not fields or fields[0] == "max":
        return None
    try:
        return _whole_cpus(int(fields[0]), int(fields[1]) if len(fields) > 1 else 100_000)
    except ValueError:
        return None


def parse_cfs_quota(quota: str, period: str) -> int | None:
    """CPUs allowed by cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, rounded up;
    None for ``-1`` (no limit) or unreadable texts."""
    try:
        return _whole_cpus(int(quota.strip()), int(period.strip()))
    except ValueError:
        return None


def _cgroup_paths(self_cgroup: str) -> tuple[str, str]:
    """This process's cgroup v2 path and cgroup v1 ``cpu`` path from ``/proc/self/cgroup``."""
    v2 = v1 = "/"
    for line in self_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            v2 = path or "/"
        elif "cpu" in controllers.split(","):
            v1 = path or "/"
    return v2, v1


def _cgroup_dirs(mount: Path, path: str) -> list[Path]:
    """The cgroup at ``path`` under ``mount`` and its ancestors (a quota anywhere above
    limits it too). When that cgroup is not visible (a container sees its own cgroup as the
    mount's root), just the mount."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    if not mount.joinpath(*parts).is_dir():
        return [mount]
    return [mount.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def cgroup_cpu_limit(root: Path | str = CGROUP_ROOT, self_cgroup: str | None = None) -> int | None:
    """Whole CPUs this process's cgroup quota allows (v2 ``cpu.max`` or v1 CFS quota, the
    smallest along the hierarchy), or None without a quota. ``self_cgroup`` is the text of
    ``/proc/self/cgroup`` (read when None)."""
    root = Path(root)
    if self_cgroup is None:
        self_cgroup = _read_text(SELF_CGROUP) or ""
    v2_path, v1_path = _cgroup_paths(self_cgroup)
    limits: list[int] = []
    for mount in (root, root / "unified"):  # unified: the v2 tree of a hybrid layout
        for directory in _cgroup_dirs(mount, v2_path):
            text = _read_text(directory / "cpu.max")
            limit = None if text is None else parse_cpu_max(text)
            if limit is not None:
                limits.append(limit)
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        mount = root / name
        if not mount.is_dir():
            continue
        for directory in _cgroup_dirs(mount, v1_path):
            quota = _read_text(directory / "cpu.cfs_quota_us")
            period = _read_text(directory / "cpu.cfs_period_us")
            limit = None if quota is None or period is None else parse_cfs_quota(quota, period)
            if limit is not None:
                limits.append(limit)
    return min(limits, default=None)


def _affinity_count() -> int | None:
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        try:
            return len(getaffinity(0)) or None
        except OSError:
            pass
    return os.cpu_count()


def effective_cpus(
    cgroup_root: Path | str = CGROUP_ROOT, self_cgroup: str | None = None
) -> int | None:
    """CPUs this process can really use: its affinity mask (``os.cpu_count()`` where there
    is none), further limited by a cgroup CPU quota. None when unknown."""
    count = _affinity_count()
    limit = None
    if sys.platform.startswith("linux"):
        limit = cgroup_cpu_limit(cgroup_root, self_cgroup)
    if count is None or limit is None:
        return count if limit is None else limit
    return min(count, limit)


def _ort_build(ort_version: str | None) -> str | None:
    """``name==version`` of the installed onnxruntime distribution: the first of
    :data:`ORT_DISTRIBUTIONS` whose version is the imported module's, else the first found."""
    from importlib import metadata

    found: list[str] = []
    for name in ORT_DISTRIBUTIONS:
        try:
            version = metadata.version(name)
        except Exception:  # not installed, or broken metadata
            continue
        if version == ort_version:
            return f"{name}=={version}"
        found.append(f"{name}=={version}")
    return found[0] if found else None


def _safely(read: Callable[..., _T], *args: Any) -> _T | None:
    try:
        return read(*args)
    except Exception:  # an odd platform must not break the run
        return None


def collect_environment() -> dict[str, Any]:
    """Versions, platform and hardware of this machine, plus its ``fingerprint``."""
    ort_version = _module_version("onnxruntime")
    env: dict[str, Any] = {
        "ort_version": ort_version,
        "ort_build": _safely(_ort_build, ort_version),
        "providers": _providers(),
        "onnx_version": _module_version("onnx"),
        "numpy_version": _module_version("numpy"),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "os": platform.platform(),
        "system": platform.system(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "isa": _safely(_isa),
        "logical_cores": os.cpu_count(),
        "effective_cpus": _safely(effective_cpus),
        "memory_bytes": _total_memory(),
        "ci": on_ci(),
    }
    env["fingerprint"] = machine_fingerprint(env)
    return env


def on_ci() -> bool:
    """Whether this run is a CI job: ``$CI`` set, and not to ``false``, ``0`` or ``no``
    (GitHub Actions, GitLab CI, CircleCI, Travis, Buildkite and others set ``CI=true``;
    elsewhere, set it in the job). History baselines pool CI runs only where there are
    some (:mod:`pytest_ortperf.gating.history_baseline`)."""
    value = os.environ.get("CI", "").strip().lower()
    return value not in ("", "false", "0", "no")


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


CI_BRANCH_VARIABLES = (
    "GITHUB_HEAD_REF",  # GitHub Actions, a pull request's source branch
    "GITHUB_REF_NAME",  # GitHub Actions, a push
    "CI_COMMIT_BRANCH",  # GitLab CI, a branch pipeline
    "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME",  # GitLab CI, a merge request pipeline
    "BUILDKITE_BRANCH",
    "CIRCLE_BRANCH",
    "BRANCH_NAME",  # Jenkins multibranch
)
"""Where CI systems name the branch when they check out a detached commit, first set wins."""


def _ci_branch(environ: Mapping[str, str]) -> str | None:
    for name in CI_BRANCH_VARIABLES:
        value = environ.get(name, "").strip()
        if value and not (name == "GITHUB_REF_NAME" and value.endswith("/merge")):
            return value
    return None


def git_info(rootdir: Path | str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``commit``, ``branch`` and ``dirty`` of the git checkout at rootdir (None when unknown).

    On a detached HEAD (how most CI systems check out) the branch is the one the CI system
    names (:data:`CI_BRANCH_VARIABLES` of ``environ``, default ``os.environ``). Never
    raises: outside a repository or without git every value is None.
    """
    root = Path(rootdir)
    commit = _git(root, "rev-parse", "HEAD")
    if not commit:
        return {"commit": None, "branch": None, "dirty": None}
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    if branch in (None, "", "HEAD"):
        branch = _ci_branch(os.environ if environ is None else environ)
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "branch": branch,
        "dirty": None if status is None else bool(status),
    }
