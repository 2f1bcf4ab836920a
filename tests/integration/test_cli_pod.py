"""`overbrainer pod ls|rm|gpus|datacenters|volumes|ssh` and the orphan warnings at `train`, through
the real CLI against the fake Runpod (pods made through its API, or real runs on a runpod target).
After every test the fake lists no pod that bills."""

from __future__ import annotations

import json

import pytest
import requests

from tests.integration.test_runpod_train import RTX4090, PodProject, fake  # noqa: F401 (fixture)

pytestmark = pytest.mark.ssh


def HEADERS(fake) -> dict:
    return {"Authorization": f"Bearer {fake.account_key}", "User-Agent": "overbrainer-tests"}


def make_pod(fake, name: str, run: str | None = None) -> str:
    """A pod made through the fake's API with the account key (it runs `sleep infinity`)."""
    body = {"name": name, "image": "img", "gpu": {"id": RTX4090, "count": 1}, "cloud": "SECURE"}
    if run is not None:
        body["env"] = {"OVERBRAINER_RUN_ID": run}
    r = requests.post(f"{fake.url}/pods", json=body, headers=HEADERS(fake),
                      timeout=10)
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def delete_pod(fake, pod_id: str) -> None:
    r = requests.delete(f"{fake.url}/pods/{pod_id}", headers=HEADERS(fake),
                        timeout=10)
    assert r.status_code in (200, 204), r.text


def kept_run(p) -> tuple[str, dict]:
    r = p.run("train", "--keep-pod", timeout=120)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    pod = p.pod_json(rid)
    assert pod["state"] == "kept"
    return rid, pod


def jrun(p, *args):
    r = p.run("--json", *args, timeout=120)
    return r, json.loads(r.stdout) if r.stdout.strip() else None


def test_pod_ls_lists_project_pods_strays_and_foreign_marked_pods_and_records_gone_ones(
        tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    rid, pod = kept_run(p)
    stray = make_pod(fake, f"overbrainer-{rid}-9", rid)
    foreign = make_pod(fake, "overbrainer-elsewhere-1", "elsewhere")
    unmarked = make_pod(fake, "my-notebook")
    r = p.run("pod", "ls")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[1]: line for line in r.stdout.splitlines()[1:-1]}
    assert r.stdout.startswith("RUN") and "NOTE" in r.stdout.splitlines()[0]
    assert lines[pod["pod_id"]].rstrip().endswith("kept") and "$0.69/h" in lines[pod["pod_id"]]
    assert lines[stray].rstrip().endswith("stray, not deleted")
    assert "not in this project's runs/" in lines[foreign] and "pod rm elsewhere --force" in lines[foreign]
    assert unmarked not in lines  # not overbrainer's
    assert r.stdout.splitlines()[-1].startswith("spend so far: about ")
    _, data = jrun(p, "pod", "ls")
    assert {row["pod_id"] for row in data["pods"]} == {pod["pod_id"], stray, foreign}
    assert set(data["pods"][0]) == {"run", "pod_id", "status", "gpu", "rate_per_hour", "created", "note", "spend"}
    # the kept pod disappears behind our back: `pod ls` finds it gone (3 looks + a list) and records it
    delete_pod(fake, pod["pod_id"])
    before = len(fake.calls_to("DELETE"))
    r = p.run("pod", "ls")
    assert r.returncode == 0, r.stderr
    gone = [line for line in r.stdout.splitlines() if pod["pod_id"] in line]
    assert gone and "GONE" in gone[0] and gone[0].rstrip().endswith("gone"), r.stdout
    assert p.pod_json(rid)["state"] == "deleted" and p.pod_json(rid)["deleted_by"] == "unknown"
    assert len(fake.calls_to("DELETE")) == before  # listing never deletes
    for pod_id in (stray, foreign, unmarked):
        delete_pod(fake, pod_id)
    r = p.run("pod", "ls")
    assert r.stdout.strip() == "pod: no overbrainer pod on this account"


