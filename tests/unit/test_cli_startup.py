"""What `overbrainer --help` and `overbrainer config check` of the project `init` writes leave
unimported (start-up time, scripts/bench_startup.sh: --help <= 1.1x and config check <= 1.3x
`python -c "import click"`): each module below is what one command, one setting or one error needs.
A module that a `.pth` file of the interpreter's site-packages loads before the command starts
(an editable install's finder loads pathlib) is not the command's doing and is not judged."""

from __future__ import annotations

import subprocess
import sys

import pytest

from overbrainer.config.init import init_project
from tests.fixtures.cli import clean_env

PROBE = """
import sys
before = set(sys.modules)
from overbrainer.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write("\\nLOADED " + " ".join(sorted(set(sys.modules) - before)) + "\\n")
"""

# Neither command imports these (a name covers its submodules): why each waits.
KEPT_OFF = {
    "json": "--json results only; the gate parses answers (dataset/quality/gate_rules.py)",
    "overbrainer.dataset": "the gate's languages and schema check: [gate] language or json_schema set only",
    "overbrainer.config.hub_licenses": "[hub] dataset_license set only",
    "overbrainer.llm.thinking": "Claude's thinking rules: an anthropic provider only",
    "overbrainer.llm.settings": "protocols, for annotations only",
    "overbrainer.llm.http": "the HTTP client: commands that send requests, --probe",
    "requests": "the HTTP client: commands that send requests, --probe",
    "urllib3": "the HTTP client: commands that send requests, --probe",
    "overbrainer.hub": "a push only",
    "huggingface_hub": "a push only",
    "httpx2": "a push only",
    "overbrainer.exec": "training targets only",
    "paramiko": "SSH targets only",
    "overbrainer.pipeline": "the stages",
    "overbrainer.jobs": "training and side jobs",
    "overbrainer.checks": "--probe only",
    "overbrainer.front.bus": "the event bus: flows only",
    "overbrainer.front.frontend": "the renderers: flows only",
    "tqdm": "progress bars on a terminal only",
    "textual": "`overbrainer tui` only",
    "rich": "`overbrainer tui` only",
    "prometheus_client": "[metrics] listen only",
    "yaml": "the Axolotl config of a training run",
    "jinja2": "prompt templates: the stages",
    "dataclasses": "support/frozen makes the records",
    "pathlib": "support/files writes paths as text",
    "urllib.parse": "support/urls: a bracketed or non-ASCII host only",
    "ipaddress": "support/urls: an IPv6 address only",
    "logging": "once something is logged",
    "signal": "commands that run work",
    "difflib": "a mistyped command or key only",
    "shutil": "commands that copy files",
    "subprocess": "commands that start processes",
    "socket": "commands that connect",
}
# Besides, `--help` reads no configuration, and `config check` writes no help page.
HELP_KEPT_OFF = {"overbrainer.config": "a command runs", "overbrainer.cli.context": "a command runs",
                 "overbrainer.errors": "a command fails", "tomllib": "a command runs"}
CHECK_KEPT_OFF = {"overbrainer.cli.help_format": "a help page only"}


def _loaded(args: list[str]) -> set[str]:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60,
                       env=clean_env({"OVERBRAINER_PROVIDERS__LLM__BASE_URL": "http://127.0.0.1:9/v1"}))
    assert ("Usage:" in r.stdout) if "--help" in args else ("project.name = " in r.stdout), r.stderr
    return set(r.stderr.strip().splitlines()[-1].removeprefix("LOADED ").split())


def _found(loaded: set[str], kept_off: dict[str, str]) -> list[str]:
    return sorted(f"{m} ({kept_off[name]})" for m in loaded for name in kept_off
                  if m == name or m.startswith(name + "."))


@pytest.fixture(scope="module")
def initialised(tmp_path_factory):
    path = tmp_path_factory.mktemp("startup") / "proj"
    init_project(path)
    return path


@pytest.mark.parametrize("args, also", [(["--help"], HELP_KEPT_OFF), (["config", "check"], CHECK_KEPT_OFF)],
                         ids=["help", "config-check"])
def test_start_up_leaves_the_heavy_modules_unimported(initialised, args, also):
    loaded = _loaded(["-C", str(initialised), *args])
    assert "click" in loaded  # the probe sees what the command imports
    assert _found(loaded, {**KEPT_OFF, **also}) == []


# What jsonschema (the gate extra) imports of the standard library, once [gate] json_schema is set.
JSONSCHEMA_NEEDS = ("json", "dataclasses", "shutil")


@pytest.mark.parametrize("gate, lazy, needs", [
    ('language = "en"', {"overbrainer.dataset.quality.language"}, ()),
    ('language = "en"\njson_schema = { type = "object" }',
     {"overbrainer.dataset.quality.language", "overbrainer.dataset.quality.json_schema", "jsonschema"}, JSONSCHEMA_NEEDS),
], ids=["language", "language-and-schema"])
def test_a_gate_with_a_language_and_a_schema_checks_them_without_the_gate(tmp_path, gate, lazy, needs):
    init_project(tmp_path / "proj")
    with open(tmp_path / "proj" / "overbrainer.toml", "a", encoding="utf-8") as f:
        f.write(f"\n[gate]\n{gate}\n")
    loaded = _loaded(["-C", str(tmp_path / "proj"), "config", "check"])
    assert lazy <= loaded
    kept_off = {k: v for k, v in KEPT_OFF.items() if k != "overbrainer.dataset" and k not in needs}
    assert _found(loaded, {**kept_off, "overbrainer.dataset.quality.gate_rules": "the gate stage only", **CHECK_KEPT_OFF}) == []
