#!/usr/bin/env python3
"""How typed each package is: per package of overbrainer/, the share of parameters with an
annotation (`self` and `cls` left out) and of functions with a return annotation, read with `ast`.

    python scripts/annotations.py [PACKAGE ...]

The package's own shipped scripts (`*/scripts/`, `train/plugin/`) run elsewhere and are left out.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "overbrainer"


def _shipped(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return "scripts" in parts or "plugin" in parts


def count(path: Path) -> tuple[int, int, int, int]:
    """(parameters, annotated ones, functions, functions with a return annotation) of one module."""
    params = annotated = funcs = returns = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        funcs += 1
        returns += node.returns is not None
        a = node.args
        every = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x is not None)]
        for arg in every:
            if arg.arg in ("self", "cls"):
                continue
            params += 1
            annotated += arg.annotation is not None
    return params, annotated, funcs, returns


def main(argv: list[str]) -> int:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for path in sorted(ROOT.rglob("*.py")):
        if _shipped(path):
            continue
        parts = path.relative_to(ROOT).parts
        package = parts[0] if len(parts) > 1 else "(top)"
        if argv and package not in argv:
            continue
        for i, n in enumerate(count(path)):
            totals[package][i] += n
    print(f"{'package':<10} {'params':>7} {'typed':>7} {'share':>6}   {'returns':>7}")
    every = [0, 0, 0, 0]
    for package, (params, annotated, funcs, returns) in sorted(totals.items()):
        every = [x + y for x, y in zip(every, (params, annotated, funcs, returns))]
        print(f"{package:<10} {params:>7} {annotated:>7} {annotated / max(params, 1):>6.0%}   "
              f"{returns / max(funcs, 1):>7.0%}")
    print(f"{'all':<10} {every[0]:>7} {every[1]:>7} {every[1] / max(every[0], 1):>6.0%}   "
          f"{every[3] / max(every[2], 1):>7.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
