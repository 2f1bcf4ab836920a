"""Provisioning a run's pod against the fake Runpod, whose pods are real: the package's bootstrap
starts a real sshd with the run's keys and the real watchdog gives its verdict. The GPU walk
(any 400 falls through, 403 and 402 stop), unclear creates reconciled by the run marker, pods
that never become ready deleted and confirmed before the next create, Ctrl-C (the provisioning
flag) before and during the walk, the gone rule while a pod is reached. The fake Runpod refuses what
the published schema refuses, and the pods run the default image's wrapper ENTRYPOINT. After every
test no pod bills."""

from __future__ import annotations

import dataclasses
import json
import os
import threading

import pytest

from overbrainer.config.model import RunpodTarget
from overbrainer.front.interrupt import Flag
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod import errors as E
from overbrainer.runpod.errors import NoCredits
from overbrainer.runpod.errors import (BootstrapFailed, NoTypePlaced, ProvisioningInterrupted, Unanswered,
                                         VolumeSize, WatchdogRefused, run_message)
from overbrainer.runpod.provision import PodPlace, start_pod
from overbrainer.runpod.pod_record import PodRecord, PodState
from overbrainer.runpod.remove import NotDeleted, remove
from overbrainer.runpod.waits import Timing
from tests.fixtures.runpod import Fault
from tests.fixtures.timescale import scale

A6000, A100, RTX4090 = "NVIDIA RTX A6000", "NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 4090"
WORKDIR = "/workspace/overbrainer"
V2_FIELDS = {"name", "image", "args", "cloud", "gpu", "disk", "ports", "startSsh", "env"}

pytestmark = pytest.mark.ssh


@pytest.fixture
def fake(fake_runpod, monkeypatch):
    scale(monkeypatch, 0.01)
    os.makedirs("/run/sshd", exist_ok=True)
    yield fake_runpod
    fake_runpod.on_request = None
    assert fake_runpod.billing() == []


class Run:
    def __init__(self, fake, tmp_path, run_id: str = "r1", **target):
        self.fake, self.run_id = fake, run_id
        self.run_dir = tmp_path / "runs" / run_id
        target = {"gpu_types": [RTX4090], "max_hours": 1.0, **target}
        self.target = RunpodTarget(name="pod", kind="runpod", **target)
        self.client = RunpodClient(fake.url, fake.account_key, sleep=lambda s: None)
        self.flag = Flag(threading.Event())
        self.events: list = []

    def start(self, timing: Timing | None = None, **kw):
        return start_pod(self.client, self.target, PodPlace(self.run_id, self.run_dir, WORKDIR, self.client.base_url),
                         flag=self.flag, timing=timing or Timing.default(), publish=self.events.append, **kw)

    def record(self) -> PodRecord:
        return PodRecord.load(self.run_dir / "pod.json")

    def results(self) -> list[str]:
        return [a.result for a in self.record().attempts]

    def posts(self) -> int:
        return len(self.fake.calls_to("POST", "/pods"))

    def secrets(self) -> list[str]:
        return [s["name"] for s in self.fake.secrets.values()]

    def client_key(self):
        return self.run_dir / "ssh" / "id_ed25519"

    def finish(self, provisioned) -> None:
        provisioned.executor.close()
        remove(self.client, provisioned.record, None, "requested", "client", Timing.default())


def first_look(fake, action):
    """Call `action(pod_id)` at the first GET of each pod created from now on."""
    seen: set[str] = set()

    def hook(method, path, body):
        if method == "GET" and path.startswith("/pods/") and path.count("/") == 2:
            pod_id = path.rsplit("/", 1)[1]
            if pod_id not in seen:
                seen.add(pod_id)
                action(pod_id)
    fake.on_request = hook
    return seen


