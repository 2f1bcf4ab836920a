"""One job on every member of a fake Runpod Instant Cluster (overbrainer/exec/nodes.py): the run
directory sent to each member, the job started on each over SSH with its rank and the primary's
rendezvous address on the cluster's private network (what torchrun's static rendezvous uses), the
nodes meeting there; a member lost mid-run is seen through the API, named, the job stopped on the
others and the whole cluster deleted. Nothing bills after any test."""

from __future__ import annotations

import json
import textwrap
import time

import pytest

from overbrainer.exec import nodes as N
from overbrainer.exec.base import JobSpec
from overbrainer.runpod.cluster import members_lost
from overbrainer.runpod.remove import remove
from overbrainer.runpod.pod_record import PodState
from overbrainer.runpod.waits import Timing
from tests.fixtures.sshd import wait_for
from tests.integration.test_runpod_cluster_provision import WORKDIR, Run
from tests.integration.test_runpod_provision import fake  # noqa: F401 - a fixture

pytestmark = [pytest.mark.ssh, pytest.mark.usefixtures("fake")]

# rank 0 serves on the rendezvous endpoint, the others report their rank there; each then waits
# for `go` (so a test can act while the job runs) and rank 0 writes what it heard
MEET = textwrap.dedent("""\
    import os, socket, sys, time
    rank, (host, port) = int(os.environ["PET_NODE_RANK"]), os.environ["PET_RDZV_ENDPOINT"].split(":")
    if rank == 0:
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port))); s.listen(8); c, addr = s.accept(); heard = c.recv(64).decode() + " from " + addr[0]
    else:
        for _ in range(200):
            try:
                c = socket.create_connection((host, int(port)), 2); c.sendall(str(rank).encode()); break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit("no rendezvous")
    while not os.path.exists("go"):
        time.sleep(0.05)
    if rank == 0:
        open("heard", "w").write(heard + " rank env " + os.environ["OVERBRAINER_NODE_RANK"] + " on "
                                 + os.environ["GLOO_SOCKET_IFNAME"])
""")


def nodes_of(up) -> list[N.Node]:
    return [N.Node(m.rank, m.ip, ex) for m, ex in zip(up.record.members, up.executors)]


def start(fake_runpod, tmp_path, run_id: str):
    run = Run(fake_runpod, tmp_path, run_id=run_id)
    up = run.start()
    local = tmp_path / "job"
    local.mkdir()
    (local / "meet.py").write_text(MEET)
    remote = f"{WORKDIR}/{run_id}/job"
    nodes = nodes_of(up)
    for node in nodes:
        node.executor.upload(str(local), remote)
    jobs = N.spawn_all(nodes, JobSpec(dir=remote, script="python3 meet.py"))
    return run, up, nodes, jobs, remote


def test_every_member_runs_the_job_with_its_rank_and_meets_the_primary(fake_runpod, tmp_path):
    run, up, nodes, jobs, remote = start(fake_runpod, tmp_path, "j1")
    try:
        assert [s.kind for s in N.states(nodes, jobs)] == ["running", "running"]
        assert N.verdict(N.states(nodes, jobs)) == ("running", None)
        for node in nodes:
            node.executor.put_file(f"{remote}/go", "")
        wait_for(lambda: N.verdict(N.states(nodes, jobs))[0] != "running", timeout=60)
        assert N.verdict(N.states(nodes, jobs)) == ("succeeded", None)
        heard = nodes[0].executor.read_from(f"{remote}/heard", 0, 200).decode()
        assert heard == "1 from 10.65.0.3 rank env 0 on ens1"  # over the overlay, from rank 1's address
    finally:
        up.close()
        remove(run.client, run.record(), run.record().path, "requested", "client", Timing.default())
    assert run.record().state == PodState.DELETED


def test_a_member_lost_mid_run_is_named_and_the_whole_cluster_deleted(fake_runpod, tmp_path):
    run, up, nodes, jobs, remote = start(fake_runpod, tmp_path, "j2")
    try:
        record = run.record()
        assert members_lost(run.client, record) is None
        lost = record.members[1]
        fake_runpod.pods.crash(fake_runpod.pod(lost.pod_id))
        why = wait_for(lambda: members_lost(run.client, record), timeout=30)
        assert why == f"member {lost.pod_id} (rank 1) is EXITED"
        started = time.monotonic()
        N.cancel_all(nodes[:1], jobs[:1])  # the job stopped where it still runs
        assert N.states(nodes[:1], jobs[:1])[0].kind == "cancelled" and time.monotonic() - started < 60
    finally:
        up.close()
        remove(run.client, run.record(), run.record().path, why, "client", Timing.default())
    pod_json = json.loads((run.run_dir / "pod.json").read_text())
    assert pod_json["state"] == "deleted" and fake_runpod.clusters() == [] and fake_runpod.billing() == []
