"""Dependencies as they are: every third-party package the tool imports is declared in setup.cfg,
and none of their private modules is imported (they change without notice)."""

from __future__ import annotations

import ast
import configparser
import importlib.metadata as md
import re
import sys
from pathlib import Path

import overbrainer

PACKAGE = Path(overbrainer.__file__).parent
SETUP_CFG = PACKAGE.parent / "setup.cfg"
# Files that run elsewhere (on the training machine, in a job): not this package's imports.
ELSEWHERE = ("train/plugin/", "compare/scripts/", "eval/scripts/")


def _imports() -> dict[str, set[str]]:
    """{imported module: {files}} of the package's own code (top level and in functions)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(ELSEWHERE):
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name, set()).add(rel)
    return found


def _third_party(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: f for m, f in imports.items()
            if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] not in ("overbrainer", "__future__")}


def _declared() -> set[str]:
    """install_requires, and the optional extras a user installs for a feature (`parquet`: imported
    only when that feature is configured, with the `pip install` hint when missing)."""
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG)
    lines = cfg["options"]["install_requires"].split("\n")
    extras = cfg["options.extras_require"]
    for name in extras:
        if name not in ("test", "dev"):
            lines += extras[name].split("\n")
    return {re.split(r"[<>=!~ \[;#]", line.strip())[0].lower().replace("_", "-") for line in lines if line.strip()}


def test_every_imported_package_is_declared():
    providers = md.packages_distributions()
    declared = _declared()
    missing = {}
    for module, files in _third_party(_imports()).items():
        dists = {d.lower().replace("_", "-") for d in providers.get(module.split(".")[0], [])}
        if not dists & declared:
            missing[module] = sorted(files)
    assert not missing, f"imported but not in setup.cfg's install_requires: {missing}"


def test_no_private_module_of_a_dependency_is_imported():
    private = {m: sorted(f) for m, f in _third_party(_imports()).items()
               if any(part.startswith("_") for part in m.split("."))}
    assert not private, f"private modules of dependencies imported: {private}"
