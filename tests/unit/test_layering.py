"""The layering of docs/contract.md, read from the code: every import of every module of the package
(at module top and inside functions, found with `ast`) goes to its own layer or a lower one; no two
modules and no two packages import each other, through any chain; no module imports another's
private (`_name`) attributes. Imports under `if TYPE_CHECKING:` name types only and never run: they
are left out of the layer rule, not of the others. Every import stands at module top, save those
of `LAZY`, each with why it waits (a heavy third-party library only some commands use). Runpod is one
package: outside runpod/, only its modules of `RUNPOD_PUBLIC` are imported, jobs/ imports only its
target kind (and the kind's read-only face), and tui/ nothing of it.

The scripts and plugin shipped to targets (`*/scripts/`, `train/plugin/`) import nothing of the
package and are not walked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "overbrainer"

# Highest first: a module may import its own layer or any lower one. `""` is the package's own
# __init__ (`__version__`), beside errors.py.
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("cli", frozenset({"cli", "tui", "__main__"})),
    ("flows", frozenset({"pipeline", "runs", "export", "compare", "eval", "hub", "pods", "checks", "metrics"})),
    ("jobs", frozenset({"jobs"})),
    ("domain", frozenset({"config", "llm", "dataset", "train", "exec", "runpod"})),
    ("front", frozenset({"front"})),  # beside the domain: imported by the flows, jobs and runpod/
    ("support", frozenset({"support"})),
    ("errors", frozenset({"errors", ""})),
]
RANK = {pkg: len(LAYERS) - i for i, (_, pkgs) in enumerate(LAYERS) for pkg in pkgs}
LAYER = {pkg: name for name, pkgs in LAYERS for pkg in pkgs}
# Of the domain, only runpod/ publishes events (PodStatus); dataset/ and train/ never see front/.
FRONT_IN_DOMAIN = frozenset({"runpod"})

# Runpod is one package, runpod/. Outside it, only these of its modules are imported, each by whom
# and why; the rest (the client's transport, provisioning, the lease, the ledger, keys, the gone
# rule, deletes) is its own. jobs/ reaches Runpod only through its target kind, and tui/ never.
RUNPOD_PUBLIC: dict[str, str] = {
    "overbrainer.runpod.target": "the `runpod` target kind, for jobs/lease.py (jobs.lease.KINDS)",
    "overbrainer.runpod.records": "its read-only face, for jobs/records.py (jobs.records.RECORDS)",
    "overbrainer.runpod.commands": "the `pod` commands' flows, for cli/pod_cmd.py",
    "overbrainer.runpod.api": "the API client, for the flows that read the catalog (plan, --probe)",
    "overbrainer.runpod.catalog": "the GPU pick, for the flows that price or probe a target",
    "overbrainer.runpod.pod_record": "pod.json read as it is (runs rm, the model card, the plan)",
    "overbrainer.runpod.side_pods": "what a side job's own pod asks for (export, compare)",
}
RUNPOD_FOR_JOBS = frozenset({"overbrainer.runpod.target", "overbrainer.runpod.records"})


# Every import inside a function, in the whole package, with why it waits: a heavy third-party
# library that only some commands use (paramiko, requests, tqdm, huggingface_hub, Textual,
# prometheus_client, pyarrow, lm-eval; those of an extra may be missing), directly or through the
# package module that imports it at top. The one exception of the package's own is the front end
# of the flows (its bus, events and renderers), which `config check` never uses. Each also stands
# under a `# lazy:` comment in the code. A target covers its submodules.
LAZY: dict[tuple[str, str], str] = {
    ("overbrainer.cli.context", "overbrainer.front.frontend"):
        "the flows' front end: the bus, its events and the renderers, which `config check` never uses",
    ("overbrainer.cli.context", "overbrainer.metrics.exporter"): "prometheus_client: the `metrics` extra, [metrics] set only",
    ("overbrainer.cli.config_cmd", "overbrainer.checks.probe"): "requests and the SSH and Runpod clients: --probe only",
    ("overbrainer.cli.tui_cmd", "overbrainer.tui.logbuf"): "Textual: the `tui` extra, `tui` runs (`tui --help` stays light)",
    ("overbrainer.cli.tui_cmd", "overbrainer.tui.tasks"): "Textual: the `tui` extra, `tui` runs",
    ("overbrainer.cli.tui_cmd", "overbrainer.tui.work"): "Textual: the `tui` extra, `tui` runs",
    ("overbrainer.cli.tui_cmd", "overbrainer.tui.main"): "Textual: the `tui` extra, `tui` runs",
    ("overbrainer.config.secrets", "overbrainer.config.vault"): "requests: a vault: reference only",
    ("overbrainer.dataset.quality.benchmarks", "pyarrow"): "pyarrow: the `parquet` extra, a Parquet benchmark only",
    ("overbrainer.cli.config_cmd", "overbrainer.config.templates"): "Jinja2: a project's own prompts only",
    ("overbrainer.llm.price_db", "genai_prices"): "genai-prices loads its whole database (and pydantic): a price looked up in it",
    ("overbrainer.llm.prices", "overbrainer.llm.http"): "requests (the HTTP stack): a listing read (`config check` shows prices)",
    ("overbrainer.exec.ssh", "paramiko"): "paramiko: SSH targets only",
    ("overbrainer.exec.ssh_connect", "paramiko"): "paramiko: SSH targets only",
    ("overbrainer.front.render_bars", "tqdm"): "tqdm: bars on a terminal only",
    ("overbrainer.hub.client", "huggingface_hub"): "huggingface_hub: the `hub` extra, a push only",
    ("overbrainer.hub.client", "httpx2"): "huggingface_hub's HTTP client: the `hub` extra, a push only",
    ("overbrainer.hub.push", "huggingface_hub"): "huggingface_hub: the `hub` extra, a push only",
    ("overbrainer.hub.parquet", "pyarrow"): "pyarrow: the `parquet` extra, `push --dataset` only",
    ("overbrainer.eval.harness", "lm_eval"): "lm_eval: the `eval` extra, `overbrainer eval` only",
    ("overbrainer.dataset.quality.json_schema", "jsonschema"): "jsonschema: the `gate` extra, heavy, [gate] json_schema set only",
    ("overbrainer.config.dotenv", "dotenv"): "python-dotenv: a project with a .env only",
}


@dataclass
class Module:
    name: str  # overbrainer.jobs.lease
    path: Path
    imports: list[tuple[str, int, bool]] = field(default_factory=list)  # (module, line, type-only)
    private: list[tuple[str, str, int]] = field(default_factory=list)  # (module, attribute, line)
    in_functions: list[tuple[str, int]] = field(default_factory=list)  # (any module, line)

    @property
    def package(self) -> str:
        parts = self.name.split(".")
        return parts[1] if len(parts) > 1 else ""


def _walked() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py")
                  if "scripts" not in p.relative_to(ROOT).parts and "plugin" not in p.relative_to(ROOT).parts)


def _name_of(path: Path) -> str:
    parts = ("overbrainer", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Reader:
    """Every import of one module, with the module each name comes from."""

    def __init__(self, module: Module, known: set[str]):
        self.module, self.known = module, known
        self.bound: dict[str, str] = {}  # local name -> overbrainer module it names

    def owner(self, dotted: str) -> str | None:
        """The package module `dotted` is, or is inside of (None outside the package)."""
        while dotted and dotted not in self.known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def base_of(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = self.module.name if self.module.path.name == "__init__.py" else self.module.name.rpartition(".")[0]
        parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))

    def visit(self, node: ast.AST, type_only: bool = False, in_function: bool = False) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                self.visit(child, True, in_function)
            for child in node.orelse:
                self.visit(child, type_only, in_function)
            return
        if in_function and isinstance(node, ast.Import):
            self.module.in_functions += [(alias.name, node.lineno) for alias in node.names]
        elif in_function and isinstance(node, ast.ImportFrom):
            self.module.in_functions.append((self.base_of(node), node.lineno))
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = self.owner(alias.name)
                if target is not None:
                    self.module.imports.append((target, node.lineno, type_only))
                    if alias.asname:
                        self.bound[alias.asname] = target
        elif isinstance(node, ast.ImportFrom):
            base = self.base_of(node)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in self.known:  # a module: `from overbrainer.jobs import lease`
                    self.module.imports.append((full, node.lineno, type_only))
                    self.bound[alias.asname or alias.name] = full
                    continue
                target = self.owner(base)
                if target is None:
                    continue
                self.module.imports.append((target, node.lineno, type_only))
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    self.module.private.append((target, alias.name, node.lineno))
        in_function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            self.visit(child, type_only, in_function)

    def private_attributes(self, tree: ast.AST) -> None:
        """`lease._thing` where `lease` names another module of the package."""
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in self.bound and node.attr.startswith("_") and not node.attr.startswith("__")
                    and self.bound[node.value.id] != self.module.name):
                self.module.private.append((self.bound[node.value.id], node.attr, node.lineno))


def _modules() -> dict[str, Module]:
    paths = _walked()
    known = {_name_of(p) for p in paths}
    modules = {}
    for path in paths:
        module = Module(_name_of(path), path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        reader = _Reader(module, known)
        reader.visit(tree)
        reader.private_attributes(tree)
        modules[module.name] = module
    return modules


MODULES = _modules()


def _package(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_the_walk_sees_the_whole_package():
    assert len(MODULES) > 150
    assert all(m.package in RANK for m in MODULES.values()), sorted({m.package for m in MODULES.values()} - set(RANK))
    edges = {(m.name, target) for m in MODULES.values() for target, _, _ in m.imports}
    # an import at module top, one inside a function, one under TYPE_CHECKING
    assert ("overbrainer.jobs.lease", "overbrainer.jobs.follow") in edges
    assert ("overbrainer.jobs.lease", "overbrainer.runpod.target") in edges
    assert any(t == "overbrainer.front.session" and type_only
               for t, _, type_only in MODULES["overbrainer.runs.flow"].imports)


def test_every_import_goes_to_its_own_layer_or_a_lower_one():
    upward = [f"{m.path.relative_to(ROOT.parent)}:{line} ({LAYER[m.package]}) imports {target} "
              f"({LAYER[_package(target)]})"
              for m in MODULES.values() for target, line, type_only in m.imports
              if not type_only and RANK[_package(target)] > RANK[m.package]]
    assert upward == []


def test_front_is_used_by_the_domain_only_where_events_are_published():
    found = [f"{m.path.relative_to(ROOT.parent)}:{line} imports {target}"
             for m in MODULES.values() for target, line, type_only in m.imports
             if not type_only and _package(target) == "front" and LAYER[m.package] == "domain"
             and m.package not in FRONT_IN_DOMAIN]
    assert found == []


def test_what_the_domain_packages_know_of_each_other():
    """Records know no provider, configuration knows no client (only llm/'s pure modules: the
    dialect guess, the thinking rules, which models hide their reasoning), exec/ knows no pod,
    runpod/ no dataset."""
    never = {("dataset", "llm"), ("exec", "runpod"), ("runpod", "dataset"), ("runpod", "llm")}
    config_may = {"overbrainer.llm.dialects", "overbrainer.llm.thinking", "overbrainer.llm.hidden"}
    found = [f"{m.path.relative_to(ROOT.parent)}:{line} imports {target}"
             for m in MODULES.values() for target, line, _ in m.imports
             if (m.package, _package(target)) in never
             or (m.package == "config" and _package(target) == "llm" and target not in config_may)]
    assert found == []


def _runpod_reached(module: Module) -> list[str]:
    """The imports by which `module` (outside runpod/) reaches past Runpod's public modules: any
    of tui/, any but the target kind's of jobs/, any not public from elsewhere (type-only ones too)."""
    if module.package == "runpod":
        return []
    allowed = (frozenset() if module.package == "tui" else RUNPOD_FOR_JOBS if module.package == "jobs"
               else frozenset(RUNPOD_PUBLIC))
    return [f"{module.path.relative_to(ROOT.parent)}:{line} imports {target}"
            for target, line, _ in module.imports if _package(target) == "runpod" and target not in allowed]


