"""`.ci/run` runs the README's test command as written there, and installs the test extra with it
only (once: it builds llama.cpp, and a second `pip install` resolves every dependency again)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line for block in re.findall(r"```sh\n(.*?)```", text, re.S) for line in block.splitlines()
                if "python3 -m pytest" in line]
    assert len(commands) == 1, commands
    return commands[0]


def test_ci_runs_the_readme_test_command_and_installs_the_test_extra_once():
    command = _readme_test_command()
    assert command.startswith("pip install -e '.[test]' && ")
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [line.strip() for line in script.splitlines() if not line.lstrip().startswith("#")]
    assert command in lines
    assert sum(line.count("[test]") for line in lines) == 1


def test_ci_runs_the_readme_lint_line_one_command_a_line():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    [line] = [line for block in re.findall(r"```sh\n(.*?)```", text, re.S) for line in block.splitlines()
              if "ruff check" in line]
    commands = [c.strip() for c in line.split(" && ")]
    assert "vulture --config vulture.toml" in commands
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [line.strip() for line in script.splitlines() if not line.lstrip().startswith("#")]
    found = [lines.index(c) for c in commands]
    assert found == sorted(found), "in the README's order"