def test_a_pod_is_created_reached_with_the_run_keys_and_ready(fake, tmp_path):
    run = Run(fake, tmp_path)
    in_flight: list[str] = []

    def hook(method, path, body):
        if method == "POST" and path == "/pods":
            in_flight.append(json.loads((run.run_dir / "pod.json").read_text())["attempts"][-1]["result"])
    fake.on_request = hook
    done = run.start()
    assert in_flight == ["sent"]  # the attempt is on disk before Runpod can make the pod
    record = run.record()
    assert record.state == PodState.READY and record.pod_id == done.pod.id and record.ready_at
    assert record.ssh.port == done.pod.ssh.port and record.cost_per_hour == 0.69 and run.results() == ["created"]
    body = fake.pod(done.pod.id).body
    assert set(body) == V2_FIELDS and body["name"] == "overbrainer-r1-1" and body["cloud"] == "SECURE"
    assert body["gpu"] == {"id": RTX4090, "count": 1, "minCudaVersion": "13.0"}
    assert body["ports"] == ["22/tcp"] and body["startSsh"] is False and body["args"].startswith("sh -c '")
    assert body["image"] == run.target.image  # the default: axolotl's cloud image, a wrapper ENTRYPOINT
    assert "[entrypoint] wrapper" in fake.pod(done.pod.id).process.log_path.read_text()
    assert body["env"]["OVERBRAINER_RUN_ID"] == "r1" and body["env"]["OVERBRAINER_API_URL"] == fake.url
    assert body["env"]["OVERBRAINER_HOST_KEY"] == "{{ RUNPOD_SECRET_overbrainer_host_key_r1 }}"
    assert run.secrets() == ["overbrainer_host_key_r1"] and fake.calls_to("GET", "/catalog/gpus") == []
    ex = done.executor
    assert ex.endpoint.host_key == done.keys.host_public and ex.endpoint.agent is False
    assert ex.endpoint.ssh_config == str(run.run_dir / "ssh" / "config")
    assert ex.probe(f"cat {WORKDIR}/r1/.pod/watchdog").strip() == "ready"
    assert [e.phase for e in run.events] == ["creating", "created", "ready"]
    run.finish(done)


def test_any_400_falls_through_to_the_next_type_and_403_stops(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[A6000, A100, RTX4090])
    fake.no_capacity = {A6000}
    odd = fake.inject(Fault(400, "POST", "/pods", times=0, detail="Some other words for no machine"))

    def arm(method, path, body):  # the odd 400 answers the second type's create only
        if method == "POST" and path == "/pods" and body["gpu"]["id"] == A100:
            odd.times = 1
    fake.on_request = arm
    done = run.start()
    assert run.results() == ["unavailable", "unavailable", "created"] and run.posts() == 3
    assert run.record().attempts[1].detail == ("Runpod answered 400 to the create request: Some other words for "
                                               "no machine")
    assert done.record.gpu_type == RTX4090
    run.finish(done)
    run = Run(fake, tmp_path, "r2", gpu_types=[A6000, RTX4090])
    fake.on_request = None
    fake.no_capacity = set()
    fake.fail(403, method="POST", path="/pods")
    with pytest.raises(E.Forbidden):
        run.start()
    assert run.results() == ["forbidden"] and run.posts() == 3 + 1  # the walk stopped at the 403
    assert not run.client_key().exists() and "overbrainer_host_key_r2" not in run.secrets()


def test_auto_reads_the_catalog_once_and_an_existing_secret_is_replaced(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types="auto", min_vram_gb=40)
    fake.add_secret_value("overbrainer_host_key_r1", "a stale host key")  # a rerun of the run id
    fake.no_capacity = {A6000}
    done = run.start()
    assert [a.gpu_type for a in run.record().attempts] == [A6000, A100]
    assert run.results() == ["unavailable", "created"] and len(fake.calls_to("GET", "/catalog/gpus")) == 1
    assert len(fake.calls_to("PATCH", "/account/secrets/.*")) == 1
    assert fake.secret_values["overbrainer_host_key_r1"] == done.keys.host_secret_value()
    assert done.executor.probe("echo ok").strip() == "ok"  # the pod serves the run's host key
    run.finish(done)


def test_nothing_fits_and_each_type_refused_say_why(fake, tmp_path):
    from tests.fixtures.runpod_server import CAPACITY

    run = Run(fake, tmp_path, gpu_types=[A6000, RTX4090])
    fake.no_capacity = {A6000, RTX4090}
    with pytest.raises(NoTypePlaced) as failed:
        run.start()
    lines = str(failed.value).splitlines()
    assert lines[0].startswith("no gpu_types entry could be placed: every create answered 400")
    assert lines[1:] == [f"  {A6000}: {CAPACITY}", f"  {RTX4090}: {CAPACITY}"]  # one line per candidate
    assert run.results() == ["unavailable", "unavailable"] and run.secrets() == []
    run = Run(fake, tmp_path, "r2", network_volume_id="nope", data_center_ids=["EU-RO-1"])
    before = len(fake.calls)
    with pytest.raises(VolumeSize, match="cannot read the size of network volume nope .*no pod was created"):
        run.start()
    assert [(c.method, c.path) for c in fake.calls[before:]] == [("GET", "/network-volumes/nope")]
    assert not run.client_key().exists()
    run = Run(fake, tmp_path, "r3", gpu_types=[A6000], network_volume_id="vol1abc", data_center_ids=["EU-RO-1"])
    bodies: list[dict] = []
    fake.on_request = lambda m, p, b: bodies.append(b) if (m, p) == ("POST", "/pods") else None
    with pytest.raises(NoTypePlaced, match=r"placed \(check network_volume_id and data_center_ids\): every"):
        run.start()
    assert bodies[0]["mounts"] == {"network": [{"volumeId": "vol1abc", "path": "/workspace/data"}]}
    assert bodies[0]["dataCenterIds"] == ["EU-RO-1"] and bodies[0]["env"]["OVERBRAINER_VOLUME_GB"] == "50"


