"""The examples of the README and of the documentation pages run as written.

Every fenced block preceded by ``<!-- runnable: FILE ... -->``, in README.md or in any page
under docs/pages/, is saved under FILE in one empty directory (``pyproject.toml`` included,
so its ini keys are the ones the examples run under) and run there in a subprocess with the
installed plugin: the ``test_*.py`` files with plain ``pytest`` (smoke) and with
``pytest --ortperf``, the other ``.py`` files as scripts after a ``--ortperf`` run has filled
the store. A FILE may be marked in several documents only with the same code (the README's
example repeated in the docs). The ``ortperf`` command lines of the docs run too (the store
commands on a store of two runs, the ``profile`` ones on a saved model), the README's links
are checked, and the site builds with ``mkdocs build --strict``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = DOCS / "pages"
README_MAX_LINES = 300
# test_attention.py, pyproject.toml, read_results.py, test_upgrade.py, test_cold_start.py,
# test_tails.py, test_recorded_inputs.py, test_devices.py, test_custom_ops.py, test_profiles.py
MIN_BLOCKS = 10
BLOCK = re.compile(
    r"^<!-- runnable: (?P<name>[\w.-]+)(?P<note>[^\n]*?)-->\n```(?P<lang>\w+)\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
MARKER = re.compile(r"^<!-- runnable:", re.MULTILINE)


def documents() -> list[Path]:
    """The README, then every page of the documentation site."""
    return [README, *sorted(PAGES.rglob("*.md"))]


def _blocks_of(doc: Path) -> list[tuple[str, str]]:
    """(FILE, code) of every marked block of one document, in order."""
    text = doc.read_text(encoding="utf-8")
    blocks = [(match["name"], match["code"]) for match in BLOCK.finditer(text)]
    # a marker the pattern does not take (a typo, a blank line before the fence) is an error
    assert len(MARKER.findall(text)) == len(blocks), (
        f"{doc.relative_to(ROOT)}: a runnable marker is not followed by a block"
    )
    return blocks


def runnable_blocks() -> dict[str, str]:
    """FILE -> code of every marked block of the README and the docs pages."""
    blocks: dict[str, str] = {}
    where: dict[str, Path] = {}
    for doc in documents():
        for name, code in _blocks_of(doc):
            if name in blocks:
                assert code == blocks[name], (
                    f"{where[name].relative_to(ROOT)} and {doc.relative_to(ROOT)} mark "
                    f"different blocks runnable as {name}"
                )
                continue
            blocks[name] = code
            where[name] = doc
    return blocks


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTEST_ADDOPTS", "ORTPERF_STORE", "GITHUB_STEP_SUMMARY")
        and not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # the upgrade example's environments go to a cache of this test run, not the home dir
    if ENV_CACHE is not None:
        env.setdefault("ORTPERF_ENV_CACHE", str(ENV_CACHE))
    return env


ENV_CACHE: Path | None = None


@pytest.fixture(scope="module", autouse=True)
def _env_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    global ENV_CACHE
    ENV_CACHE = tmp_path_factory.mktemp("ortperf-envs")


def _run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], project)


def _explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-3000:]}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty directory holding every runnable block under its name (one per test, so
    no test sees what another one's run wrote)."""
    for name, code in runnable_blocks().items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    return tmp_path


def _test_files(project: Path) -> list[str]:
    return sorted(p.name for p in project.glob("test_*.py"))


CUDA_ONLY = '@pytest.mark.ortperf(providers=["CUDAExecutionProvider"])'
"""The marker of an example that runs where onnxruntime has CUDA and is skipped elsewhere."""


def _passed(project: Path) -> str:
    """``N passed``, N the number of test functions in the runnable test files, less the
    CUDA-only ones where onnxruntime has no CUDA (``M skipped``: they say why)."""
    import onnxruntime

    texts = [(project / name).read_text() for name in _test_files(project)]
    count = sum(len(re.findall(r"^def test_", text, re.MULTILINE)) for text in texts)
    skipped = 0
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        skipped = sum(text.count(CUDA_ONLY) for text in texts)
    if skipped:
        return rf"\b{count - skipped} passed, {skipped} skipped\b"
    return rf"\b{count} passed\b"


def test_readme_marks_its_runnable_blocks() -> None:
    blocks = runnable_blocks()
    assert len(blocks) >= MIN_BLOCKS, f"only {sorted(blocks)} are marked runnable"
    assert {"test_attention.py", "pyproject.toml"} <= {name for name, _ in _blocks_of(README)}
    for name, code in blocks.items():
        if name.endswith(".py"):
            compile(code, name, "exec")
    text = README.read_text(encoding="utf-8")
    assert "tests/test_readme.py" in text  # the README says which test runs them
    for doc in documents():
        python_blocks = len(
            re.findall(r"^```python$", doc.read_text(encoding="utf-8"), re.MULTILINE)
        )
        marked = sum(name.endswith(".py") for name, _ in _blocks_of(doc))
        assert marked == python_blocks, (
            f"every Python example of {doc.relative_to(ROOT)} must be runnable"
        )


