"""The README's first command, as written there, sets a project up and runs the whole pipeline
against a provider named by two variables (the README's OpenRouter line, pointed at the fake), with
what `pip install .` installs: no extra's package can be imported."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

from tests.fixtures.cli import clean_env
from tests.fixtures.missing import without_extras

README = Path(__file__).resolve().parents[2] / "README.md"


def _quick_start() -> tuple[dict[str, str], str]:
    """(the variables of the README's OpenRouter line, the command that follows `pip install .`)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):text.index("## How it works")]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    exports = [line for line in blocks[0].splitlines() if line.startswith("export ") and "openrouter" in line]
    assert len(exports) == 1, blocks[0]
    variables = dict(word.split("=", 1) for word in shlex.split(exports[0])[1:])
    command = blocks[1].strip()
    assert command.startswith("pip install . && "), command
    return variables, command[len("pip install . && "):]


def test_readme_first_command_runs_the_pipeline(tmp_path, fake_provider):
    variables, command = _quick_start()
    assert variables["OVERBRAINER_PROVIDERS__LLM__BASE_URL"] == "https://openrouter.ai/api/v1"
    fake_provider.api_key = "sk-or-test-key"
    fake_provider.models = {"qwen/qwen3-8b": (0.05, 0.2)}
    variables.update(OVERBRAINER_PROVIDERS__LLM__BASE_URL=fake_provider.url,
                     OVERBRAINER_PROVIDERS__LLM__API_KEY="sk-or-test-key")
    # `overbrainer` on PATH is this checkout, run by the test's interpreter.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "overbrainer"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m overbrainer "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = clean_env({**variables, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **without_extras(tmp_path)},
                    home=tmp_path)

    r = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    data = tmp_path / "demo" / "data"
    answers = [json.loads(line) for line in (data / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 2 * 3  # the template's small counts: 2 subtopics x 3 questions
    assert all(a["meta"].get("excluded") is None for a in answers)
    train = (data / "train.jsonl").read_text().splitlines()
    evals = (data / "eval.jsonl").read_text().splitlines()
    assert len(train) + len(evals) == 6 and train
    models = {req.body["model"] for req in fake_provider.chat_requests()}
    assert models == {"qwen/qwen3-8b"}
    assert "cost unknown" not in r.stdout and "$" in r.stdout  # priced from the model listing
