"""`overbrainer train` on a runpod target, through the real CLI, against the fake Runpod whose pods
are real (the package's bootstrap starts sshd, the real watchdog runs; the fake axolotl on this
machine's filesystem is found through the target's `venv`). After every test the fake lists no
pod that bills."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.integration.test_runs_support import make_project

pytestmark = pytest.mark.ssh

RTX4090 = "NVIDIA GeForce RTX 4090"
TIME_SCALE = "0.01"  # polls 20 ms, watchdog tick 0.6 s, gone interval 0.1 s, deadline margin 3 s


class PodProject:
    """A training project whose target `gpu` is a runpod target on the fake."""

    def __init__(self, tmp_path, fake_axolotl, fake, **target):
        self.p = make_project(tmp_path, fake_axolotl, target="gpu")
        self.fake = fake
        keys = {"gpu_types": f'["{RTX4090}"]', "max_hours": "1", **target}
        lines = ["", "[targets.gpu]", 'kind = "runpod"', f'venv = "{fake_axolotl.venv}"']
        lines += [f"{k} = {v}" for k, v in keys.items()]
        toml = self.p.dir / "overbrainer.toml"
        toml.write_text(toml.read_text() + "\n".join(lines) + "\n")
        self.p.env.update({"OVERBRAINER_RUNPOD__BASE_URL": fake.url,
                           "OVERBRAINER_RUNPOD__API_KEY": fake.account_key,
                           "OVERBRAINER_TIME_SCALE": TIME_SCALE})

    def __getattr__(self, name):
        return getattr(self.p, name)

    def pod_json(self, run_id: str) -> dict:
        return json.loads((self.p.runs / run_id / "pod.json").read_text())

    def deletes(self) -> list:
        return self.fake.calls_to("DELETE", r"/pods/[^/]+")


@pytest.fixture
def fake(fake_runpod):
    os.makedirs("/run/sshd", exist_ok=True)
    yield fake_runpod
    fake_runpod.on_request = None
    assert fake_runpod.billing() == []


def test_a_run_on_a_pod_succeeds_and_its_pod_is_deleted(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    r = p.run("train", timeout=120)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "succeeded", rec
    assert rec["remote_dir"] == f"/workspace/overbrainer/{rid}"
    assert (p.runs / rid / "output" / "adapter_model.safetensors").is_file()
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    assert pod["estimated_spend"] is not None and pod["estimated_spend"] > 0
    [delete] = [c for c in p.deletes() if c.key == "account"]
    assert delete.path == f"/pods/{pod['pod_id']}"
    assert (p.runs / rid / ".pod" / "watchdog.log").is_file()
    assert not (p.runs / rid / "ssh" / "id_ed25519").exists()  # the client key is forgotten
    assert fake.secrets == {}  # and the host-key secret
    assert f"train: run {rid} succeeded" in r.stdout
