"""The README's Quick start: ``pytest --ortperf benchmarks/examples --ortperf-report=...``
runs from the repository root, exits 0 with no baselines, writes the HTML report, and
leaves nothing behind in the repository.

The suite runs in a subprocess at a tiny budget: this checks that it runs, not its timings.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "benchmarks" / "examples"
COMPARISONS = (
    "gemm_concat_64",
    "gemm_concat_256",
    "attention_fused",
    "kmeans_optimized",
    "zipmap_cost",
    "skl_kmeans_optimized",
)
MISSING = [m for m in ("sklearn", "skl2onnx") if importlib.util.find_spec(m) is None]

pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the Quick start suite needs {' and '.join(MISSING)}: pip install -e '.[benchmarks]'",
)


def _snapshot() -> tuple[set[str], dict[str, tuple[int, int]]]:
    """What a run could leave in the repository: the names of the root's entries and of the
    files under benchmarks/examples (baselines included) and the default store; and the
    modification time and size of the files a run writes (store, reports, ORT profiles,
    baselines), so that overwriting one that was already there shows too."""
    names = {path.name for path in ROOT.iterdir()}
    for folder in (ROOT / ".ortperf", EXAMPLES):
        if folder.is_dir():
            names |= {
                str(p.relative_to(ROOT)) for p in folder.rglob("*") if "__pycache__" not in p.parts
            }
    written = [
        *ROOT.glob("*.html"),
        *ROOT.glob("*.sqlite"),
        *ROOT.glob("onnxruntime_profile*.json"),
        *(ROOT / ".ortperf").glob("**/*"),
        *EXAMPLES.glob("**/__ortperf__/*"),
        *EXAMPLES.glob("**/onnxruntime_profile*.json"),
    ]
    stats: dict[str, tuple[int, int]] = {}
    for path in written:
        stat = path.stat()
        stats[str(path.relative_to(ROOT))] = (stat.st_mtime_ns, stat.st_size)
    return names, stats


def test_quickstart_suite_writes_report_and_leaves_no_trace(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTEST_ADDOPTS", "ORTPERF_STORE", "GITHUB_STEP_SUMMARY")
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    before = _snapshot()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--ortperf",
            "benchmarks/examples",
            f"--ortperf-report={report}",
            f"--ortperf-store={tmp_path / 'results.sqlite'}",
            "--ortperf-budget=0.05",
            # Should someone have stored baselines of the examples, a run at this budget
            # must not be judged against them: only a tenfold slowdown would fail.
            "--ortperf-threshold=1000%",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    after = _snapshot()
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-5000:]
    assert re.search(r"=+ ortperf =+", proc.stdout), output[-5000:]
    assert report.is_file(), output[-5000:]
    # The report breaks long names with <wbr> tags.
    html = report.read_text(encoding="utf-8").replace("<wbr>", "")
    missing = [name for name in COMPARISONS if name not in html]
    assert not missing, f"not in the report: {missing}"
    assert (tmp_path / "results.sqlite").is_file()
    added = sorted(after[0] - before[0])
    changed = sorted(k for k, v in after[1].items() if before[1].get(k) != v)
    assert not added and not changed, f"left in the repository: {added}; written: {changed}"
