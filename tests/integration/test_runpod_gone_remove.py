"""The gone rule, deletes and sweeps against the fake Runpod (real pods): a pod is gone only after
3 Runpod 404s and absence from the list, or when Runpod shows it TERMINATED; nothing is deleted on
a look; a delete is believed only when Runpod stops showing the pod (404, TERMINATED, or absent
from the list), looked at with a backoff; and other pods of the run are swept."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
import requests

from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.errors import Unavailable
from overbrainer.runpod.gone import Failed, Found, Gone, look_up, look_up_all, mark_gone
from overbrainer.runpod.keys import RunKeys
from overbrainer.runpod.pod_record import PodRecord, PodState
from overbrainer.runpod.remove import NotDeleted, forget_run, remove, sweep
from overbrainer.runpod.waits import Timing
from tests.fixtures.runpod import Fault

GPU = "NVIDIA GeForce RTX 4090"
FAST = Timing(poll=0.01, ready_timeout=5, verdict_timeout=5, reconcile_waits=(0.01, 0.01), delete_timeout=0.5,
              delete_poll=0.01, gone_interval=0.01, deadline_margin=0.1, watchdog_interval=0.1)


@pytest.fixture
def client(fake_runpod):
    with RunpodClient(fake_runpod.url, fake_runpod.account_key, sleep=lambda s: None) as c:
        yield c


def make_pod(client, run_id: str = "r1", n: int = 1) -> str:
    body = {"name": f"overbrainer-{run_id}-{n}", "image": "img", "cloud": "SECURE",
            "gpu": {"id": GPU, "count": 1, "minCudaVersion": "13.0"}, "ports": ["22/tcp"],
            "env": {"OVERBRAINER_RUN_ID": run_id}}  # the image's CMD: sleep infinity
    return client.create_pod(body).id


def record_for(tmp_path, pod_id: str, run_id: str = "r1") -> PodRecord:
    record = PodRecord(run_id=run_id, host_key="ssh-ed25519 AAAA")
    record.save(tmp_path / "pod.json")
    attempt = record.begin_attempt(GPU, 1.0)
    record.pod_created(attempt, pod_id, gpu_type=GPU, gpu_count=1, data_center_id=None, rate=0.69)
    record.save()
    return record


def counts(fake, since: int) -> tuple[int, int, int]:
    calls = fake.calls[since:]
    return (sum(c.method == "GET" and c.path.startswith("/pods/") for c in calls),
            sum(c.method == "GET" and c.path == "/pods" for c in calls),
            sum(c.method == "DELETE" for c in calls))


def test_a_404_then_a_sighting_is_the_pod(fake_runpod, client):
    pod_id = make_pod(client)
    fake_runpod.storm_404(pod_id, 1)
    waits: list[float] = []
    start = len(fake_runpod.calls)
    assert look_up(client, pod_id, FAST, wait=waits.append).id == pod_id
    assert counts(fake_runpod, start) == (2, 0, 0) and waits == [FAST.gone_interval]
    fake_runpod.routes._delete(pod_id)


def test_three_404s_of_a_listed_pod_are_the_pod(fake_runpod, client):
    pod_id = make_pod(client)
    fake_runpod.storm_404(pod_id, 3)
    start = len(fake_runpod.calls)
    assert look_up(client, pod_id, FAST, wait=lambda s: None).id == pod_id
    assert counts(fake_runpod, start) == (3, 1, 0)
    fake_runpod.routes._delete(pod_id)


def test_a_failed_list_leaves_the_pod_undetermined_and_deletes_nothing(fake_runpod, client):
    pod_id = make_pod(client)
    fake_runpod.storm_404(pod_id, 3)
    fake_runpod.fail_list(times=100)
    start = len(fake_runpod.calls)
    with pytest.raises(Unavailable):
        look_up(client, pod_id, FAST, wait=lambda s: None)
    assert counts(fake_runpod, start)[2] == 0 and fake_runpod.pod(pod_id) is not None
    fake_runpod.faults.clear()
    fake_runpod.routes._delete(pod_id)


def test_a_gone_pod_takes_three_looks_and_one_list(fake_runpod, client, tmp_path):
    pod_id = make_pod(client)
    record = record_for(tmp_path, pod_id)
    fake_runpod.routes._delete(pod_id)
    start = len(fake_runpod.calls)
    assert look_up(client, pod_id, FAST, wait=lambda s: None) is None
    assert counts(fake_runpod, start) == (3, 1, 0)
    mark_gone(record, "unknown")
    saved = json.loads((tmp_path / "pod.json").read_text())
    assert saved["state"] == "deleted" and saved["deleted_by"] == "unknown"


def test_a_terminated_pod_is_gone_at_once_and_never_alive(fake_runpod, client):
    pod_id, other = make_pod(client), make_pod(client, n=2)
    fake_runpod.pods.terminated_for = 30  # Runpod may show a deleted pod as TERMINATED for a while
    fake_runpod.routes._delete(pod_id)
    start = len(fake_runpod.calls)
    assert look_up(client, pod_id, FAST, wait=lambda s: None) is None
    assert counts(fake_runpod, start) == (1, 0, 0)
    assert look_up_all(client, [pod_id, other], FAST, wait=lambda s: None)[0] == Gone()
    fake_runpod.routes._delete(other)


def test_look_up_all_shares_its_waits_and_one_list(fake_runpod, client):
    live, gone, stormy = make_pod(client, n=1), make_pod(client, n=2), make_pod(client, n=3)
    fake_runpod.routes._delete(gone)
    fake_runpod.storm_404(stormy, 3)
    waits: list[float] = []
    start = len(fake_runpod.calls)
    looks = look_up_all(client, [live, gone, stormy], FAST, wait=waits.append)
    assert isinstance(looks[0], Found) and looks[0].pod.id == live
    assert looks[1] == Gone() and isinstance(looks[2], Found) and looks[2].pod.id == stormy
    assert waits == [FAST.gone_interval] * 2 and counts(fake_runpod, start) == (7, 1, 0)
    fake_runpod.fail_list(times=100)
    fake_runpod.storm_404(live, 3)
    assert [type(x) for x in look_up_all(client, [live, gone], FAST, wait=lambda s: None)] == [Failed, Failed]
    fake_runpod.faults.clear()
    for pod_id in (live, stormy):
        fake_runpod.routes._delete(pod_id)


def test_remove_deletes_and_confirms(fake_runpod, client, tmp_path):
    pod_id = make_pod(client)
    record = record_for(tmp_path, pod_id)
    events = []
    remove(client, record, None, "requested", "client", FAST, publish=events.append)
    saved = PodRecord.load(tmp_path / "pod.json")
    assert saved.state == PodState.DELETED and saved.deleted_by == "client"
    assert saved.estimated_spend is not None
    assert [e.phase for e in events] == ["deleting", "deleted"]
    assert fake_runpod.billing() == [] and len(fake_runpod.calls_to("DELETE")) == 1


@pytest.mark.parametrize("seen", ["terminated", "absent"])
def test_a_delete_is_confirmed_by_terminated_or_by_absence_from_the_list(fake_runpod, client, tmp_path, seen):
    pod_id = make_pod(client)
    record = record_for(tmp_path, pod_id)
    if seen == "terminated":
        fake_runpod.pods.terminated_for = 30
    else:  # every look at the pod fails (a 5xx after the retries); the list decides
        fake_runpod.fail(503, times=10_000, method="GET", path=f"/pods/{pod_id}")
    remove(client, record, None, "requested", "client", FAST)
    assert PodRecord.load(tmp_path / "pod.json").state == PodState.DELETED
    assert len(fake_runpod.calls_to("GET", "/pods")) == (1 if seen == "absent" else 0)
    fake_runpod.faults.clear()


def test_the_looks_after_a_delete_back_off(fake_runpod, client, tmp_path):
    pod_id = make_pod(client)
    record = record_for(tmp_path, pod_id)
    stuck = fake_runpod.inject(Fault(204, "DELETE", f"/pods/{pod_id}", times=1000, raw=b""))
    waits: list[float] = []

    def nap(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    slow = dataclasses.replace(FAST, delete_timeout=1.0, delete_poll=0.05)
    with pytest.raises(NotDeleted):
        remove(client, record, None, "requested", "client", slow, sleep=nap)
    assert waits[:4] == [0.05, 0.1, 0.2, 0.4]  # 1, 2, 4, 8 … delete_poll
    assert len(waits) <= 6 and sum(waits) <= 1.0 + 1e-6  # the last wait ends at the timeout
    stuck.times = 0
    fake_runpod.routes._delete(pod_id)


def test_remove_sends_the_delete_even_for_a_pod_answering_404(fake_runpod, client, tmp_path):
    pod_id = make_pod(client)
    record = record_for(tmp_path, pod_id)
    fake_runpod.storm_404(pod_id, 1)  # the first look would say "unknown": it proves nothing
    remove(client, record, None, "requested", "client", FAST)
    assert [c.path for c in fake_runpod.calls_to("DELETE")] == [f"/pods/{pod_id}"]
    assert fake_runpod.billing() == []


def test_a_pod_that_will_not_die_is_not_deleted(fake_runpod, client, tmp_path):
    pod_id = make_pod(client)
    record = record_for(tmp_path, pod_id)
    stuck = fake_runpod.inject(Fault(204, "DELETE", f"/pods/{pod_id}", times=1000, raw=b""))
    hint = "could not be confirmed deleted: check `overbrainer pod ls`"
    with pytest.raises(NotDeleted, match=f"pod {pod_id} {hint}"):
        remove(client, record, None, "requested", "client", FAST)
    assert PodRecord.load(tmp_path / "pod.json").state == PodState.DELETING
    assert fake_runpod.pod(pod_id) is not None
    stuck.times = 0
    fake_runpod.routes._delete(pod_id)


def test_the_delete_goes_out_when_pod_json_cannot_be_saved(fake_runpod, client, tmp_path):
    pod_id = make_pod(client)
    record = record_for(tmp_path, pod_id)
    (tmp_path / "pod.json").unlink()
    (tmp_path / "pod.json").mkdir()  # every save fails now
    with pytest.raises(Exception, match="pod.json"):
        remove(client, record, None, "requested", "client", FAST)
    assert fake_runpod.billing() == [] and len(fake_runpod.calls_to("DELETE")) == 1


def test_sweep_deletes_the_runs_other_pods_only(fake_runpod, client):
    kept, duplicate, other_run = make_pod(client, n=1), make_pod(client, n=2), make_pod(client, "r2", 1)
    assert sweep(client, "r1", kept, FAST) == []
    assert {p["id"] for p in fake_runpod.listed()} == {kept, other_run}
    stuck = fake_runpod.inject(Fault(204, "DELETE", f"/pods/{other_run}", times=1000, raw=b""))
    assert sweep(client, "r2", None, FAST) == [other_run]
    stuck.times = 0
    assert sweep(client, "r2", None, FAST) == [] and sweep(client, "r1", None, FAST) == []
    assert fake_runpod.billing() == [] and duplicate not in {p["id"] for p in fake_runpod.listed()}


def test_forget_run_drops_the_private_keys_and_the_secret(fake_runpod, client, tmp_path):
    keys = RunKeys.generate(tmp_path / "ssh", "r1")
    client.create_secret("overbrainer_host_key_r1", keys.host_secret_value())
    client.create_secret("overbrainer_host_key_r10", "other")
    forget_run(client, keys, "r1")
    assert not keys.client_key.exists() and not keys.host_key.exists() and keys.known_hosts.exists()
    assert [s["name"] for s in fake_runpod.secrets.values()] == ["overbrainer_host_key_r10"]
    r = requests.get(fake_runpod.url + "/account/secrets", timeout=5,
                     headers={"Authorization": f"Bearer {fake_runpod.account_key}", "User-Agent": "t/1"})
    assert [s["name"] for s in r.json()["secrets"]] == ["overbrainer_host_key_r10"]
