"""No public function or class of the package exists for the tests alone: each top-level one is
named somewhere else in the package too (a call, an import, a registry's string). A name found
only in its own definition and in tests/ is a test hook or dead code."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "overbrainer"
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The Runpod catalog parser the tests still use, left to its own fix (issue 29, item 1).
LEFT = {"catalog_params", "parse_catalog"}


def _shipped(path: Path) -> bool:
    parts = path.relative_to(PACKAGE).parts
    return "scripts" not in parts and "plugin" not in parts


def test_no_public_name_is_used_only_by_tests():
    texts = {p: p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}
    in_package = Counter(w for text in texts.values() for w in WORD.findall(text))
    in_tests = Counter(w for p in (ROOT / "tests").rglob("*.py") for w in WORD.findall(p.read_text(encoding="utf-8")))
    found = set()
    for path, text in texts.items():
        if not _shipped(path):
            continue
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and not node.name.startswith("_") and in_package[node.name] <= 1 and in_tests[node.name]:
                found.add(node.name)
    assert found <= LEFT, sorted(found - LEFT)
