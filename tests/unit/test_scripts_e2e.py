"""The end-to-end scripts end any failure with one `e2e: FAILED: <why>` line and exit 1 (their success
path needs Axolotl or llama.cpp and runs outside the suite)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ["PATH"], "HOME": env.pop("HOME"), "PYTHONPATH": str(SCRIPTS.parent)}
    return subprocess.run(["bash", str(SCRIPTS / script)], capture_output=True, text=True, timeout=60,
                          env={**base, **env}, stdin=subprocess.DEVNULL)


def test_e2e_axolotl_names_a_broken_axolotl_venv(tmp_path):
    venv = tmp_path / "axo"
    (venv / "bin").mkdir(parents=True)
    for name in ("axolotl", "python"):
        exe = venv / "bin" / name
        exe.write_text("#!/bin/sh\nexit 1\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    r = _run("e2e_axolotl.sh", {"HOME": str(tmp_path), "AXO_VENV": str(venv), "PYTHON": sys.executable})
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1] == f"e2e: FAILED: {venv} has no working torch and axolotl (remove it to rebuild)"


def test_e2e_axolotl_defaults_to_the_readme_venv(tmp_path):
    text = (SCRIPTS / "e2e_axolotl.sh").read_text()
    readme = (SCRIPTS.parent / "README.md").read_text()
    assert 'VENV=${AXO_VENV:-$HOME/.venvs/axolotl}' in text and "python3.11 -m venv ~/.venvs/axolotl" in readme


def test_e2e_llm_without_overbrainer_fails_with_the_reason(tmp_path):
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\nexit 1\n")
    fake_python.chmod(fake_python.stat().st_mode | stat.S_IXUSR)
    r = _run("e2e_llm.sh", {"HOME": str(tmp_path), "PYTHON": str(fake_python)})
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1].startswith(f"e2e: FAILED: {fake_python} cannot run overbrainer from ")


def test_an_unexpected_failure_still_ends_with_the_failed_line(tmp_path):
    """A command that fails without its own message (here `mktemp` in a missing folder) is named."""
    r = _run("e2e_llm.sh", {"HOME": str(tmp_path), "TMPDIR": str(tmp_path / "missing"), "PYTHON": sys.executable,
                            "LLAMA_VENV": str(tmp_path / "no-llama")})
    assert r.returncode == 1, r.stderr
    last = r.stderr.splitlines()[-1]
    assert last.startswith("e2e: FAILED: ") and "exited" in last, r.stderr
