"""The suite's own promise, checked from outside: a test that leaves a fake Runpod pod billing
fails the whole pytest run (tests/conftest.py), in one process and under pytest-xdist, where the
workers hand their lists to the controller."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

INNER = '''
import requests

GPU = "NVIDIA GeForce RTX 4090"


def test_leaves_a_pod_billing(fake_runpod):
    body = {"name": "overbrainer-t-1", "image": "img", "gpu": {"id": GPU, "count": 1},
            "ports": ["22/tcp"], "env": {}, "args": "sleep 60"}
    r = requests.post(fake_runpod.url + "/pods", json=body, timeout=10,
                      headers={"Authorization": "Bearer " + fake_runpod.account_key,
                               "User-Agent": "test/1"})
    assert r.status_code == 201, r.text


def test_another_that_passes():
    assert 1 + 1 == 2
'''


@pytest.mark.parametrize("mode", [["-p", "no:xdist"], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_pod_left_billing_fails_the_run(tmp_path, mode):
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", *mode,
                           "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_inner.py")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    out = done.stdout + done.stderr
    assert "2 passed" in out, out
    assert done.returncode == 1, out
    assert "fake Runpod pods left billing by" in out and "test_leaves_a_pod_billing" in out, out
