"""The house rules on size, read from the code: a module of the package holds at most 400 lines
and a function (or method) at most 50, the scripts shipped to targets included. A longer one is a
sign it does several jobs: split it along them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "overbrainer"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_the_walk_sees_the_package():
    names = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"exec/transfer.py", "exec/manifest.py", "compare/scripts/compare_client.py"} <= names
    assert len(names) > 100


def test_no_module_is_longer_than_400_lines():
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert long == []


def test_no_function_is_longer_than_50_lines():
    long = []
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{p.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert long == []
