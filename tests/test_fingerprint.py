"""Fingerprints of gated entries: the machine-fact readers (machine) and the comparison rules
(gating.fingerprint)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ortperf import machine, models
from pytest_ortperf.gating import fingerprint as fp
from pytest_ortperf.measuring.session import OrtSession

ENV = {
    "cpu_model": "Intel Xeon 8375C",
    "isa": ["avx", "avx2", "avx512_vnni", "avx512f", "fma"],
    "effective_cpus": 2,
    "logical_cores": 8,
    "ort_version": "1.32.0",
    "ort_build": "onnxruntime==1.32.0",
    "python_version": "3.11.9",
    "numpy_version": "2.1.0",
    "onnx_version": "1.17.0",
    "fingerprint": "abc",
}
SESSION = {
    "model": "lr",
    "providers": ["CPUExecutionProvider"],
    "threads": 1,
    "spinning": False,
    "optimization": "all",
}
OTHER = {
    "cpu_model": "AMD EPYC 7763",
    "isa": ["avx", "avx2", "fma"],
    "effective_cpus": 4,
    "ort_version": "1.31.0",
    "ort_build": "onnxruntime-gpu==1.32.0",
    "providers": ["CUDAExecutionProvider", "CPUExecutionProvider"],
    "threads": 4,
    "spinning": True,
    "optimization": "basic",
    "python_version": "3.12.1",
    "numpy_version": "1.26.4",
    "onnx_version": "1.16.0",
}

X86_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu vme pni ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd \
avx512bw avx512vl avx512_vnni md_clear arch_capabilities

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu vme pni ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd \
avx512bw avx512vl avx512_vnni arch_capabilities
"""
ARM_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
asimddp sve i8mm bf16 sve2 svei8mm svebf16
CPU implementer\t: 0x41
"""


# -- machine: /proc/cpuinfo ---------------------------------------------------------------


def test_isa_of_x86_keeps_relevant_flags_common_to_all_processors(tmp_path: Path) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(X86_CPUINFO)
    isa = machine.parse_isa(path.read_text())
    assert isa == sorted(
        ["sse3", "ssse3", "fma", "sse4_1", "sse4_2", "avx", "f16c", "avx2", "avx512f",
         "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_vnni"]
    )  # fmt: skip
    # md_clear (a microcode flag, on one processor only) and fpu are not kernel-relevant.
    assert "md_clear" not in isa and "fpu" not in isa
    if sys.platform.startswith("linux"):
        assert machine._isa(path) == isa


def test_isa_of_arm_reads_features(tmp_path: Path) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(ARM_CPUINFO)
    assert machine.parse_isa(path.read_text()) == sorted(
        ["asimd", "fphp", "asimdhp", "asimddp", "sve", "i8mm", "bf16", "sve2", "svei8mm",
         "svebf16"]
    )  # fmt: skip


def test_isa_unknown_without_flags_line(tmp_path: Path) -> None:
    assert machine.parse_isa("processor\t: 0\nmodel name\t: x\n") is None
    assert machine.parse_isa("flags\t: fpu vme\n") == []  # known: no relevant flag
    assert machine._isa(tmp_path / "missing") is None


# -- machine: cgroups and affinity ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("max 100000\n", None),
        ("200000 100000\n", 2),
        ("150000 100000\n", 2),
        ("50000 100000\n", 1),
        ("", None),
        ("garbage\n", None),
    ],
)
def test_cpu_max(text: str, cpus: int | None) -> None:
    assert machine.parse_cpu_max(text) == cpus


def test_cfs_quota() -> None:
    assert machine.parse_cfs_quota("-1\n", "100000\n") is None
    assert machine.parse_cfs_quota("300000\n", "100000\n") == 3
    assert machine.parse_cfs_quota("250000\n", "100000\n") == 3
    assert machine.parse_cfs_quota("x", "100000") is None


def test_cgroup_v2_quota_in_a_container(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert machine.cgroup_cpu_limit(tmp_path, "0::/\n") == 2
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert machine.cgroup_cpu_limit(tmp_path, "0::/\n") is None


def test_cgroup_v2_smallest_quota_along_the_hierarchy(tmp_path: Path) -> None:
    leaf = tmp_path / "ci.slice" / "job.scope"
    leaf.mkdir(parents=True)
    (leaf / "cpu.max").write_text("max 100000\n")
    (tmp_path / "ci.slice" / "cpu.max").write_text("200000 100000\n")
    assert machine.cgroup_cpu_limit(tmp_path, "0::/ci.slice/job.scope\n") == 2
    # The process's cgroup is not visible under the mount: the mount's root counts.
    (tmp_path / "cpu.max").write_text("400000 100000\n")
    assert machine.cgroup_cpu_limit(tmp_path, "0::/docker/abc\n") == 4


def test_cgroup_v1_cfs_quota(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu,cpuacct"
    cpu.mkdir()
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    self_cgroup = "4:memory:/\n3:cpu,cpuacct:/\n0::/\n"
    assert machine.cgroup_cpu_limit(tmp_path, self_cgroup) is None
    (cpu / "cpu.cfs_quota_us").write_text("300000\n")
    assert machine.cgroup_cpu_limit(tmp_path, self_cgroup) == 3


def test_no_cgroup_files_means_no_limit(tmp_path: Path) -> None:
    assert machine.cgroup_cpu_limit(tmp_path, "") is None
    assert machine.cgroup_cpu_limit(tmp_path / "missing", "0::/x\n") is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroups are Linux's")
def test_effective_cpus_is_affinity_limited_by_the_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert machine.effective_cpus(tmp_path, "") == 4
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    assert machine.effective_cpus(tmp_path, "0::/\n") == 2
    (tmp_path / "cpu.max").write_text("800000 100000\n")
    assert machine.effective_cpus(tmp_path, "0::/\n") == 4


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_effective_cpus_follows_the_real_affinity_mask() -> None:
    cpu = min(os.sched_getaffinity(0))
    code = (
        "import os\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "from pytest_ortperf import machine\n"
        "e = machine.collect_environment()\n"
        "print(e['effective_cpus'], e['logical_cores'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    effective, logical = out.stdout.split()
    assert effective == "1" and int(logical) == os.cpu_count()


def test_collect_environment_has_the_fingerprint_keys() -> None:
    data = machine.collect_environment()
    assert data["effective_cpus"] is None or 1 <= data["effective_cpus"] <= data["logical_cores"]
    assert data["ort_build"] is None or data["ort_build"].endswith(f"=={data['ort_version']}")
    if sys.platform.startswith("linux"):
        assert isinstance(data["isa"], list) and data["isa"] == sorted(data["isa"])
    found = fp.fingerprint_of(data, {k: None for k in fp.SESSION_KEYS})
    assert list(found) == list(fp.KEYS)


# -- gating.fingerprint --------------------------------------------------------------------


def test_keys() -> None:
    assert fp.LATENCY_KEYS == fp.KEYS
    assert set(fp.RATIO_KEYS) < set(fp.KEYS)
    assert {"effective_cpus", "python_version", "numpy_version", "onnx_version"}.isdisjoint(
        fp.RATIO_KEYS
    )


def test_fingerprint_of_takes_each_key_from_its_source() -> None:
    found = fp.fingerprint_of(ENV, SESSION)
    assert list(found) == list(fp.KEYS)
    assert found["providers"] == ["CPUExecutionProvider"] and found["threads"] == 1
    assert "logical_cores" not in found and "model" not in found
    # An entry written before a key existed lacks it: left out, not None.
    old = fp.fingerprint_of({"cpu_model": "Xeon", "ort_version": "1.32.0"}, SESSION)
    assert "isa" not in old and "effective_cpus" not in old and old["cpu_model"] == "Xeon"
    # isa stored as one string reads as the same sorted list.
    assert fp.fingerprint_of({"isa": "fma avx2 avx"}, {})["isa"] == ["avx", "avx2", "fma"]


@pytest.mark.parametrize("key", fp.KEYS)
def test_each_key_that_differs_is_named(key: str) -> None:
    base = fp.fingerprint_of(ENV, SESSION)
    current = {**base, key: OTHER[key]}
    found = fp.differences(base, current, keys=fp.KEYS)
    assert [d.key for d in found] == [key]
    assert found[0].baseline == base[key] and found[0].current == OTHER[key]
    assert found[0].describe().startswith(f"{key}: ")
    assert fp.differences(base, current, keys=fp.KEYS, allowed={key}) == []


def test_ratio_keys_ignore_what_cancels_in_a_ratio() -> None:
    base = fp.fingerprint_of(ENV, SESSION)
    current = {**base, "effective_cpus": 64, "python_version": "3.13.0", "numpy_version": "2.2"}
    assert fp.differences(base, current, keys=fp.RATIO_KEYS) == []
    assert [d.key for d in fp.differences(base, current, keys=fp.LATENCY_KEYS)] == [
        "effective_cpus",
        "python_version",
        "numpy_version",
    ]


def test_differences_in_key_order_and_described() -> None:
    base = fp.fingerprint_of(ENV, SESSION)
    current = fp.fingerprint_of({**ENV, "cpu_model": "AMD EPYC 7763", "ort_version": "1.31.0"},
                                SESSION)  # fmt: skip
    found = fp.differences(base, current, keys=fp.RATIO_KEYS)
    assert [d.describe() for d in found] == [
        "cpu_model: 'Intel Xeon 8375C' -> 'AMD EPYC 7763'",
        "ort_version: '1.32.0' -> '1.31.0'",
    ]
    threads = fp.differences(base, {**base, "threads": 4}, keys=fp.KEYS)
    assert [d.describe() for d in threads] == ["threads: 1 -> 4"]


def test_isa_difference_names_flags_lost_and_gained() -> None:
    base = {"isa": ["avx", "avx2", "avx512_vnni", "avx512f", "fma"]}
    lost = fp.differences(base, {"isa": ["avx", "avx2", "fma"]}, keys=["isa"])
    assert [d.describe() for d in lost] == ["isa: -avx512_vnni -avx512f"]
    both = fp.differences(base, {"isa": ["avx", "avx2", "fma", "amx_tile"]}, keys=["isa"])
    assert both[0].describe() == "isa: -avx512_vnni -avx512f +amx_tile"
    # Order and storage form do not matter for a set of flags.
    assert fp.differences(base, {"isa": "fma avx512f avx512_vnni avx2 avx"}, keys=["isa"]) == []
    unknown = fp.differences(base, {"isa": None}, keys=["isa"])
    assert unknown[0].describe() == "isa: ['avx', 'avx2', 'avx512_vnni', 'avx512f', 'fma'] -> None"


def test_provider_order_matters() -> None:
    base = {"providers": ["CUDAExecutionProvider", "CPUExecutionProvider"]}
    swapped = {"providers": ("CPUExecutionProvider", "CUDAExecutionProvider")}
    assert [d.key for d in fp.differences(base, swapped, keys=["providers"])] == ["providers"]
    assert fp.differences(base, {"providers": tuple(base["providers"])}, keys=["providers"]) == []


def test_absent_in_baseline_is_unchecked_and_none_matches_none() -> None:
    old = {"cpu_model": "Xeon", "ort_version": "1.32.0", "threads": 1}
    current = {**fp.fingerprint_of(ENV, SESSION), "cpu_model": "Xeon"}
    assert fp.differences(old, current, keys=fp.RATIO_KEYS) == []
    assert fp.unchecked(old, fp.RATIO_KEYS) == [
        "isa", "ort_build", "providers", "spinning", "optimization"
    ]  # fmt: skip
    assert fp.unchecked(current, fp.KEYS) == []
    assert fp.differences({"isa": None}, {"isa": None}, keys=["isa"]) == []
    # Known in the baseline, unknown or missing now: a difference.
    gone = fp.differences({"cpu_model": "Xeon"}, {}, keys=["cpu_model"])
    assert [d.describe() for d in gone] == ["cpu_model: 'Xeon' -> None"]
    appeared = fp.differences({"cpu_model": None}, {"cpu_model": "Xeon"}, keys=["cpu_model"])
    assert [d.key for d in appeared] == ["cpu_model"]


def test_difference_is_frozen() -> None:
    d = fp.Difference("threads", 1, 4)
    with pytest.raises(AttributeError):
        d.key = "x"  # type: ignore[misc]


def test_check_allowed() -> None:
    assert fp.check_allowed([]) == []
    assert fp.check_allowed(["cpu_model, isa", "ort_version", "isa", ""]) == [
        "cpu_model",
        "isa",
        "ort_version",
    ]
    with pytest.raises(ValueError, match=r"unknown fingerprint key 'cores'.*valid keys: cpu_model"):
        fp.check_allowed(["isa", "cores"])


# -- actual providers ----------------------------------------------------------------------


def test_session_info_reports_the_providers_really_used() -> None:
    cpu = OrtSession.create(models.linear_regression())
    assert cpu.info().providers == tuple(cpu.sess.get_providers()) == ("CPUExecutionProvider",)
    import onnxruntime as ort

    if "AzureExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs a second available provider to show ORT's own choice")
    # Asked for Azure alone, ORT appends the CPU provider as the fallback.
    azure = OrtSession.create(models.linear_regression(), providers=["AzureExecutionProvider"])
    assert azure.settings.providers == ("AzureExecutionProvider",)
    assert azure.info().providers == ("AzureExecutionProvider", "CPUExecutionProvider")
    assert azure.info().to_dict()["providers"] == list(azure.sess.get_providers())
