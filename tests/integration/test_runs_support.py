"""Helpers shared by the training-run tests (test_cli_train*.py, test_runs_*.py), and their own
checks. A training project: overbrainer.toml with a local and an SSH target running the fake
axolotl, data/train.jsonl and data/eval.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.cli import clean_env
from tests.fixtures.timescale import scaled_env

TIME_SCALE = 0.1  # polls every 0.2 s
HF_TOKEN = "hf_TOPSECRET_f00dfeed1234"
EXAMPLE = {"messages": [{"role": "user", "content": "What is 2+2?"},
                        {"role": "assistant", "content": "4"}]}


class TrainProject:
    def __init__(self, root: Path, venv: Path, *, home: Path, remote: Path | None = None):
        self.dir = root
        self.venv = venv
        self.home = home
        self.remote = remote
        self.env: dict[str, str] = scaled_env(TIME_SCALE)

    def write(self, *, target: str = "local", merge: bool = False, adapter: str = "lora",
              hf_token: bool = False, ssh_alias: str | None = None) -> "TrainProject":
        lines = [
            "[project]", 'name = "Train Demo"', "",
            "[[topics]]", 'name = "t"', 'description = "d"', "subtopics = 1", "questions_per_subtopic = 1", "",
            "[providers.fake]", 'protocol = "openai"', "",
            "[roles]", 'generator = { provider = "fake", model = "m" }', 'parent = { provider = "fake", model = "m" }', "",
            "[training]", f'target = "{target}"', 'base_model = "Qwen/Qwen3-0.6B"', f'adapter = "{adapter}"',
            f"merge = {'true' if merge else 'false'}", "",
            "[targets.local]", 'kind = "local"', 'runtime = "native"', f'venv = "{self.venv}"', "",
        ]
        if self.remote is not None:
            lines += ["[targets.remote]", 'kind = "ssh"', 'runtime = "native"', f'venv = "{self.venv}"',
                      f'workdir = "{self.remote}"', ""]
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "overbrainer.toml").write_text("\n".join(lines))
        data = self.dir / "data"
        data.mkdir(exist_ok=True)
        (data / "train.jsonl").write_text(json.dumps(EXAMPLE) + "\n" + json.dumps(EXAMPLE) + "\n")
        (data / "eval.jsonl").write_text(json.dumps(EXAMPLE) + "\n")
        if hf_token:
            self.env["OVERBRAINER_HF_TOKEN"] = HF_TOKEN
        if ssh_alias:
            self.env["OVERBRAINER_TARGETS__REMOTE__HOST"] = ssh_alias
        return self

    # --- running the CLI --------------------------------------------------------------------

    def args(self, *args) -> list[str]:
        return [sys.executable, "-m", "overbrainer", "-C", str(self.dir), *map(str, args)]

    def run(self, *args, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.args(*args), env=clean_env(self.env, self.home), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def popen(self, *args) -> subprocess.Popen:
        return subprocess.Popen(self.args(*args), env=clean_env(self.env, self.home), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    # --- looking at runs --------------------------------------------------------------------

    @property
    def runs(self) -> Path:
        return self.dir / "runs"

    def run_ids(self) -> list[str]:
        if not self.runs.is_dir():
            return []
        return sorted(p.name for p in self.runs.iterdir() if not p.name.startswith("."))

    def record(self, run_id: str) -> dict:
        return json.loads((self.runs / run_id / "run.json").read_text())

    def wait_for(self, check, timeout: float = 30, what: str = "condition"):
        """Poll a condition on files (the CLI runs in another process) until it holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def wait_state(self, run_id: str, state: str, timeout: float = 30) -> dict:
        def check():
            try:
                r = self.record(run_id)
            except (OSError, ValueError):
                return None
            return r if r["state"] == state else None
        return self.wait_for(check, timeout, f"run {run_id} to be {state}")

    def wait_metrics(self, run_id: str, lines: int, root: Path | None = None, timeout: float = 30) -> None:
        path = (root or self.runs) / run_id / "metrics.jsonl"

        def check():
            try:
                return len(path.read_text().splitlines()) >= lines
            except OSError:
                return False
        self.wait_for(check, timeout, f"{lines} metrics lines of {run_id}")


def make_project(tmp_path, fake_axolotl, **kw) -> TrainProject:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    remote = kw.pop("remote", None)
    return TrainProject(tmp_path / "proj", fake_axolotl.venv, home=home, remote=remote).write(**kw)


def cmdlines() -> list[bytes]:
    """The argv of every process we can see."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                out.append(Path(f"/proc/{entry}/cmdline").read_bytes())
            except OSError:
                pass
    return out


def files_containing(root: Path, needle: bytes) -> list[Path]:
    hits = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            try:
                if needle in p.read_bytes():
                    hits.append(p)
            except OSError:
                pass
    return hits


# --- checks of the helpers themselves --------------------------------------------------------

def test_project_helper_writes_a_valid_training_config(tmp_path, fake_axolotl):
    from overbrainer.config.load import load_config

    p = make_project(tmp_path, fake_axolotl, remote=tmp_path / "remote", ssh_alias="overbrainer-test")
    config = load_config(p.dir, environ=dict(p.env))
    assert config.training.target == "local" and config.training.adapter == "lora"
    assert config.targets["remote"].host == "overbrainer-test"
    assert config.targets["local"].venv == str(fake_axolotl.venv)


@pytest.mark.parametrize("needle", [b"x-needle-1"])
def test_files_containing_finds_only_matches(tmp_path, needle):
    (tmp_path / "a").write_bytes(b"..." + needle)
    (tmp_path / "b").write_bytes(b"nothing")
    assert files_containing(tmp_path, needle) == [tmp_path / "a"]
