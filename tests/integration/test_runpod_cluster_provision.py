"""Provisioning a run's Instant Cluster (overbrainer/runpod/cluster.py) against the fake Runpod,
whose members are real process trees (each in its own namespaces, on one overlay network) running
the package's bootstrap (a real sshd with the run's keys) and watchdog. The create is recorded
before it is sent and never resent blindly (an answer lost is reconciled by the cluster's name);
a member lost while the cluster comes up, and Ctrl-C, delete the whole cluster; a member's
watchdog ends the whole cluster (its own DELETE would be a 409). After every test nothing bills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from overbrainer.config.model import RunpodTarget
from overbrainer.front.interrupt import Flag
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.cluster import MemberLost, members_lost, start_cluster
from overbrainer.runpod.errors import ProvisioningInterrupted
from overbrainer.runpod.pod_record import PodRecord, PodState
from overbrainer.runpod.provision import PodPlace
from overbrainer.runpod.remove import remove
from overbrainer.runpod.waits import Timing
from tests.fixtures.sshd import wait_for
from tests.integration.test_runpod_provision import fake  # noqa: F401 - a fixture

A100 = "NVIDIA A100 80GB PCIe"  # 12 in stock in US-KS-2, at most 8 a pod, $1.64/h a GPU
WORKDIR = "/workspace/overbrainer"

pytestmark = [pytest.mark.ssh, pytest.mark.usefixtures("fake")]  # scaled time, nothing billing after


class Run:
    def __init__(self, fake_runpod, tmp_path, run_id: str = "c1", **target):
        self.fake, self.run_id = fake_runpod, run_id
        self.run_dir = tmp_path / "runs" / run_id
        target = {"gpu_types": [A100], "max_hours": 1.0, "nodes": 2, "max_cost_usd": 10.0, **target}
        self.target = RunpodTarget(name="pods", kind="runpod", **target)
        self.client = RunpodClient(fake_runpod.url, fake_runpod.account_key, sleep=lambda s: None)
        self.flag = Flag(threading.Event())
        self.events: list = []

    def start(self):
        return start_cluster(self.client, self.target, PodPlace(self.run_id, self.run_dir, WORKDIR, self.client.base_url),
                             flag=self.flag, timing=Timing.default(), publish=self.events.append)

    def record(self) -> PodRecord:
        return PodRecord.load(self.run_dir / "pod.json")

    def posts(self) -> int:
        return len(self.fake.calls_to("POST", "/clusters"))


def on_members_listed(fake_runpod, action):
    """Call `action(cluster_id)` at the first `GET /clusters/{id}/pods` of each cluster."""
    seen: set[str] = set()

    def hook(method, path, body):
        parts = path.split("/")
        if method == "GET" and len(parts) == 4 and parts[1] == "clusters" and parts[3] == "pods" and parts[2] not in seen:
            seen.add(parts[2])
            action(parts[2])
    fake_runpod.on_request = hook


def test_a_cluster_is_recorded_created_once_and_every_member_reached(fake_runpod, tmp_path):
    run = Run(fake_runpod, tmp_path)
    in_flight: list[str] = []

    def hook(method, path, body):
        if method == "POST" and path == "/clusters":
            in_flight.append(json.loads((run.run_dir / "pod.json").read_text())["attempts"][-1]["result"])
    fake_runpod.on_request = hook
    up = run.start()
    try:
        assert in_flight == ["sent"] and run.posts() == 1  # on disk before Runpod can make it
        record = run.record()
        assert record.state == PodState.READY and record.cluster_id == up.cluster.id and record.nodes == 2
        assert [(m.rank, m.ip) for m in record.members] == [(0, "10.65.0.2"), (1, "10.65.0.3")]
        assert record.pod_id == record.members[0].pod_id and record.ssh == record.members[0].ssh
        assert record.cost_per_hour == pytest.approx(2 * 1.64)  # the members' rates, summed
        body = fake_runpod.cluster(up.cluster.id).body
        assert body["compute"] == {"gpuTypeId": A100, "gpuCountPerPod": 1, "podCount": 2}
        assert body["type"] == "TRAINING" and body["name"] == "overbrainer-c1-1" and "gpu" not in body
        assert body["env"]["OVERBRAINER_MAX_COST_USD"] == "5.0000"  # each member: the cap / nodes
        for rank, executor in enumerate(up.executors):
            assert executor.probe(f"cat {WORKDIR}/c1/.pod/watchdog").strip() == "ready"
            assert f"inet 10.65.0.{2 + rank}/16" in executor.probe("ip -o -4 addr show ens1")  # its overlay address
            log = executor.probe(f"cat {WORKDIR}/c1/.pod/watchdog.log")
            assert f"member of cluster {up.cluster.id}" in log
        assert members_lost(run.client, record) is None
        assert [e.phase for e in run.events] == ["creating", "created", "ready"]
        # a session silent for a while (Axolotl's import before `--version` answers) stays open
        assert up.executors[0].probe("sleep 6; echo still here").strip() == "still here"
    finally:
        up.close()
        remove(run.client, run.record(), run.record().path, "requested", "client", Timing.default())
    assert run.record().state == PodState.DELETED and fake_runpod.clusters() == []


@pytest.mark.parametrize("kind", ["500", "drop"])
def test_a_lost_create_answer_is_reconciled_by_name_never_sent_again(fake_runpod, tmp_path, kind):
    run = Run(fake_runpod, tmp_path, run_id=f"lost{kind}")
    fake_runpod.ambiguous_create(kind, path="/clusters")
    up = run.start()
    try:
        assert run.posts() == 1 and len(fake_runpod.clusters()) == 1  # adopted, not created twice
        assert [a.result for a in run.record().attempts] == ["adopted"]
        assert run.record().cluster_id == up.cluster.id
    finally:
        up.close()
        remove(run.client, run.record(), run.record().path, "requested", "client", Timing.default())


def test_a_member_lost_while_the_cluster_comes_up_deletes_the_whole_cluster(fake_runpod, tmp_path):
    run = Run(fake_runpod, tmp_path)
    lost: list[str] = []

    def crash(cluster_id):
        member = fake_runpod.cluster(cluster_id).members[1]
        lost.append(member.id)
        fake_runpod.pods.crash(member)
    on_members_listed(fake_runpod, crash)
    with pytest.raises(MemberLost) as e:
        run.start()
    assert str(e.value) == f"member {lost[0]} (rank 1) of cluster {run.record().cluster_id} is EXITED"
    record = run.record()
    assert record.state == PodState.DELETED and record.no_pod_left and fake_runpod.clusters() == []
    assert not (run.run_dir / "ssh" / "id_ed25519").exists() and fake_runpod.secrets == {}  # keys and secret dropped


def test_ctrl_c_while_the_members_boot_leaves_no_cluster(fake_runpod, tmp_path):
    run = Run(fake_runpod, tmp_path)
    on_members_listed(fake_runpod, lambda cluster_id: run.flag.event.set())
    with pytest.raises(ProvisioningInterrupted):
        run.start()
    assert run.record().state == PodState.DELETED and fake_runpod.clusters() == [] and run.posts() == 1


def test_a_members_watchdog_deletes_the_whole_cluster(fake_runpod, tmp_path):
    run = Run(fake_runpod, tmp_path)
    up = run.start()
    try:
        # the client marks the results home on the secondary: its watchdog ends every member
        up.executors[1].probe(f"touch {WORKDIR}/c1/.pod/retrieved")
        wait_for(lambda: fake_runpod.clusters() == [], timeout=60)
        assert members_lost(run.client, run.record()) == f"cluster {up.cluster.id} disappeared"
    finally:
        up.close()
        remove(run.client, run.record(), run.record().path, "requested", "client", Timing.default())
    assert fake_runpod.billing() == []


KILLED_CLIENT = """
import sys, threading
from pathlib import Path
from overbrainer.config.model import RunpodTarget
from overbrainer.front.interrupt import Flag
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.cluster import start_cluster
from overbrainer.runpod.provision import PodPlace
from overbrainer.runpod.waits import Timing

