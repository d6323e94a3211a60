"""The package's shape: imports flow one way, no cycles, modules of a readable size, and
loading the plugin is cheap.

Layers, top to bottom (CONTRIBUTING.md, "Layout"):

- glue: ``plugin``, ``cli``, ``config``, ``state``, ``recorder``, ``xdist_serial``,
  ``update_processes``
- families: ``reports`` (may use ``profiling``, ``gating``), ``remote`` (the upgrade gate's
  workers and ``ab()``: may use ``gating``, ``profiling``), ``gating``, ``profiling``,
  ``testing``
- the measuring core: ``measuring`` and ``store``, which use neither each other nor anything
  above them
- core: records, statistics, units, text, value checks, files, machine facts

A module may import from its own family, from what its layer allows, and from below; never
from above.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_ortperf

PACKAGE = Path(pytest_ortperf.__file__).parent
GLUE = {"plugin", "cli", "config", "state", "recorder", "xdist_serial", "update_processes"}
MAY_USE = {
    "reports": {"profiling", "gating"},
    "remote": {"profiling", "gating"},
    "gating": set(),
    "profiling": set(),
    "testing": set(),
}
"""The families and which other families each may use (besides the measuring core)."""
FAMILIES = set(MAY_USE)
MEASURING_CORE = {"measuring", "store"}
CORE = {"results", "stats", "units", "text", "values", "files", "scratch", "machine", "models"}
ALIASES = {"plots": "profiling"}
"""Modules that only re-export a family's names at a documented import path."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("pytest_ortperf", *parts))


def _imports() -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports (anywhere in it:
    at the top, in functions, under TYPE_CHECKING)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            found.update(t for t in targets if t in modules and t != name)
        graph[name] = found
    return graph


def _top(module: str) -> str:
    """``gating`` for ``pytest_ortperf.gating.rules``, ``store`` for ``pytest_ortperf.store.read``."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return ALIASES.get(top, top)


def _layer(top: str) -> str:
    if top in GLUE:
        return "glue"
    if top in FAMILIES:
        return "family"
    if top in MEASURING_CORE:
        return "measuring core"
    return "core"


def test_no_relative_imports_to_check_against() -> None:
    # The checks below read absolute imports only; the package writes all of its own
    # imports that way.
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        relative = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
        assert not relative, f"{path}: relative import (write pytest_ortperf.x)"


def test_imports_flow_one_way() -> None:
    wrong = []
    for module, targets in _imports().items():
        mine = _top(module)
        for target in targets:
            theirs = _top(target)
            if theirs in ("", mine):
                continue  # the package itself (__version__), or within one family
            mine_layer, their_layer = _layer(mine), _layer(theirs)
            if mine_layer == "core" and their_layer != "core":
                wrong.append(f"{module} (core) imports {target} ({their_layer})")
            elif mine_layer == "measuring core" and their_layer != "core":
                wrong.append(f"{module} ({mine}) imports {target} ({their_layer})")
            elif mine_layer == "family" and their_layer == "glue":
                wrong.append(f"{module} imports {target}: families never use the glue")
            elif mine_layer == "family" and their_layer == "family" and theirs not in MAY_USE[mine]:
                wrong.append(f"{module} imports {target}: {mine} may not use {theirs}")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_cycles() -> None:
    graph = _imports()
    # The package __init__ only names other modules' objects (lazily).
    graph.pop("pytest_ortperf", None)
    cycles = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif state.get(nxt) is None:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize(
    ("module", "heavy"),
    [
        ("pytest_ortperf.plugin", ("onnxruntime", "pandas", "matplotlib", "sqlalchemy")),
        ("pytest_ortperf", ("onnxruntime", "pandas", "matplotlib", "sqlalchemy")),
        # The recorder needs onnxruntime, but a smoke run must not pay for pandas.
        ("pytest_ortperf.recorder", ("pandas", "matplotlib", "sqlalchemy")),
        # Masking a message or catching a StoreError loads no database code.
        ("pytest_ortperf.store.errors", ("numpy", "pandas", "sqlalchemy")),
        # Where the store is: a run with --ortperf-store=none asks it and opens nothing.
        ("pytest_ortperf.store.location", ("numpy", "pandas", "sqlalchemy")),
    ],
)
def test_loading_imports_nothing_heavy(module: str, heavy: tuple[str, ...]) -> None:
    code = f"import sys, {module}\nprint(','.join(m for m in {heavy!r} if m in sys.modules))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "", f"importing {module} loaded {out.stdout.strip()}"


def test_public_api_is_declared_and_importable() -> None:
    names = pytest_ortperf.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert getattr(pytest_ortperf, name) is not None, name
    assert set(dir(pytest_ortperf)) >= set(names)


def _modules_after(code: str, cwd: Path) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` in ``cwd``."""
    script = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return set(out.stderr.splitlines()[-1].split())


def test_ortperf_ab_help_and_runs_import_no_pytest(tmp_path: Path) -> None:
    # The command outside pytest loads neither pytest nor the fixture's recorder: `ab`
    # runs pytest_ortperf.remote.ab, `runs` reads a real store.
    from ortperf_store_factories import latency, save

    store = tmp_path / "results.sqlite"
    save(store, [latency("t.py::test_a")])
    run = "from pytest_ortperf.cli import main\ncode = main({argv!r})\n"
    helped = _modules_after(run.format(argv=["ab", "--help"]) + "assert code == 0, code", tmp_path)
    listed = _modules_after(
        run.format(argv=["runs", "--store", str(store)]) + "assert code == 0, code", tmp_path
    )
    for loaded in (helped, listed):
        assert "pytest_ortperf.cli" in loaded  # the command ran
        assert not {m for m in loaded if m.split(".")[0] in ("pytest", "_pytest")}
        assert "pytest_ortperf.recorder" not in loaded
    assert "sqlalchemy" in listed  # the store was read


MAX_MODULE_LINES = 800
MAX_CLASS_LINES = 400
ONE_THING: dict[str, str] = {}
"""Modules or classes allowed past the limits, each with the reason it is one thing."""


def test_no_module_past_the_size_limit() -> None:
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        name = _module_name(path)
        if lines > MAX_MODULE_LINES and name not in ONE_THING:
            big.append(f"{name}: {lines} lines (split it by concern, or say in ONE_THING why not)")
    assert not big, "\n".join(big)


def test_no_class_past_the_size_limit() -> None:
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                name = f"{_module_name(path)}.{node.name}"
                if size > MAX_CLASS_LINES and name not in ONE_THING:
                    big.append(f"{name}: {size} lines")
    assert not big, "\n".join(big)


def test_every_module_has_a_place() -> None:
    # A new top-level module is placed on purpose: in a family, the glue or the core.
    placed = GLUE | FAMILIES | MEASURING_CORE | CORE | set(ALIASES)
    loose = sorted({_top(m) for m in _imports()} - placed - {""})
    assert not loose, f"place these in tests/test_layout.py: {loose}"


PUBLIC_UNDERSCORE = {"_replace", "_asdict", "_make", "_getframe"}
"""Underscore names that are public API of the standard library (namedtuple, sys)."""


def test_nothing_outside_a_class_calls_its_private_methods() -> None:
    # ``obj._helper(...)`` from outside ``obj``'s class couples two modules through a name
    # that promises nothing; ``self._x``/``cls._x`` and module-private functions are fine.
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            attr, owner = node.func.attr, node.func.value
            if not attr.startswith("_") or attr.startswith("__") or attr in PUBLIC_UNDERSCORE:
                continue
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super":
                continue
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: .{attr}()")
    assert not found, "\n".join(found)
