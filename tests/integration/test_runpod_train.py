"""`overbrainer train` on a runpod target, through the real CLI, against the fake Runpod whose pods
are real (the package's bootstrap starts sshd, the real watchdog runs; the fake axolotl on this
machine's filesystem is found through the target's `venv`). After every test the fake lists no
pod that bills."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.fixtures.runpod import pod_action
from tests.integration.test_runpod_fake_pods import workspace
from tests.integration.test_runs_support import make_project
from tests.fixtures.timescale import scale, scaled_env

pytestmark = pytest.mark.ssh

RTX4090 = "NVIDIA GeForce RTX 4090"
# After a verified retrieval the client writes the pod's retrieved marker, then deletes it: the
# watchdog may see the marker and delete it first (then DELETE and the first look both say 404).
RETRIEVED_BY = ("client", "watchdog")
TIME_SCALE = 0.01  # polls 20 ms, watchdog tick 0.6 s, gone interval 0.1 s, deadline margin 3 s


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
                           **scaled_env(TIME_SCALE)})

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
    assert pod["state"] == "deleted" and pod["deleted_by"] in RETRIEVED_BY
    assert pod["estimated_spend"] is not None and pod["estimated_spend"] > 0
    [delete] = [c for c in p.deletes() if c.key == "account"]
    assert delete.path == f"/pods/{pod['pod_id']}"
    assert (p.runs / rid / ".pod" / "watchdog.log").is_file()
    assert not (p.runs / rid / "ssh" / "id_ed25519").exists()  # the client key is forgotten
    assert fake.secrets == {}  # and the host-key secret
    assert f"train: run {rid} succeeded" in r.stdout
    spend = "about <$0.01"  # a few seconds at $0.69/h
    ls = p.run("runs", "ls")
    assert ls.returncode == 0 and ls.stdout.rstrip().endswith(f"pod deleted {spend}"), ls.stdout
    show = p.run("runs", "show", rid)
    assert "pod:       pod deleted" in show.stdout and "rate:      $0.69/h" in show.stdout, show.stdout
    assert f"spend:     {spend}" in show.stdout
    shown = json.loads(p.run("--json", "runs", "show", rid).stdout)["pod"]
    assert shown["rate_per_hour"] == 0.69 and shown["spend"] == pod["estimated_spend"]
    history = p.run("history")
    assert history.returncode == 0 and f"pods: 1 run, {spend}" in history.stdout, history.stdout


def _pod_id(p, rid: str) -> str:
    return p.wait_for(lambda: (p.runs / rid / "pod.json").is_file() and p.pod_json(rid).get("pod_id"),
                      what="the pod")


def _started(p):
    """A `train` in the background, once its job runs on the pod: (process, run ID, pod ID)."""
    proc = p.popen("train")
    rid = p.wait_for(lambda: p.run_ids() and p.run_ids()[0], what="the run")
    p.wait_state(rid, "running")
    pod_id = _pod_id(p, rid)
    p.wait_for(lambda: p.pod_json(rid)["state"] == "running", what="pod.json to say running")
    return proc, rid, pod_id


def _ended(proc, timeout: float = 60):
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_pod_deleted_behind_our_back_fails_the_run(tmp_path, fake_axolotl, fake):
    from overbrainer.runpod.api import RunpodClient

    p = PodProject(tmp_path, fake_axolotl, fake)
    fake_axolotl.set_mode("slow")
    proc, rid, pod_id = _started(p)
    with RunpodClient(fake.url, fake.account_key) as client:
        client.delete_pod(pod_id)
    out, err = _ended(proc)
    assert proc.returncode == 1, err
    assert f"pod {pod_id} no longer exists" in err
    rec = p.record(rid)
    assert rec["state"] == "failed" and rec["message"] == f"pod {pod_id} no longer exists"
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "unknown"
    assert len([c for c in p.deletes() if c.key == "account"]) == 1  # ours above; the client deleted nothing


def _detached(p, fake_axolotl, mode: str = "ok", delay: float | None = 1):
    """`train --detach` on the pod: (its result, the run ID)."""
    fake_axolotl.set_mode(mode, delay=delay)
    r = p.run("train", "--detach", timeout=60)
    assert r.returncode == 0, r.stderr
    return r, r.stdout.strip()


def test_a_404_storm_shorter_than_the_gone_rule_deletes_nothing(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    _, rid = _detached(p, fake_axolotl)
    pod_id = p.pod_json(rid)["pod_id"]
    assert p.deletes() == [] and p.pod_json(rid)["state"] == "running"
    before = len(fake.calls)
    fake.storm_404(pod_id, 2)  # the third look sees it again
    a = p.run("train", "attach", rid, timeout=60)
    assert a.returncode == 0, a.stderr
    looks = [c for c in fake.calls[before:] if c.method == "GET" and c.path == f"/pods/{pod_id}"]
    assert [(c.key, c.status) for c in looks[:3]] == [("account", 404), ("account", 404), ("account", 200)]
    assert p.record(rid)["state"] == "succeeded"
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] in RETRIEVED_BY


def test_detach_then_attach_brings_the_results_home_and_deletes_the_pod(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    r, rid = _detached(p, fake_axolotl)
    assert "keeps running on pod" in r.stderr and f"overbrainer train attach {rid}" in r.stderr
    assert fake.billing() != [] and p.deletes() == []  # the watchdog owns the pod meanwhile
    a = p.run("train", "attach", rid, timeout=60)
    assert a.returncode == 0, a.stderr
    assert p.record(rid)["state"] == "succeeded"
    assert (p.runs / rid / "output" / "adapter_model.safetensors").is_file()
    assert p.pod_json(rid)["state"] == "deleted"


@pytest.mark.parametrize("clock", [0, -3600])
def test_a_killed_client_leaves_the_pod_to_its_watchdog_deadline(tmp_path, fake_axolotl, fake, clock):
    # max_hours 0.0025 = 9 s from the watchdog's start: its deadline (the user's limit, never scaled),
    # room enough for the job to start first on a busy machine. It is a duration on the pod's own
    # clock: a pod clock an hour behind ours does not put it off by an hour.
    p = PodProject(tmp_path, fake_axolotl, fake, max_hours="0.0025")
    fake.pods.clock_offset = clock
    fake_axolotl.set_mode("slow")
    proc, rid, pod_id = _started(p)
    proc.kill()  # kill -9: no release, no delete by the client
    _ended(proc)
    p.wait_for(lambda: fake.billing() == [], timeout=60, what="the watchdog to delete the pod")
    [delete] = p.deletes()
    assert delete.key == "pod" and delete.pod_id == pod_id  # the pod's own key: its watchdog
    assert p.pod_json(rid)["state"] == "running"  # the client never saw it


@pytest.mark.parametrize("step", ["secret", "create", "reach"])
def test_ctrl_c_while_provisioning_leaves_no_pod(tmp_path, fake_axolotl, fake, step):
    p = PodProject(tmp_path, fake_axolotl, fake)
    procs = []
    seen = []

    def hook(method, path, body):
        hit = {"secret": method == "POST" and path == "/account/secrets",
               "create": method == "POST" and path == "/pods",
               "reach": method == "GET" and path.startswith("/pods/")}[step]
        if hit and not seen and procs:
            seen.append(path)
            procs[0].send_signal(signal.SIGINT)
    fake.on_request = hook
    procs.append(p.popen("train"))
    out, err = _ended(procs[0])
    assert seen, err
    assert procs[0].returncode == 130, err
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "failed"
    assert rec["message"] == "interrupted before the job started: it has no pod left"
    pod = p.pod_json(rid)
    if step == "secret":  # before any create: no pod, no POST /pods
        assert pod["pod_id"] is None and fake.calls_to("POST", "/pods") == []
    else:  # the pod that existed was deleted by the client, and its delete confirmed
        assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
        assert [c.key for c in p.deletes()] == ["account"]
    assert not (p.runs / rid / "ssh" / "id_ed25519").exists()
    assert fake.secrets == {}


def test_an_embedded_front_ends_abandon_stops_a_provisioning_and_leaves_no_pod(tmp_path, fake_axolotl, fake,
                                                                                monkeypatch):
    """The lease takes the front end's provisioning flag: an embedding caller's `abandon` (not its
    detach) stops the walk once its pod was created; the pod is deleted and confirmed."""
    import threading

    from overbrainer.config.load import load_config
    from overbrainer.errors import Interrupted
    from overbrainer.front.bus import EventBus
    from overbrainer.front.frontend import Embedded
    from overbrainer.front.session import Session
    from overbrainer.runs.flow import train_flow

    p = PodProject(tmp_path, fake_axolotl, fake)
    scale(monkeypatch, TIME_SCALE)
    detach, abandon = threading.Event(), threading.Event()

    def hook(method, path, body):
        if method == "POST" and path == "/pods":
            abandon.set()
    fake.on_request = hook
    session = Session(p.dir, Embedded(EventBus(), detach, abandon, lambda report: None))
    with pytest.raises(Interrupted, match="^interrupted before the job started: it has no pod left$"):
        train_flow(session.with_config(load_config(p.dir, environ=dict(p.env))))
    assert not detach.is_set()
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "failed" and rec["message"] == "interrupted before the job started: it has no pod left"
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    assert [c.key for c in p.deletes()] == ["account"]
    assert len(fake.calls_to("POST", "/pods")) == 1  # the walk stopped: no other type was tried
    assert fake.billing() == [] and fake.secrets == {}


def _sshd_pids(fake, pod_id: str) -> list[int]:
    from tests.fixtures.runpod_pods import pids_in_namespace

    found = []
    for pid in pids_in_namespace(fake.pod(pod_id).process.namespace):
        try:
            argv0 = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0]
        except OSError:
            continue
        if argv0.startswith(b"sshd") or argv0.endswith(b"/sshd"):
            found.append(pid)
    return found


def test_ssh_cut_mid_follow_keeps_the_run_then_attach_collects_it(tmp_path, fake_axolotl, fake):
    import subprocess

    p = PodProject(tmp_path, fake_axolotl, fake)
    fake_axolotl.set_mode("ok", delay=3)
    proc, rid, pod_id = _started(p)
    master = min(_sshd_pids(fake, pod_id))
    # sshd renames its listener: `sshd: /usr/sbin/sshd -f <config> -E <log> [listener] …`
    argv = open(f"/proc/{master}/cmdline", "rb").read().decode().split("\0")[0].split()[1:6]
    init = fake.pod(pod_id).process._init_pid()
    for pid in _sshd_pids(fake, pod_id):  # every sshd of the pod: the connection drops, none answers
        os.kill(pid, signal.SIGKILL)
    out, err = _ended(proc)
    assert proc.returncode == 1, err
    assert f"overbrainer train attach {rid}" in err
    assert p.record(rid)["state"] == "running" and p.pod_json(rid)["state"] == "running"
    assert p.deletes() == []  # a pod that still exists is never deleted on a failed watch
    # sshd comes back (as after a blip of the pod's network); attach collects the run.
    subprocess.run(["nsenter", "-t", str(init), "-m", "-n", "-p", "--", *argv], check=True, timeout=10)
    a = p.run("train", "attach", rid, timeout=60)
    assert a.returncode == 0, a.stderr
    assert p.record(rid)["state"] == "succeeded" and p.pod_json(rid)["state"] == "deleted"


def test_a_two_gpu_pod_trains_with_axolotls_launcher_over_both(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake, gpu_count="2")
    r = p.run("train", timeout=120)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    assert p.pod_json(rid)["gpu_count"] == 2
    assert len(fake.calls_to("POST", "/pods")) == 1
    assert "axolotl.yaml --launcher accelerate -- --num_processes=2" in fake_axolotl.calls()[0]


def test_max_hours_reached_while_following_fails_the_run(tmp_path, fake_axolotl, fake):
    # max_hours 0.0025 = 9 s: the watchdog deletes the pod at its deadline (counted from its own
    # start); the client's watch then fails, the gone rule finds the pod gone, and the run fails with
    # the limit's reason. A time scale of 0.05 puts the client's own guard 15 s after its deadline,
    # so the watchdog's delete comes first even on a busy machine.
    p = PodProject(tmp_path, fake_axolotl, fake, max_hours="0.0025")
    p.env.update(scaled_env(0.05))
    fake_axolotl.set_mode("slow")
    r = p.run("train", timeout=100)
    assert r.returncode == 1, r.stderr
    [rid] = p.run_ids()
    rec = p.record(rid)
    assert rec["state"] == "failed"
    assert rec["message"] == "max_hours reached: the pod was deleted before the job ended"
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "watchdog"
    assert [c.key for c in p.deletes()][:1] == ["pod"]  # the watchdog's own key deleted it


def test_keep_pod_keeps_the_pod_after_a_verified_retrieval(tmp_path, fake_axolotl, fake):
    from overbrainer.runpod.api import RunpodClient

    p = PodProject(tmp_path, fake_axolotl, fake)
    r = p.run("train", "--keep-pod", timeout=120)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    pod = p.pod_json(rid)
    try:
        assert p.record(rid)["state"] == "succeeded"
        assert pod["state"] == "kept" and pod["keep"] is True and pod["deadline_unix"] is None
        assert p.deletes() == []
        assert f"ssh -F runs/{rid}/ssh/config overbrainer-{rid}" in r.stderr
        assert f"remove it with `overbrainer pod rm {rid}`" in r.stderr
        assert (p.runs / rid / "ssh" / "id_ed25519").is_file()  # the kept pod is still reachable
    finally:
        with RunpodClient(fake.url, fake.account_key) as client:
            client.delete_pod(pod["pod_id"])


def test_cancel_of_a_detached_run_collects_it_and_deletes_the_pod(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    _, rid = _detached(p, fake_axolotl, "slow", None)
    c = p.run("train", "cancel", rid, timeout=60)
    assert c.returncode == 0, c.stderr
    assert f"train: run {rid} cancelled" in c.stdout
    assert p.record(rid)["state"] == "cancelled"
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] in RETRIEVED_BY


def test_runs_logs_reads_the_job_log_on_the_pod(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    _, rid = _detached(p, fake_axolotl, "slow", None)
    assert not (p.runs / rid / "job.log").exists()  # nothing retrieved yet: the log is on the pod
    p.wait_for(lambda: "fake axolotl: train" in p.run("runs", "logs", rid).stdout, what="the job log")
    c = p.run("train", "cancel", rid, timeout=60)  # the pod is deleted once the run is collected
    assert c.returncode == 0, c.stderr


def test_attach_to_a_stopped_pod_says_so_and_deletes_nothing(tmp_path, fake_axolotl, fake):
    from overbrainer.runpod.api import RunpodClient

    p = PodProject(tmp_path, fake_axolotl, fake)
    _, rid = _detached(p, fake_axolotl, "slow", None)
    pod_id = p.pod_json(rid)["pod_id"]
    with RunpodClient(fake.url, fake.account_key) as client:
        pod_action(fake, pod_id, "stop")
        a = p.run("train", "attach", rid, timeout=60)
        assert a.returncode == 1
        assert f"pod {pod_id} of run {rid} is stopped and will not run again by itself; remove it with " \
               f"`overbrainer pod rm {rid}`" in a.stderr
        assert p.deletes() == [] and p.record(rid)["state"] == "running"
        client.delete_pod(pod_id)


def test_ctrl_c_while_following_leaves_the_job_and_its_pod_to_the_watchdog(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake)
    fake_axolotl.set_mode("slow")
    proc, rid, pod_id = _started(p)
    proc.send_signal(signal.SIGINT)
    out, err = _ended(proc)
    assert proc.returncode == 130, err
    assert f"run {rid} keeps running on pod {pod_id} ($0.69/h)" in err
    assert p.record(rid)["state"] == "running" and p.pod_json(rid)["state"] == "running"
    assert p.deletes() == [] and fake.pod(pod_id).status == "RUNNING"
    c = p.run("train", "cancel", rid, timeout=60)
    assert c.returncode == 0, c.stderr


@pytest.mark.timeout(420)  # its own waits: the train, the attach (180 s)
def test_a_restarted_pod_is_reached_again_on_its_new_port(tmp_path, fake_axolotl, fake):
    from overbrainer.runpod.api import RunpodClient

    p = PodProject(tmp_path, fake_axolotl, fake)
    _, rid = _detached(p, fake_axolotl, "slow", None)
    pod = p.pod_json(rid)
    old_port = pod["ssh"]["port"]
    with RunpodClient(fake.url, fake.account_key) as client:
        try:
            pod_action(fake, pod["pod_id"], "restart")  # the container starts again: a new public port

            def new_port():
                ssh = client.get_pod(pod["pod_id"]).ssh
                return ssh.port if ssh is not None and ssh.port != old_port else None
            port = p.wait_for(new_port, what="the restarted pod's new port")
            a = p.run("train", "attach", rid, timeout=180)  # minutes on a loaded 2-core machine
            assert p.pod_json(rid)["ssh"]["port"] == port, a.stderr
            assert f"Port {port}" in (p.runs / rid / "ssh" / "config").read_text()
            # The restart ended the job without an exit code: attach settles the run.
            assert a.returncode == 1 and p.record(rid)["state"] == "failed", a.stderr
            assert p.pod_json(rid)["state"] == "deleted"  # what the pod had was retrieved and verified
        finally:
            if p.pod_json(rid)["state"] != "deleted":
                client.delete_pod(pod["pod_id"])


def test_a_run_on_a_cluster_trains_on_every_node_and_deletes_the_whole_cluster(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake, gpu_types='["NVIDIA A100 80GB PCIe"]', nodes="2")
    r = p.run("train", timeout=180)
    assert r.returncode == 0, r.stderr
    [rid] = p.run_ids()
    assert p.record(rid)["state"] == "succeeded"
    assert (p.runs / rid / "output" / "adapter_model.safetensors").is_file()  # from rank 0
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["nodes"] == 2 and len(pod["members"]) == 2
    assert pod["pod_id"] == pod["members"][0]["pod_id"] and pod["deleted_by"] in RETRIEVED_BY
    # one torchrun per node, each with its rank and the primary's rendezvous address
    runs = sorted((fake_axolotl.bin_dir / "torchrun.log").read_text().splitlines())
    assert [line.split()[:2] for line in runs] == [["0", "10.65.0.2:29500"], ["1", "10.65.0.2:29500"]]
    assert all(line.endswith("--nnodes 2 --nproc_per_node 1 --rdzv_backend static -m axolotl.cli.train axolotl.yaml")
               for line in runs)
    assert len(fake.calls_to("POST", "/clusters")) == 1 and fake.calls_to("POST", "/pods") == []
    assert fake.clusters() == [] and fake.secrets == {}
    assert not (p.runs / rid / "ssh" / "id_ed25519").exists()


def test_a_member_lost_mid_run_fails_the_run_naming_it_and_deletes_the_whole_cluster(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake, gpu_types='["NVIDIA A100 80GB PCIe"]', nodes="2")
    fake_axolotl.set_mode("slow")
    proc, rid, _ = _started(p)
    lost = p.pod_json(rid)["members"][1]["pod_id"]
    fake.pods.crash(fake.pod(lost))  # rank 1's machine fails
    out, err = _ended(proc)
    assert proc.returncode == 1, err
    message = f"member {lost} (rank 1) is EXITED: the cluster was deleted"
    assert message in err
    assert p.record(rid)["state"] == "failed" and p.record(rid)["message"] == message
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and fake.clusters() == [] and fake.billing() == []


A100 = "NVIDIA A100 80GB PCIe"


@pytest.mark.parametrize("step,sig,code", [("create", signal.SIGINT, 130), ("members", signal.SIGTERM, 143),
                                           ("members", signal.SIGHUP, 129)])
def test_a_signal_while_a_cluster_comes_up_leaves_no_cluster(tmp_path, fake_axolotl, fake, step, sig, code):
    p = PodProject(tmp_path, fake_axolotl, fake, gpu_types=f'["{A100}"]', nodes="2")
    procs, seen = [], []

    def hook(method, path, body):
        hit = {"create": method == "POST" and path == "/clusters",
               "members": method == "GET" and path.startswith("/clusters/") and path.endswith("/pods")}[step]
        if hit and not seen and procs:
            seen.append(path)
            procs[0].send_signal(sig)
    fake.on_request = hook
    procs.append(p.popen("train"))
    out, err = _ended(procs[0])
    assert seen and procs[0].returncode == code, err
    [rid] = p.run_ids()
    pod = p.pod_json(rid)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client" and pod["cluster_id"]
    assert [c.path for c in fake.calls_to("DELETE", r"/clusters/.*")] == [f"/clusters/{pod['cluster_id']}"]
    assert fake.clusters() == [] and fake.billing() == [] and fake.secrets == {}


def test_a_killed_client_leaves_the_cluster_to_its_members_watchdogs(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake, gpu_types=f'["{A100}"]', nodes="2", max_hours="0.0025")
    fake_axolotl.set_mode("slow")
    proc, rid, _ = _started(p)
    proc.kill()  # kill -9 mid-training: no release, no delete by the client
    _ended(proc)
    p.wait_for(lambda: fake.clusters() == [], timeout=60, what="a member's watchdog to delete the cluster")
    deletes = [c for c in fake.calls_to("DELETE") if c.path.startswith("/clusters/")]
    # the first by a member's own key: its watchdog (the deleting member dies with its cluster before
    # the answer; another member's key, its pod deleted, is then unknown); none by the client
    assert deletes[0].key == "pod" and {c.key for c in deletes} <= {"pod", "unknown"}, deletes
    assert fake.billing() == [] and p.pod_json(rid)["state"] == "running"  # the client never saw it


def test_cancel_after_a_detach_reaches_every_member_again_and_ends_the_cluster(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake, gpu_types=f'["{A100}"]', nodes="2")
    fake_axolotl.set_mode("slow")
    proc, rid, _ = _started(p)
    proc.send_signal(signal.SIGINT)  # Ctrl-C while following: the job goes on, the watchdogs own the cluster
    _ended(proc)
    assert p.record(rid)["state"] == "running" and len(fake.clusters()) == 1
    members = p.pod_json(rid)["members"]
    stopped = []

    def hook(method, path, body):  # what each member shows when the cluster's DELETE comes
        if method == "DELETE" and path.startswith("/clusters/") and not stopped:
            stopped.extend((workspace(fake, m["pod_id"]) / "overbrainer" / rid / "cancelled").exists()
                           for m in members)
    fake.on_request = hook
    r = p.run("train", "cancel", rid, timeout=60)  # reconnects to every member, stops the job on each
    assert r.returncode == 0, r.stderr
    assert p.record(rid)["state"] == "cancelled" and stopped == [True, True]
    p.wait_for(lambda: fake.clusters() == [], timeout=30, what="the cluster to be deleted")
    assert p.pod_json(rid)["state"] == "deleted" and fake.billing() == []


def test_stop_on_a_cluster_stops_every_member_keeps_rank_0s_snapshot_and_resumes(tmp_path, fake_axolotl, fake):
    p = PodProject(tmp_path, fake_axolotl, fake, gpu_types=f'["{A100}"]', nodes="2")
    fake_axolotl.set_mode("snapshot")
    proc, rid, _ = _started(p)
    proc.send_signal(signal.SIGINT)  # detached: the job goes on, the watchdogs own the cluster
    _ended(proc)
    members = p.pod_json(rid)["members"]
    p.wait_for(lambda: (workspace(fake, members[1]["pod_id"]) / "overbrainer" / rid / "metrics.jsonl").exists(),
               what="rank 1's job to train")
    requested, codes = [], []

    def hook(method, path, body):  # what each member shows when the cluster's DELETE comes
        if method == "DELETE" and path.startswith("/clusters/") and not requested:
            for m in members:
                job = workspace(fake, m["pod_id"]) / "overbrainer" / rid
                requested.append((job / "snapshot.request").exists())
                codes.append((job / "exit_code").read_text().strip() if (job / "exit_code").exists() else None)
    fake.on_request = hook
    s = p.run("train", "stop", rid, timeout=60)
    assert s.returncode == 0, s.stderr
    # the stop reached every member, not the primary only, and each job ended by itself (not killed)
    assert requested == [True, True] and codes == ["0", "0"], (requested, codes)
    rec = p.record(rid)
    assert rec["state"] == "stopped", rec
    step = rec["snapshot"]["step"]
    assert (p.runs / rid / "output" / f"checkpoint-{step}" / "trainer_state.json").is_file()  # rank 0's
    assert f"resume with `overbrainer train --resume-from {rid}`" in s.stdout
    p.wait_for(lambda: fake.clusters() == [], timeout=30, what="the cluster to be deleted")
    assert p.pod_json(rid)["state"] == "deleted" and fake.billing() == []

    fake.on_request = None
    fake_axolotl.set_mode("ok")
    r = p.run("train", "--resume-from", rid, timeout=180)
    assert r.returncode == 0, r.stderr
    [new] = [i for i in p.run_ids() if i != rid]
    assert p.record(new)["resumed_from"] == rid and p.record(new)["state"] == "succeeded"
    assert fake.clusters() == [] and fake.billing() == []
