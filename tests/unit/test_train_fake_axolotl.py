"""The fake `axolotl` itself (tests/fixtures/axolotl.py): mode selection and its edges."""

from __future__ import annotations

import os
import subprocess

import pytest


def call(fake, cwd, *args, env=None):
    full = {"PATH": os.environ["PATH"], **(env or {})}
    return subprocess.run([str(fake.path), *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=30)


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "axolotl.yaml").write_text('adapter: "lora"\noutput_dir: "/workspace/run/output"\n')
    return run


def test_fake_sits_in_a_venv_and_defaults_to_ok(fake_axolotl, tmp_path):
    assert fake_axolotl.path == tmp_path / "venv" / "bin" / "axolotl"
    assert os.access(fake_axolotl.path, os.X_OK) and fake_axolotl.mode == "ok"
    assert fake_axolotl.calls() == []


def test_env_mode_wins_over_the_mode_file(fake_axolotl, run_dir):
    out = call(fake_axolotl, run_dir, "train", "axolotl.yaml", env={"FAKE_AXOLOTL_MODE": "fail"})
    assert out.returncode == 3 and "(mode fail)" in out.stdout
    fake_axolotl.set_mode("silent", delay=0.01)
    out = call(fake_axolotl, run_dir, "train", "axolotl.yaml")
    assert out.returncode == 0 and "(mode silent)" in out.stdout and not (run_dir / "output").exists()


def test_container_output_dir_falls_back_to_output_here(fake_axolotl, run_dir):
    """`/workspace/run/output` does not exist outside a container: `output` of the cwd is used."""
    assert not os.path.exists("/workspace/run")
    out = call(fake_axolotl, run_dir, "train", "axolotl.yaml", env={"OVERBRAINER_METRICS": str(run_dir / "m.jsonl")})
    assert out.returncode == 0, out.stderr
    assert (run_dir / "output" / "adapter_model.safetensors").is_file()
    assert "token present" not in out.stdout
    assert len((run_dir / "m.jsonl").read_text().splitlines()) == 5
    assert call(fake_axolotl, run_dir, "merge-lora", "axolotl.yaml").returncode == 0
    assert (run_dir / "output" / "merged" / "model.safetensors").is_file()


def test_bad_calls(fake_axolotl, run_dir):
    assert call(fake_axolotl, run_dir, "train", "missing.yaml").returncode == 2
    assert call(fake_axolotl, run_dir, "frobnicate").returncode == 2
    assert call(fake_axolotl, run_dir, "preprocess", "axolotl.yaml").returncode == 0
    with pytest.raises(ValueError, match="unknown fake axolotl mode"):
        fake_axolotl.set_mode("explode")
    assert fake_axolotl.calls() == ["train missing.yaml", "frobnicate", "preprocess axolotl.yaml"]