def test_runpod_is_one_package_reached_through_its_public_modules():
    """jobs/ calls Runpod only through the target interface (jobs/kinds.py: runpod/target.py is
    one kind of jobs.lease.KINDS, runpod/records.py its read-only face in jobs.records.RECORDS);
    the TUI shows what pods cost without importing Runpod (support/fmt.py's money formats,
    jobs.records' summaries); runpod/ itself imports nothing of jobs/ (its layer)."""
    found = [line for m in MODULES.values() for line in _runpod_reached(m)]
    assert found == []
    assert set(RUNPOD_PUBLIC) <= set(MODULES), "RUNPOD_PUBLIC names a module that is gone"
    used = {t for m in MODULES.values() if m.package != "runpod" for t, _, _ in m.imports}
    assert set(RUNPOD_PUBLIC) <= used, "RUNPOD_PUBLIC names a module nothing outside runpod/ imports"


@pytest.mark.parametrize("package,source,reached", [
    ("jobs", "from overbrainer.runpod.target import RUNPOD\n", False),
    ("jobs", "from overbrainer.runpod.records import RUNPOD_RECORDS\n", False),
    ("jobs", "from overbrainer.runpod.lease import pod_lease\n", True),
    ("jobs", "from overbrainer.runpod import catalog\n", True),
    ("runs", "from overbrainer.runpod import catalog\n", False),
    ("runs", "from overbrainer.runpod.provision import executor_for\n", True),
    ("tui", "from overbrainer.runpod.cost import usable_rate\n", True),
    ("tui", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from overbrainer.runpod import api\n", True),
    ("tui", "from overbrainer.support.fmt import about_usd\n", False),
])
def test_the_runpod_rule_sees_what_it_forbids(package, source, reached):
    path = ROOT / package / "probe_module.py"
    module = Module(f"overbrainer.{package}.probe_module", path)
    reader = _Reader(module, set(MODULES) | {module.name})
    reader.visit(ast.parse(source))
    assert bool(_runpod_reached(module)) == reached


def test_no_two_modules_import_each_other():
    graph = {m.name: {t for t, _, _ in m.imports if t != m.name} for m in MODULES.values()}
    assert _cycles(graph) == []


def test_no_two_packages_import_each_other():
    graph: dict[str, set[str]] = {}
    for m in MODULES.values():
        for target, _, _ in m.imports:
            if _package(target) != m.package:
                graph.setdefault(m.package, set()).add(_package(target))
    assert _cycles(graph) == []


def test_no_module_imports_another_modules_private_names():
    found = [f"{m.path.relative_to(ROOT.parent)}:{line} uses {target}.{name}"
             for m in MODULES.values() for target, name, line in m.private if target != m.name]
    assert found == []


def _lazy_allowed(module: str, target: str) -> bool:
    return any(module == m and (target == t or target.startswith(t + ".")) for m, t in LAZY)


def _explained(lines: list[str], line: int) -> bool:
    """A `# lazy:` comment on the import's line, or above the run of imports it stands in."""
    i = line - 1
    if "# lazy:" in lines[i]:
        return True
    while i > 0 and lines[i - 1].lstrip().startswith(("import ", "from ")):
        i -= 1
    return i > 0 and lines[i - 1].lstrip().startswith("# lazy:")


def test_imports_stand_at_module_top_save_those_of_lazy():
    """A function-level import hides a module's dependencies and its import cycles: anywhere in the
    package only the imports of `LAZY` wait for the function, each with its reason there and under
    a `# lazy:` comment in the code; LAZY names no import that is gone."""
    found = [f"{m.path.relative_to(ROOT.parent)}:{line} imports {target} inside a function"
             for m in MODULES.values() for target, line in m.in_functions if not _lazy_allowed(m.name, target)]
    assert found == []
    unexplained = []
    for m in MODULES.values():
        lines = m.path.read_text(encoding="utf-8").splitlines()
        for target, line in m.in_functions:
            if not _explained(lines, line):
                unexplained.append(f"{m.path.relative_to(ROOT.parent)}:{line} imports {target}")
    assert unexplained == []
    assert all(reason.strip() for reason in LAZY.values())
    stale = [(name, lazy) for name, lazy in LAZY
             if not any(t == lazy or t.startswith(lazy + ".") for t, _ in MODULES[name].in_functions)]
    assert stale == [], "LAZY names an import that is no longer there"


@pytest.mark.parametrize("source,rule", [
    ("from overbrainer.runs.flow import train_flow\n", "layer"),
    ("from overbrainer.jobs import side_job\nside_job._hidden()\n", "private"),
    ("from overbrainer.jobs.side_job import _hidden\n", "private"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from overbrainer.runs.flow import x\n", None),
    ("def f():\n    from ..runs import flow\n", "layer"),
    ("def f():\n    import json\n", "in function"),
    ("class C:\n    def m(self):\n        from overbrainer.jobs import lease\n", "in function"),
    ("import json\nclass C:\n    x = 1\n", None),
])
def test_the_reader_finds_what_the_rules_forbid(tmp_path, source, rule):
    """The walker itself, on a module of the job layer written for the purpose."""
    path = ROOT / "jobs" / "probe_module.py"
    module = Module("overbrainer.jobs.probe_module", path)
    reader = _Reader(module, set(MODULES) | {module.name})
    tree = ast.parse(source)
    reader.visit(tree)
    reader.private_attributes(tree)
    upward = [t for t, _, type_only in module.imports if not type_only and RANK[_package(t)] > RANK["jobs"]]
    assert bool(upward) == (rule == "layer")
    assert bool(module.private) == (rule == "private")
    assert bool(module.in_functions) == ("def " in source)
