"""The fake Runpod's Instant Clusters (tests/fixtures/runpod_clusters.py) are as strict as the
published v2 schema and as real as its pods: `POST /clusters` refuses what `CreateClusterRequest`
refuses (422 naming the field: an unknown field, `podCount` outside 2–250), a `gpuCountPerPod`
above the type's `maxCount` and a missing capacity answer 400; its members are real process trees,
each in its own network namespace, that reach each other on one overlay address range with
Runpod's cluster variables; a member answers 409 to its own DELETE and actions; deleting the
cluster ends every member."""

from __future__ import annotations

import shlex

import pytest
import requests

from tests.fixtures import runpod_schema
from tests.fixtures.sshd import wait_for
from tests.integration.test_runpod_fake_pods import get, headers, workspace

GPU = "NVIDIA A100 80GB PCIe"  # 12 in stock in US-KS-2, max 8 a pod
FAKE_ONLY = True  # tests of the fake itself: the clusters they leave are killed at its teardown


def body(cmd: str | None = None, **compute) -> dict:
    out = {"name": "overbrainer-c-1", "type": "TRAINING", "image": "img", "ports": ["22/tcp"], "env": {"A": "1"},
           "compute": {"gpuTypeId": GPU, "gpuCountPerPod": 2, "podCount": 2, **compute}}
    if cmd is not None:
        out["args"] = shlex.join(["sh", "-c", cmd])
    return out


def post(fake, doc: dict, key: str | None = None) -> requests.Response:
    return requests.post(fake.url + "/clusters", json=doc, headers=headers(key or fake.account_key), timeout=10)


def call(fake, method: str, path: str, key: str | None = None) -> requests.Response:
    return requests.request(method, fake.url + path, headers=headers(key or fake.account_key), timeout=10)


def members(fake, cluster_id: str) -> list[dict]:
    r = call(fake, "GET", f"/clusters/{cluster_id}/pods")
    assert r.status_code == 200, r.text
    return r.json()["pods"]


def assigned(fake, cluster_id: str):
    """Every member RUNNING with its rank and address: the members, by rank."""
    def ready():
        pods = members(fake, cluster_id)
        if len(pods) == 2 and all(p["status"] == "RUNNING" and p["cluster"].get("ip") for p in pods):
            return sorted(pods, key=lambda p: p["cluster"]["rank"])
        return None
    return wait_for(ready)


def test_members_are_namespaced_process_trees_on_one_overlay(fake_runpod):
    # rank 0 serves on its overlay address; rank 1 reaches it there with Runpod's variables
    serve = ('env > /workspace/env; ip -o -4 addr show ens1 > /workspace/ens1; '
             'if [ "$NODE_RANK" = 0 ]; then python3 -c "import os,socket; s=socket.socket(); '
             's.bind((os.environ[\'NODE_ADDR\'], int(os.environ[\'PRIMARY_PORT\']))); s.listen(1); c,a=s.accept(); '
             'c.sendall(a[0].encode()); c.close()"; sleep 30; else for i in 1 2 3 4 5 6 7 8 9 10; do python3 -c "import os,'
             'socket; c=socket.create_connection((os.environ[\'PRIMARY_ADDR\'], int(os.environ[\'PRIMARY_PORT\'])), 2); '
             'open(\'/workspace/got\', \'w\').write(c.recv(64).decode())" && break; sleep 0.2; done; sleep 30; fi')
    r = post(fake_runpod, body(serve))
    assert r.status_code == 201, r.text
    doc = r.json()
    assert runpod_schema.problems(runpod_schema.CLUSTER, doc) == []
    assert doc["compute"] == {"gpuTypeId": GPU, "gpuCountPerPod": 2, "podCount": 2}
    pods = assigned(fake_runpod, doc["id"])
    for rank, pod in enumerate(pods):
        assert runpod_schema.problems(runpod_schema.POD, pod) == []
        assert pod["cluster"] == {"id": doc["id"], "rank": rank, "ip": f"10.65.0.{2 + rank}"}
        assert pod["gpu"] == {"id": GPU, "count": 2} and pod["cost"] == 3.28
    wait_for(lambda: (workspace(fake_runpod, pods[1]["id"]) / "got").is_file())
    assert (workspace(fake_runpod, pods[1]["id"]) / "got").read_text() == "10.65.0.3"
    env = dict(line.split("=", 1) for line in (workspace(fake_runpod, pods[1]["id"]) / "env").read_text().splitlines()
               if "=" in line)
    assert {k: env[k] for k in ("PRIMARY_ADDR", "MASTER_ADDR", "NODE_ADDR", "NODE_RANK", "NUM_NODES", "NUM_TRAINERS",
                                "WORLD_SIZE", "HOST_NODE_ADDR")} == {
        "PRIMARY_ADDR": "10.65.0.2", "MASTER_ADDR": "10.65.0.2", "NODE_ADDR": "10.65.0.3", "NODE_RANK": "1",
        "NUM_NODES": "2", "NUM_TRAINERS": "2", "WORLD_SIZE": "4", "HOST_NODE_ADDR": "10.65.0.2:29500"}
    assert env["A"] == "1" and env["RUNPOD_POD_ID"] == pods[1]["id"]
    assert "10.65.0.3/16" in (workspace(fake_runpod, pods[1]["id"]) / "ens1").read_text()
    ns = {fake_runpod.pod(p["id"]).process.namespace for p in pods}
    assert len(ns) == 2  # each member its own namespaces

    shown = call(fake_runpod, "GET", f"/clusters/{doc['id']}").json()
    assert shown["pods"] == {"total": 2, "byStatus": {"RUNNING": 2}} and shown["primary"]["podId"] == pods[0]["id"]
    assert shown["primary"]["sshEndpoint"].startswith("127.0.0.1:")
    assert [c["id"] for c in call(fake_runpod, "GET", "/clusters").json()["clusters"]] == [doc["id"]]
    # members: not in the pod list by default, and not deleted through the pod endpoints
    assert call(fake_runpod, "GET", "/pods").json()["pods"] == []
    listed = requests.get(fake_runpod.url + "/pods", params={"includeClusterPods": "true"},
                          headers=headers(fake_runpod.account_key), timeout=10).json()["pods"]
    assert sorted(p["id"] for p in listed) == sorted(p["id"] for p in pods)
    assert call(fake_runpod, "DELETE", f"/pods/{pods[1]['id']}").status_code == 409
    member_key = fake_runpod.pod(pods[1]["id"]).key
    assert call(fake_runpod, "DELETE", f"/pods/{pods[1]['id']}", member_key).status_code == 409
    action = requests.post(f"{fake_runpod.url}/pods/{pods[0]['id']}/action", json={"action": "stop"},
                           headers=headers(fake_runpod.account_key), timeout=10)
    assert action.status_code == 409
    # a member's own key reads its cluster; another cluster is unknown to it, the list forbidden
    assert call(fake_runpod, "GET", f"/clusters/{doc['id']}", member_key).status_code == 200
    assert call(fake_runpod, "GET", f"/clusters/{doc['id']}/pods", member_key).status_code == 200
    assert call(fake_runpod, "GET", "/clusters/other", member_key).status_code == 404
    assert call(fake_runpod, "GET", "/clusters", member_key).status_code == 403
    assert get(fake_runpod, pods[1]["id"], member_key).status_code == 200

    stock = fake_runpod.gpus[GPU].stock["US-KS-2"]
    assert call(fake_runpod, "DELETE", f"/clusters/{doc['id']}", member_key).status_code == 204
    assert call(fake_runpod, "GET", f"/clusters/{doc['id']}").status_code == 404
    assert fake_runpod.billing() == [] and fake_runpod.clusters() == []
    assert fake_runpod.gpus[GPU].stock["US-KS-2"] == stock + 4
    for pod in pods:
        assert get(fake_runpod, pod["id"]).status_code == 404
        assert fake_runpod.pod(pod["id"]) is None


