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


def test_the_readme_local_server_line_makes_its_max_cost_advice_work(tmp_path, fake_provider, cli):
    """The Quick start's llama.cpp line, pointed at the fake (as llama-server), with its advice
    `--max-cost 0.50`: the plan and the run agree, and the run spends $0 (price = 0: free)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):text.index("## How it works")]
    assert "`--max-cost\n0.50`" in section or "--max-cost 0.50" in section
    block = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    (line,) = [line for line in block.splitlines() if line.startswith("export ") and "127.0.0.1:8080" in line]
    variables = dict(word.split("=", 1) for word in shlex.split(line)[1:])
    assert variables.pop("OVERBRAINER_PROVIDERS__LLM__BASE_URL") == "http://127.0.0.1:8080/v1"
    fake_provider.dialect = "llamacpp"
    env = {**variables, "OVERBRAINER_PROVIDERS__LLM__BASE_URL": fake_provider.url,
           "OVERBRAINER_PROVIDERS__LLM__DIALECT": "llamacpp", "OVERBRAINER_ROLES__PARENT__REASONING": "false"}
    assert cli(["init", tmp_path / "demo"]).returncode == 0
    without = {k: v for k, v in env.items() if k != "OVERBRAINER_PROVIDERS__LLM__PRICE"}
    plan = cli(["-C", tmp_path / "demo", "run", "--plan", "--max-cost", "0.50"], env=without)
    run = cli(["-C", tmp_path / "demo", "run", "--max-cost", "0.50"], env=without)
    assert plan.returncode == run.returncode == 2 and plan.stderr.splitlines()[-1] == run.stderr.splitlines()[-1]
    assert fake_provider.chat_requests() == []
    plan = cli(["-C", tmp_path / "demo", "run", "--plan", "--max-cost", "0.50"], env=env)
    run = cli(["-C", tmp_path / "demo", "run", "--max-cost", "0.50"], env=env)
    assert plan.returncode == run.returncode == 0, (plan.stderr, run.stderr)
    assert "price from providers.llm.price" in plan.stdout and "cost unknown" not in run.stdout
    assert fake_provider.chat_requests()
