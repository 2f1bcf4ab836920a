"""eval_client.py (what a remote eval's job runs next to llama-server) picks the python that runs
lm-eval: the target's python3 when it has lm-eval 0.4.13, else the venv
`$OVERBRAINER_CACHE/lm-eval-0.4.13` (the script runs again with that venv's python), made with pip
when it is not there; a pip that cannot get lm-eval fails in one line and leaves no venv behind.
Real processes: the suite's venv python (it has lm-eval) and the python it was made from (it
has not)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import overbrainer.compare
import overbrainer.eval

SCRIPTS = Path(overbrainer.compare.__file__).with_name("scripts")
EVAL_SCRIPTS = Path(overbrainer.eval.__file__).with_name("scripts")
BASE = Path(getattr(sys, "_base_executable", sys.executable))  # the python this venv was made from
MISSING = "eval: eval_job.json is missing"  # the first thing read once lm-eval is there


def run_client(python: Path | str, cache: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    cwd.mkdir(exist_ok=True)
    shutil.copy(EVAL_SCRIPTS / "eval_client.py", cwd / "eval_client.py")
    shutil.copy(SCRIPTS / "compare_client.py", cwd / "compare_client.py")
    return subprocess.run([str(python), "eval_client.py", "--port", "9", "--server-pid", str(os.getpid())],
                          cwd=cwd, env={**os.environ, "OVERBRAINER_CACHE": str(cache), **env},
                          capture_output=True, text=True, timeout=120)


def venv_like_this_one(venv: Path, *, with_packages: bool = True) -> Path:
    """A venv at `venv` whose site-packages are this one's (lm-eval 0.4.13 among them)."""
    (venv / "bin").mkdir(parents=True)
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", venv / "pyvenv.cfg")
    (venv / "bin" / "python").symlink_to(BASE)
    lib = venv / Path(sysconfig.get_paths()["purelib"]).relative_to(sys.prefix)
    lib.parent.mkdir(parents=True)
    if with_packages:
        lib.symlink_to(sysconfig.get_paths()["purelib"])
    else:
        lib.mkdir()
    return venv / "bin" / "python"


def test_base_python_has_no_lm_eval():
    assert subprocess.run([str(BASE), "-c", "import lm_eval"], capture_output=True).returncode != 0


def test_a_python3_with_lm_eval_runs_it_itself(tmp_path):
    r = run_client(sys.executable, tmp_path / "cache", tmp_path / "job")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"eval: lm-eval 0.4.13 of {sys.executable}", MISSING]
    assert not (tmp_path / "cache").exists()


def test_without_it_the_script_runs_again_in_the_cached_venv(tmp_path):
    python = venv_like_this_one(tmp_path / "cache" / "lm-eval-0.4.13")
    r = run_client(BASE, tmp_path / "cache", tmp_path / "job")
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == [f"eval: lm-eval 0.4.13 of {python}", MISSING]


def test_a_cached_venv_without_lm_eval_is_named_not_run_again(tmp_path):
    venv = tmp_path / "cache" / "lm-eval-0.4.13"
    venv_like_this_one(venv, with_packages=False)
    r = run_client(BASE, tmp_path / "cache", tmp_path / "job")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"eval: {venv} has no lm-eval 0.4.13: remove it to have it made again"]


def test_the_venv_is_made_with_pip_and_a_pip_that_cannot_get_lm_eval_leaves_nothing(tmp_path):
    cache = tmp_path / "cache"
    r = run_client(BASE, cache, tmp_path / "job", PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull)
    assert r.returncode == 1
    venv = cache / "lm-eval-0.4.13"
    first, *_, last = r.stderr.splitlines()
    assert first == f"eval: making {venv} (pip install lm-eval[api]==0.4.13)"
    assert last.startswith(f"eval: cannot make {venv} (pip: ") and "lm-eval" in last, last
    assert last.endswith("); a target whose python3 has no lm-eval 0.4.13 needs to reach PyPI"), last
    assert os.listdir(cache) == []  # no half-made venv