def test_pod_rm_of_an_ended_runs_kept_pod_deletes_it_and_its_strays_and_forgets_the_keys(
        tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    rid, pod = kept_run(p)
    stray = make_pod(fake, f"overbrainer-{rid}-9", rid)
    r, data = jrun(p, "pod", "rm", rid)
    assert r.returncode == 0, r.stderr
    assert {d["pod_id"] for d in data["pods"] if d["deleted"]} == {pod["pod_id"], stray}
    after = p.pod_json(rid)
    assert after["state"] == "deleted" and after["deleted_by"] == "pod_rm"
    assert not (p.runs / rid / "ssh" / "id_ed25519").exists() and fake.secrets == {}
    r = p.run("pod", "rm", rid)
    assert r.returncode == 0 and r.stdout.strip() == f"pod: no pod for run {rid}", r.stdout


def test_pod_rm_prints_one_line_per_deleted_pod(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    rid, pod = kept_run(p)
    r = p.run("pod", "rm", rid)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"pod: {pod['pod_id']} deleted after ") and ", about " in r.stdout, r.stdout


def test_pod_rm_refuses_a_run_not_in_runs_without_force(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    other = make_pod(fake, "overbrainer-elsewhere-1", "elsewhere")
    r = p.run("pod", "rm", "elsewhere")
    assert r.returncode == 1 and "not in this project's runs/" in r.stderr, r.stderr
    assert fake.pod(other).status == "RUNNING" or fake.pod(other).status == "PROVISIONING"
    r = p.run("pod", "rm", "elsewhere", "--force")
    assert r.returncode == 0 and f"pod: {other} deleted" in r.stdout, r.stderr


def test_pod_rm_when_the_delete_is_never_confirmed_keeps_the_record_deleting_and_the_keys(
        tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    rid, pod = kept_run(p)
    fault = fake.fail(500, times=10_000, method="DELETE", path=f"/pods/{pod['pod_id']}")
    r = p.run("pod", "rm", rid)
    assert r.returncode == 1, r.stdout
    assert "could not be confirmed deleted" in r.stdout + r.stderr
    assert p.pod_json(rid)["state"] == "deleting"
    assert (p.runs / rid / "ssh" / "id_ed25519").exists() and fake.secrets != {}
    fault.times = 0
    r = p.run("pod", "rm", rid)
    assert r.returncode == 0, r.stderr
    assert p.pod_json(rid)["state"] == "deleted"


def test_pod_rm_keeps_the_training_pod_of_a_running_run_unless_forced(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    fake_axolotl.set_mode("slow")
    r = p.run("train", "--detach", timeout=120)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    pod = p.pod_json(rid)
    extra = make_pod(fake, f"overbrainer-{rid}-9", rid)
    r = p.run("pod", "rm", rid)
    assert r.returncode == 1
    assert f"training pod {pod['pod_id']} was kept" in r.stderr and f"train cancel {rid}" in r.stderr
    assert f"pod: {extra} deleted" in r.stdout
    assert fake.pod(pod["pod_id"]).status == "RUNNING"
    r = p.run("pod", "rm", rid, "--force")
    assert r.returncode == 0, r.stderr
    assert p.record(rid)["state"] == "failed"
    assert p.record(rid)["message"].startswith("pod deleted by `pod rm` before its results were retrieved")
    assert p.pod_json(rid)["deleted_by"] == "pod_rm"


def test_catalog_listings(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    r = p.run("pod", "gpus")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ID", "VRAM", "GB", "$/H", "MAX", "COUNT", "STOCK"]
    assert [line.split()[1] for line in lines[1:3]] == ["RTX", "GeForce"] or "A6000" in lines[1]
    r = p.run("pod", "gpus", "--min-vram", "60", "--in-stock")
    assert [line.split("  ")[0] for line in r.stdout.splitlines()[1:]] == ["NVIDIA A100 80GB PCIe"]
    r = p.run("pod", "gpus", "--max-price", "0.01")
    assert r.stdout.strip() == "pod: no GPU type matches"
    _, data = jrun(p, "pod", "gpus", "--count", "2")
    assert data["gpus"][0]["price_per_hour"] == pytest.approx(0.98)  # the A6000 × 2
    r = p.run("pod", "datacenters")
    assert r.returncode == 0 and r.stdout.splitlines()[0].split()[:3] == ["ID", "NAME", "REGION"]
    assert any(line.startswith("US-KS-2") and "Kansas 2" in line for line in r.stdout.splitlines())
    _, data = jrun(p, "pod", "volumes")
    assert data == {"volumes": [{"id": "vol1abc", "name": "datasets", "size_gb": 50, "data_center": "EU-RO-1"}]}


def test_pod_ssh_prints_the_runs_ssh_line(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    rid, _ = kept_run(p)
    r = p.run("pod", "ssh", rid)
    assert r.returncode == 0 and r.stdout.strip() == f"ssh -F runs/{rid}/ssh/config overbrainer-{rid}"
    p.run("pod", "rm", rid)
    r = p.run("pod", "ssh", "nosuchrun")
    assert r.returncode == 1 and "runs/nosuchrun/ssh/config does not exist" in r.stderr


def test_train_warns_of_orphan_pods_deletes_none_and_prints_the_price_before_creating(
        tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake, gpu_types='"auto"')  # auto reads the catalog's price
    rid, pod = kept_run(p)
    r = p.run("train", timeout=120)
    assert r.returncode == 0, r.stderr
    line = (f"pod {pod['pod_id']} (kept) is still on Runpod at $0.49/h: remove it with "
            f"`overbrainer pod rm {rid}`")
    assert line in r.stderr, r.stderr
    assert fake.pod(pod["pod_id"]).status == "RUNNING"
    assert ": NVIDIA RTX A6000 × 1 at $0.49/h, max $0.49 over max_hours = 1" in r.stderr, r.stderr
    assert p.run("pod", "rm", rid).returncode == 0


def test_pod_ls_shows_a_cluster_as_one_row_and_pod_rm_ends_it_with_its_members(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    body = {"name": "overbrainer-lost-1", "type": "TRAINING", "image": "img",
            "compute": {"gpuTypeId": RTX4090, "gpuCountPerPod": 1, "podCount": 2}}
    made = requests.post(f"{fake.url}/clusters", json=body, headers=HEADERS(fake), timeout=10)
    assert made.status_code == 201, made.text
    cluster = made.json()["id"]
    r, doc = jrun(p, "pod", "ls")
    assert r.returncode == 0, r.stderr
    [row] = doc["pods"]  # one row: the cluster, never its members
    assert row["pod_id"] == cluster and row["run"] == "lost" and row["gpu"] == f"{RTX4090} x1, 2 pods"
    assert row["note"].startswith("not in this project's runs/")
    r = p.run("pod", "rm", "lost", "--force")
    assert r.returncode == 0, r.stderr
    assert f"pod: {cluster} deleted" in r.stdout
    assert fake.clusters() == [] and fake.billing() == []
