"""The check before a run on remote targets: over SSH (a real sshd) a missing Axolotl leaves no run
here and nothing on the target; on Runpod (the fake, its pods real process trees) the check runs
once the pod is up, before the upload: the run fails with the reason, and its pod is deleted."""

from __future__ import annotations

import pytest

from tests.integration.test_cli_train_ssh import ssh_project
from tests.integration.test_runpod_train import PodProject, fake  # noqa: F401 - `fake`: a fixture

pytestmark = pytest.mark.ssh


def _empty_venv(p, tmp_path, fake_axolotl):
    empty = tmp_path / "empty-venv"
    (empty / "bin").mkdir(parents=True)
    toml = p.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace(f'venv = "{fake_axolotl.venv}"', f'venv = "{empty}"'))
    return empty


def test_an_ssh_target_without_axolotl_leaves_nothing_anywhere(tmp_path, fake_axolotl, sshd):
    p = ssh_project(tmp_path, fake_axolotl, sshd)
    empty = _empty_venv(p, tmp_path, fake_axolotl)
    r = p.run("train")
    assert r.returncode == 2, r.stderr
    assert f"error: target `remote`: axolotl is not installed in {empty}/bin (" in r.stderr
    assert p.run_ids() == []
    remote = tmp_path / "remote"
    assert not remote.exists() or list(remote.iterdir()) == []
    assert fake_axolotl.calls() == []


def test_a_pod_without_axolotl_fails_the_run_before_the_upload_and_is_deleted(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    empty = _empty_venv(p.p, tmp_path, fake_axolotl)
    r = p.run("train", timeout=120)
    assert r.returncode == 2, r.stderr
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "failed" and rec["job"] is None
    assert rec["message"].startswith(f"target `gpu`: axolotl is not installed on its pod, in {empty}/bin")
    assert rec["message"] in r.stderr
    assert p.pod_json(rid)["state"] == "deleted"
    assert not (p.runs / rid / "axolotl.yaml").exists()  # nothing was prepared, nothing uploaded
    assert fake_axolotl.calls() == []
