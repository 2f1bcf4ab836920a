"""The house rules on shape, read from the code: a function (or method) of the package holds at
most 50 lines and takes at most 11 parameters, the scripts shipped to targets included. Both are
checked as guidance, not as goals: a longer function or a wider signature is a sign it does
several jobs (split it along them) or that its arguments belong together (a small frozen
dataclass); never cut one job in two to meet the count. A module has no size limit: it holds one
idea under a name that says it, and may run to about 800 lines when the idea needs them; it is
never split only for size. And a project's own folders (`runs/`, `data/`, `.overbrainer/`) are
named in one place, `dataset/paths.ProjectPaths`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "overbrainer"
MAX_FUNCTION_LINES = 50


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_the_walk_sees_the_package():
    names = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"exec/transfer.py", "exec/ssh.py", "compare/scripts/compare_client.py"} <= names
    assert len(names) > 100


def test_no_function_is_longer_than_50_lines():
    long = []
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{p.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert long == []


# `<something>project_dir / "runs"` (or `Path(project_dir) / "data"`, `... / ".overbrainer"`).
HAND_BUILT = re.compile(r'project_dir\)?\s*/\s*"(runs|data|\.overbrainer)"')
# support/ sits below dataset/ and cannot import ProjectPaths: the lock names its own file.
NAMES_ITS_OWN = {"dataset/paths.py", "support/lock.py"}


def test_project_folders_are_named_by_project_paths():
    hand_built = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in modules()
                  if p.relative_to(ROOT).as_posix() not in NAMES_ITS_OWN
                  for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                  if HAND_BUILT.search(line)]
    assert hand_built == []


def test_the_hand_built_pattern_sees_what_it_forbids():
    for line in ('x = project_dir / "runs"', 'Path(project_dir) / "data" / "eval.jsonl"',
                 'self.project_dir / ".overbrainer" / "lock"', 'session.project_dir /"runs"'):
        assert HAND_BUILT.search(line), line
    for line in ('run_dir / "data"', 'ProjectPaths(project_dir).runs', 'project_dir / "prompts"'):
        assert not HAND_BUILT.search(line), line


# The most parameters a function takes (self and cls not counted; *args and **kwargs count one
# each). 11 is today's widest (llm/http._Send.__init__ and send); the lease of a target took 12,
# the union of every target kind's options, before they were grouped (jobs.kinds.LeaseOptions,
# runpod.provision.PodPlace). Lower it as
# those are grouped too; never raise it: a wider function wants a small frozen dataclass.
MAX_PARAMETERS = 11


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [f"*{x.arg}" for x in (a.vararg, a.kwarg) if x is not None]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def test_no_function_takes_more_than_11_parameters():
    wide = []
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := len(parameters(node))) > MAX_PARAMETERS:
                    wide.append(f"{p.relative_to(ROOT)}:{node.lineno} {node.name}: {n} parameters")
    assert wide == []


def test_the_parameter_count_sees_every_kind_of_parameter():
    [fn] = ast.parse("def f(self, a, /, b, *c, d, e=1, **f): pass").body
    assert parameters(fn) == ["a", "b", "d", "e", "*c", "*f"]
    [fn] = ast.parse("def g(x, *, y): pass").body
    assert parameters(fn) == ["x", "y"]