@pytest.mark.parametrize("change,status,words", [
    ({"compute": {"gpuTypeId": GPU, "gpuCountPerPod": 1, "podCount": 1}}, 422, "$.compute.podCount: 1 is less than"),
    ({"compute": {"gpuTypeId": GPU, "gpuCountPerPod": 1, "podCount": 251}}, 422,
     "$.compute.podCount: 251 is greater than"),
    ({"cloud": "SECURE"}, 422, "$: additional properties 'cloud' not allowed"),
    ({"registry": "cred"}, 422, "$: additional properties 'registry' not allowed"),
    ({"gpu": {"id": GPU}}, 422, "$: additional properties 'gpu' not allowed"),
    ({"compute": {"gpuTypeId": GPU, "gpuCountPerPod": 1, "podCount": 2, "minCudaVersion": "13.0"}}, 422,
     "$.compute: additional properties 'minCudaVersion' not allowed"),
    ({"type": "TRAIN"}, 422, "$.type: value must be one of"),
    ({"compute": {"gpuTypeId": GPU, "gpuCountPerPod": 9, "podCount": 2}}, 400, "gpuCountPerPod 9 is above"),
    ({"compute": {"gpuTypeId": GPU, "gpuCountPerPod": 8, "podCount": 2}}, 400, "There are no longer any instances"),
])
def test_a_create_runpod_refuses_is_refused(fake_runpod, change, status, words):
    r = post(fake_runpod, {**body(), **change})
    assert r.status_code == status and r.json()["detail"].startswith(words), r.text
    assert fake_runpod.clusters() == [] and fake_runpod.billing() == []


def test_missing_fields_and_the_rename(fake_runpod):
    r = post(fake_runpod, {"name": "x", "image": "img"})
    assert r.status_code == 422
    assert set(r.json()["errors"]) >= {"$: missing property 'type'", "$: missing property 'compute'"}
    doc = post(fake_runpod, body()).json()
    bad = requests.patch(f"{fake_runpod.url}/clusters/{doc['id']}", json={"compute": {}},
                         headers=headers(fake_runpod.account_key), timeout=10)
    assert bad.status_code == 422 and bad.json()["detail"] == "$: additional properties 'compute' not allowed"
    ok = requests.patch(f"{fake_runpod.url}/clusters/{doc['id']}", json={"name": "renamed"},
                        headers=headers(fake_runpod.account_key), timeout=10)
    assert ok.status_code == 200 and ok.json()["name"] == "renamed"
    assert call(fake_runpod, "DELETE", f"/clusters/{doc['id']}").status_code == 204
    assert call(fake_runpod, "DELETE", f"/clusters/{doc['id']}").status_code == 404
