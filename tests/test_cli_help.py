"""``ortperf --help`` tells which commands exit with the regression status."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from pytest_ortperf import cli


def test_the_help_names_every_command_that_exits_with_the_regression_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The commands whose function returns EXIT_REGRESSED, read from the source.
    trees = [ast.parse(p.read_text()) for p in Path(inspect.getfile(cli)).parent.glob("*.py")]
    regressing = {
        node.name.removeprefix("cmd_").removeprefix("_cmd_").replace("_", "-")
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any(
            isinstance(n, ast.Name) and n.id == "EXIT_REGRESSED"
            for r in ast.walk(node)
            if isinstance(r, ast.Return)
            for n in ast.walk(r)
        )
    }
    assert {"compare", "ab"} <= regressing, regressing
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith(f"{cli.EXIT_REGRESSED} "))
    for command in regressing:
        assert f"`{command}`" in line, line