def test_a_watchdog_that_cannot_read_its_pod_refuses_it(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[RTX4090, A100])
    fake.pod_key_methods = set()  # the pod's key is refused (403): its watchdog could not delete it
    with pytest.raises(WatchdogRefused, match=r"refused \(http_403\): pod \w+ was deleted and training refused"):
        run.start()
    assert run.posts() == 1 and run.results() == ["refused"]
    assert len(fake.calls_to("DELETE", "/pods/.*", key="account")) == 1


def test_402_stops_the_walk_after_one_create(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[A6000, RTX4090])
    fake.balance = 0
    with pytest.raises(NoCredits) as failed:
        run.start()
    assert run.posts() == 1 and run.results() == ["rejected"]
    assert run_message(failed.value) == "Runpod answered 402"
    assert not run.client_key().exists() and run.secrets() == []  # nothing may need them


@pytest.mark.parametrize("kind", ["500", "html", "timeout", "drop"])
def test_an_unclear_create_is_adopted_by_its_name_and_a_duplicate_deleted(fake, tmp_path, kind):
    run = Run(fake, tmp_path)
    body = {"name": "overbrainer-r1-0", "image": "img", "gpu": {"id": RTX4090, "count": 1},
            "env": {"OVERBRAINER_RUN_ID": "r1"}}
    duplicate = run.client.create_pod(body).id  # a late pod of the run, named like no attempt
    fake.ambiguous_create(kind, hold=0.2)
    done = run.start()
    assert run.results() == ["adopted"] and run.posts() == 2  # the duplicate's and ours: never resent
    assert fake.pod(duplicate) is None and done.record.pod_id != duplicate
    assert done.executor.probe(f"cat {WORKDIR}/r1/.pod/watchdog").strip() == "ready"
    run.finish(done)


def test_four_unclear_creates_without_a_pod_are_unanswered(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[A6000, RTX4090])
    fake.inject(Fault(500, "POST", "/pods", times=4))
    with pytest.raises(Unanswered, match="check `overbrainer pod ls`"):
        run.start()
    assert run.posts() == 4 and run.results() == ["ambiguous"] * 4
    assert [a.gpu_type for a in run.record().attempts] == [A6000, A6000, RTX4090, RTX4090]
    assert not run.client_key().exists() and run.secrets() == []


def test_two_404s_while_reaching_a_new_pod_are_not_a_gone_pod(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[A6000, RTX4090])
    first_look(fake, lambda pod_id: fake.storm_404(pod_id, 2))  # Runpod 404s the pod it just made
    done = run.start()
    assert run.results() == ["created"] and run.posts() == 1 and fake.calls_to("DELETE") == []
    looks = [c.status for c in fake.calls_to("GET", "/pods/.*")]
    assert looks[:3] == [404, 404, 200]  # the third look saw it: no list needed
    assert len(fake.calls_to("GET", "/pods")) == 1  # only the sweep for other pods, once ready
    assert done.record.gpu_type == A6000
    run.finish(done)


def test_a_pod_that_is_really_gone_while_reached_takes_the_rule_then_the_next_type(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[A6000, RTX4090])
    first_look(fake, lambda pod_id: fake.routes._delete(pod_id) if not fake.calls_to("DELETE") else None)
    done = run.start()
    assert run.results() == ["not_ready", "created"]
    assert run.record().attempts[0].detail == "the pod disappeared"
    assert len(fake.calls_to("GET", "/pods")) == 1 + 1  # 3 looks, then the list: gone (and the sweep)
    assert done.record.gpu_type == RTX4090
    run.finish(done)


