"""`train` checks that `axolotl` runs in the target's runtime before it copies anything (a missing
one is exit 2 naming the target and the install line, and leaves no run folder); `runs rm` deletes
the folders of ended runs and refuses running runs and runs whose pod is not deleted."""

from __future__ import annotations

import json

from overbrainer.config.model import RunpodTarget
from tests.integration.test_runs_support import make_project


def _without_axolotl(tmp_path, fake_axolotl, **kw):
    p = make_project(tmp_path, fake_axolotl, **kw)
    empty = tmp_path / "empty-venv"
    (empty / "bin").mkdir(parents=True)
    toml = p.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace(f'venv = "{fake_axolotl.venv}"', f'venv = "{empty}"'))
    return p, empty


def test_a_target_without_axolotl_is_a_configuration_error_and_leaves_no_run(tmp_path, fake_axolotl):
    p, empty = _without_axolotl(tmp_path, fake_axolotl)
    r = p.run("train")
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: target `local`: axolotl is not installed in {empty}/bin (")
    assert last.endswith(f"install it with: python3.11 -m venv {empty} && {empty}/bin/pip install torch "
                         "axolotl==0.19.0")
    assert p.run_ids() == [] and fake_axolotl.calls() == []
    r = p.run("--json", "train")
    assert r.returncode == 2 and json.loads(r.stderr.strip().splitlines()[-1])["exit_code"] == 2


def test_a_docker_target_without_its_engine_says_so(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    toml = p.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace(f'runtime = "native"\nvenv = "{fake_axolotl.venv}"',
                                             'runtime = "docker"\nengine = "podman"'))
    p.env["PATH"] = "/usr/bin:/bin"  # no podman there
    r = p.run("train")
    assert r.returncode == 2, r.stderr
    assert ("error: target `local`: podman is not installed there (runtime = \"docker\"): install it, or set "
            "targets.local.runtime = \"native\"") in r.stderr
    assert p.run_ids() == []


def test_the_check_runs_before_each_training(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    assert p.run("train").returncode == 0
    assert fake_axolotl.version_checks() == 1 and len(p.run_ids()) == 1


def test_runs_rm_deletes_ended_runs_and_refuses_running_ones(tmp_path, fake_axolotl):
    from overbrainer.runpod.pod_record import PodRecord

    p = make_project(tmp_path, fake_axolotl)
    assert p.run("train").returncode == 0
    fake_axolotl.set_mode("fail")
    assert p.run("train").returncode == 1
    ok, failed = p.run_ids()
    fake_axolotl.set_mode("slow")
    assert p.run("train", "--detach").returncode == 0
    running = [rid for rid in p.run_ids() if rid not in (ok, failed)][0]
    # A failed Runpod run whose pod was never confirmed deleted.
    podded = "train_demo_20200101-000000"
    (p.runs / podded).mkdir()
    (p.runs / podded / "run.json").write_text(json.dumps({
        "id": podded, "target": "gpu", "created": "2020-01-01T00:00:00Z", "remote_dir": "", "job": None,
        "state": "failed", "message": "boom"}))
    target = RunpodTarget(name="gpu", kind="runpod")
    pod = PodRecord.for_target(podded, target, keep=False, host_key="ssh-ed25519 AAAA",
                               path=PodRecord.path_in(p.runs / podded))
    attempt = pod.begin_attempt("NVIDIA A40", 1)
    pod.pod_created(attempt, "pod123abc", gpu_type="NVIDIA A40", gpu_count=1, data_center_id=None, rate=0.4)
    pod.save()

    r = p.run("runs", "rm", ok, failed, running, podded, "nope_20200101-000000")
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        f"runs rm: runs/{ok} deleted",
        f"runs rm: runs/{failed} deleted",
        f"runs rm: {running} not deleted: it is running on target `local`: `overbrainer train cancel {running}` "
        f"stops it (or collect it with `overbrainer train attach {running}`)",
        f"runs rm: {podded} not deleted: its pod pod123abc is not deleted: `overbrainer pod rm {podded}` deletes "
        "it first",
        "runs rm: nope_20200101-000000 not deleted: no run `nope_20200101-000000` in runs/"]
    assert r.stderr.strip().splitlines()[-1] == (f"error: 3 of 5 runs not deleted: {running}, {podded}, "
                                                 "nope_20200101-000000")
    assert sorted(p.run_ids()) == sorted([running, podded])
    assert [e.name for e in p.runs.iterdir() if e.name.startswith(".rm-")] == []
    assert p.run("train", "cancel", running).returncode == 0
    r = p.run("--json", "runs", "rm", running)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"run_id": running, "deleted": True, "reason": None}
    assert p.run_ids() == [podded]