url, key, run_dir = sys.argv[1:4]
target = RunpodTarget(name="pods", kind="runpod", gpu_types=["NVIDIA A100 80GB PCIe"], max_hours=1.0, nodes=2,
                      boot_grace_minutes=0.05)
client = RunpodClient(url, key, sleep=lambda s: None)
up = start_cluster(client, target, PodPlace("k1", Path(run_dir), "/workspace/overbrainer", url),
                   flag=Flag(threading.Event()), timing=Timing.default())
print(up.cluster.id, flush=True)
threading.Event().wait()
"""


def test_a_client_killed_after_provisioning_leaves_the_cluster_to_its_watchdogs(fake_runpod, tmp_path):
    env = {**os.environ, "OVERBRAINER_TIME_SCALE": "0.05"}  # up to 45 s for the members to boot on a busy machine
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, fake_runpod.url, fake_runpod.account_key,
                             str(tmp_path / "runs" / "k1")], stdout=subprocess.PIPE, text=True, env=env)
    try:
        cluster_id = proc.stdout.readline().strip()
        assert cluster_id and [c["id"] for c in fake_runpod.clusters()] == [cluster_id]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    # no job ever starts: each member's watchdog deletes the whole cluster after the boot grace (3 s)
    wait_for(lambda: fake_runpod.clusters() == [], timeout=60)
    assert fake_runpod.billing() == []
    assert json.loads((tmp_path / "runs" / "k1" / "pod.json").read_text())["cluster_id"] == cluster_id