def test_a_pod_that_is_not_ready_is_deleted_before_the_next_create(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[A6000, RTX4090])
    first_look(fake, lambda pod_id: fake.pods.stop(fake.pod(pod_id)) if not fake.calls_to("DELETE") else None)
    done = run.start()
    assert run.results() == ["not_ready", "created"]
    assert run.record().attempts[0].detail == "the pod is EXITED"
    order = [(c.method, c.path.split("/")[1] if c.path.count("/") == 1 else "pod", c.status)
             for c in fake.calls if c.key == "account" and c.path.startswith("/pods")]
    first_post, second_post = [i for i, c in enumerate(order) if c[0] == "POST"]
    between = order[first_post + 1:second_post]
    assert ("DELETE", "pod", 204) in between and between[-1] == ("GET", "pod", 404)  # confirmed, then created
    assert done.record.gpu_type == RTX4090
    run.finish(done)


def test_a_pod_that_will_not_die_stops_the_walk(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[A6000, RTX4090])
    stuck: list[Fault] = []

    def trap(pod_id):
        fake.pods.stop(fake.pod(pod_id))  # not ready (EXITED), and its delete never takes
        stuck.append(fake.inject(Fault(204, "DELETE", f"/pods/{pod_id}", times=1000, raw=b"")))
    seen = first_look(fake, trap)
    with pytest.raises(NotDeleted, match="could not be confirmed deleted: check `overbrainer pod ls`"):
        run.start()
    assert run.posts() == 1 and run.record().state == PodState.DELETING
    assert run.client_key().exists() and run.secrets() == ["overbrainer_host_key_r1"]  # a pod may need them
    stuck[0].times = 0
    fake.routes._delete(next(iter(seen)))


def test_a_failed_bootstrap_is_refused_and_its_pod_deleted(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[RTX4090, A100], gpu_count=2)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-a)'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    fake.pod_key_methods = {"GET"}  # the watchdog cannot delete it first: the client reads the verdict
    path = f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    with pytest.raises(BootstrapFailed, match=r"bootstrap failed \(gpu_count 1 of 2\): pod \w+ was deleted"):
        run.start(extra_env={"PATH": path})
    assert run.posts() == 1 and run.results() == ["refused"] and run.record().state == PodState.DELETED
    assert not run.client_key().exists() and run.secrets() == []


def test_ctrl_c_before_the_walk_sends_nothing(fake, tmp_path):
    run = Run(fake, tmp_path)
    run.flag.event.set()
    with pytest.raises(ProvisioningInterrupted, match="interrupted before the job started: it has no pod left"):
        run.start()
    assert fake.calls == [] and run.record().attempts == [] and not run.client_key().exists()


def test_ctrl_c_while_reaching_deletes_the_pod(fake, tmp_path):
    run = Run(fake, tmp_path)
    first_look(fake, lambda pod_id: run.flag.event.set())
    with pytest.raises(ProvisioningInterrupted, match="it has no pod left") as stopped:
        run.start()
    assert stopped.value.exit_code == 130 and run.posts() == 1
    assert len(fake.calls_to("DELETE", "/pods/.*")) == 1
    record = run.record()
    assert record.state == PodState.DELETED and record.deleted_by == "client" and run.secrets() == []


def test_ctrl_c_in_a_reconcile_wait_still_lists_once_and_deletes_the_pod(fake, tmp_path):
    run = Run(fake, tmp_path)
    fake.ambiguous_create("500")
    fake.on_request = lambda m, p, b: run.flag.event.set() if (m, p) == ("POST", "/pods") else None
    timing = dataclasses.replace(Timing.default(), reconcile_waits=(30.0, 30.0))
    with pytest.raises(ProvisioningInterrupted, match="it has no pod left"):
        run.start(timing)
    assert len(fake.calls_to("GET", "/pods")) == 1  # the wait was cut short, the list read once
    assert len(fake.calls_to("DELETE", "/pods/.*")) == 1
    assert run.results() == ["adopted"] and run.record().state == PodState.DELETED


def test_ctrl_c_during_the_create_deletes_the_pod_it_made(fake, tmp_path):
    run = Run(fake, tmp_path, gpu_types=[A6000, RTX4090])
    fake.on_request = lambda m, p, b: run.flag.event.set() if (m, p) == ("POST", "/pods") else None
    with pytest.raises(ProvisioningInterrupted, match="it has no pod left"):
        run.start()
    assert run.posts() == 1 and run.results() == ["created"] and run.record().state == PodState.DELETED
    assert len(fake.calls_to("DELETE", "/pods/.*")) == 1 and not run.client_key().exists()
