"""What `overbrainer --help` and `overbrainer config check` of the project `init` writes leave
unimported (start-up time, scripts/bench_startup.sh): the heavy third-party libraries that only
some commands use, and the front end of the flows (tests/unit/test_layering.py's LAZY says where
each waits). The standard library is not judged."""

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
    "requests": "the HTTP client: commands that send requests, --probe",
    "urllib3": "the HTTP client: commands that send requests, --probe",
    "huggingface_hub": "the `hub` extra: a push only",
    "httpx2": "the `hub` extra: a push only",
    "paramiko": "SSH targets only",
    "tqdm": "progress bars on a terminal only",
    "textual": "the `tui` extra: `overbrainer tui` only",
    "rich": "the `tui` extra: `overbrainer tui` only",
    "prometheus_client": "the `metrics` extra: [metrics] set only",
    "pyarrow": "the `parquet` extra: Parquet files only",
    "lm_eval": "the `eval` extra: `overbrainer eval` only",
    "yaml": "the Axolotl config of a training run",
    "jinja2": "prompt templates: the stages",
    "overbrainer.front.frontend": "the flows' front end: the bus, its events, the renderers",
}
# Besides, `--help` opens no project (the command does: cli/context.py's pass_app).
HELP_KEPT_OFF = {"overbrainer.config": "a command runs", "overbrainer.cli.context": "a command runs"}


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


@pytest.mark.parametrize("args, also", [(["--help"], HELP_KEPT_OFF), (["config", "check"], {})],
                         ids=["help", "config-check"])
def test_start_up_leaves_the_heavy_modules_unimported(initialised, args, also):
    loaded = _loaded(["-C", str(initialised), *args])
    assert "click" in loaded  # the probe sees what the command imports
    assert _found(loaded, {**KEPT_OFF, **also}) == []


@pytest.mark.parametrize("gate, lazy", [
    ('language = "en"', {"overbrainer.dataset.quality.language"}),
    ('language = "en"\njson_schema = { type = "object" }',
     {"overbrainer.dataset.quality.language", "overbrainer.dataset.quality.json_schema", "jsonschema"}),
], ids=["language", "language-and-schema"])
def test_a_gate_with_a_language_and_a_schema_checks_them_without_the_gate(tmp_path, gate, lazy):
    """`config check` checks the gate's language and schema (jsonschema, the `gate` extra, once a
    schema is set), but never loads the gate stage itself."""
    init_project(tmp_path / "proj")
    with open(tmp_path / "proj" / "overbrainer.toml", "a", encoding="utf-8") as f:
        f.write(f"\n[gate]\n{gate}\n")
    loaded = _loaded(["-C", str(tmp_path / "proj"), "config", "check"])
    assert lazy <= loaded
    assert _found(loaded, {**KEPT_OFF, "overbrainer.dataset.quality.gate_rules": "the gate stage only"}) == []