def test_readme_is_short_and_links_every_page() -> None:
    """At most README_MAX_LINES lines; every docs page and every relative link it names
    exists, and every page of the site is linked from it."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    targets = {
        link.split("#")[0]
        for link in re.findall(r"\]\(([^)\s]+)\)", text)
        if not link.startswith(("http://", "https://", "#"))
    }
    missing = sorted(t for t in targets if not (ROOT / t).exists())
    assert not missing, f"README links to files that do not exist: {missing}"
    pages = {str(p.relative_to(ROOT)) for p in PAGES.rglob("*.md")}
    assert pages, "no documentation pages under docs/pages"
    unlinked = sorted(pages - targets)
    assert not unlinked, f"pages the README does not link: {unlinked}"


def test_docs_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict`` (as .ci/run runs it): every page in the nav, every link and
    anchor resolves."""
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    proc = _run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(DOCS / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        ROOT,
    )
    assert proc.returncode == 0, _explain(proc)
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "report.png").is_file()  # docs/hooks.py serves it


def test_blocks_pass_in_smoke_mode(project: Path) -> None:
    files = _test_files(project)
    proc = _pytest(project, "-q", *files)
    assert proc.returncode == 0, _explain(proc)
    assert re.search(_passed(project), proc.stdout), _explain(proc)
    assert not list(project.glob(".ortperf")), "plain pytest wrote a store"


def test_blocks_pass_measured(project: Path) -> None:
    files = _test_files(project)
    proc = _pytest(
        project, "-q", "--ortperf", "--ortperf-budget=0.2", "--ortperf-store=none", *files
    )
    assert proc.returncode == 0, _explain(proc)
    assert re.search(_passed(project), proc.stdout), _explain(proc)
    for name in ("attention", "batch1"):
        assert name in proc.stdout, _explain(proc)
    # pyproject.toml's ortperf_report took effect
    assert (project / "ortperf-report.html").is_file(), _explain(proc)


def test_scripts_read_the_store(project: Path) -> None:
    proc = _pytest(project, "-q", "--ortperf", "--ortperf-budget=0.2", "test_attention.py")
    assert proc.returncode == 0, _explain(proc)
    assert (project / ".ortperf" / "results.sqlite").is_file(), _explain(proc)
    scripts = [n for n in runnable_blocks() if n.endswith(".py") and not n.startswith("test_")]
    assert scripts
    for script in scripts:
        out = _run([sys.executable, script], project)
        assert out.returncode == 0, _explain(out)
        # the comparison named "attention" of test_attention_fusion was stored and read back
        assert re.search(r"test_attention_fusion\s+attention\s+compare", out.stdout), _explain(out)


STORE_COMMANDS_SKIPPED = ("profile", "ab")
"""``ortperf`` commands of the docs not run against the store: ``profile`` lines are run by
test_profile_commands_run, ``ab`` needs two onnxruntime installs (the ``ort_env`` example
runs the same workers)."""


def _store_commands() -> list[list[str]]:
    """Every ``$ ortperf ...`` line of the docs that reads or writes the local store, as
    arguments; lines naming an example machine class (``--machine``) are another fleet's."""
    commands = []
    for doc in documents():
        for line in doc.read_text(encoding="utf-8").splitlines():
            if not line.startswith("$ ortperf "):
                continue
            args = shlex.split(line[2:], comments=True)
            if args[1] in STORE_COMMANDS_SKIPPED or "--machine" in args:
                continue
            commands.append(args)
    return commands


def test_store_commands_run(project: Path) -> None:
    """The docs' ``ortperf`` commands run on a store of two ``--ortperf`` runs: exit 0, or 1
    for a ``compare`` that found a regression (timings of this machine decide that)."""
    commands = _store_commands()
    assert {args[1] for args in commands} >= {"runs", "history", "compare", "export", "report"}
    for _ in range(2):
        proc = _pytest(project, "-q", "--ortperf", "--ortperf-budget=0.2", "test_attention.py")
        assert proc.returncode == 0, _explain(proc)
    bindir = Path(sys.executable).parent
    for args in commands:
        proc = _run([str(bindir / args[0]), *args[1:]], project)
        allowed = (0, 1) if args[1] == "compare" else (0,)
        assert proc.returncode in allowed, f"{shlex.join(args)}: {_explain(proc)}"
    assert (project / "results.csv").is_file()
    assert (project / "report.html").is_file()


def test_profile_commands_run(tmp_path: Path) -> None:
    """The two ``ortperf profile`` lines of the docs (*The ortperf command*)."""
    lines = [
        line[2:]
        for doc in documents()
        for line in doc.read_text(encoding="utf-8").splitlines()
        if line.startswith(("$ python -c", "$ ortperf profile"))
    ]
    assert len(lines) == 2 and "attention.onnx" in lines[1], lines
    bindir = Path(sys.executable).parent
    for line in lines:
        args = shlex.split(line)
        args[0] = sys.executable if args[0] == "python" else str(bindir / args[0])
        proc = _run(args, tmp_path)
        assert proc.returncode == 0, _explain(proc)
    assert (tmp_path / "trace.json").is_file()
    assert (tmp_path / "ops.png").is_file()
