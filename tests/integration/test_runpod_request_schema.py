"""Every request body the Runpod client can send, checked against Runpod's published v2 schemas
(tests/fixtures/runpod_schema.py, written down from the reference): the create request of each
kind of target (with and without a network volume, data centers, the CUDA floor, several GPUs,
a kept pod), every pod action, and the account-secret calls, plus the query strings of the
lists. The bodies are the ones the real code sends: `start_pod` walks its GPU types against the
fake Runpod (every type answers the capacity 400, so no pod is made) and the client's own calls
go out over HTTP; the fake itself refuses what the schema refuses (422 naming the field).

Put a field the schema does not know back into the create request (e.g. the old `cmd` argv) and
this test fails, and so does every create against the fake.
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from overbrainer.config.model import SERVE_IMAGES, RunpodTarget
from overbrainer.front.interrupt import Flag
from overbrainer.runpod import errors as E
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.cluster import start_cluster
from overbrainer.runpod.errors import NoTypePlaced
from overbrainer.runpod.provision import PodPlace, start_pod
from overbrainer.runpod.waits import Timing
from tests.fixtures import runpod_schema
from tests.fixtures.timescale import scale

A6000, RTX4090 = "NVIDIA RTX A6000", "NVIDIA GeForce RTX 4090"
FAKE_ONLY = True  # no pod is created here

TARGETS = {
    "listed": dict(gpu_types=[RTX4090, A6000]),
    "data centers": dict(gpu_types=[RTX4090], data_center_ids=["US-KS-2", "EU-RO-1"]),
    "auto": dict(gpu_types="auto", data_center_ids="auto", min_vram_gb=20),
    "volume": dict(gpu_types=[A6000], network_volume_id="vol1abc", data_center_ids=["EU-RO-1"]),
    "two gpus": dict(gpu_types=[RTX4090], gpu_count=2, max_cost_usd=5.0),
}


@pytest.fixture
def recorded(fake_runpod, monkeypatch):
    """(method, path, query, body) of every request the fake receives."""
    scale(monkeypatch, 0.01)
    seen: list[tuple[str, str, dict, object]] = []
    fake_runpod.on_request = lambda method, path, body: seen.append((method, path, None, body))
    yield seen
    fake_runpod.on_request = None


def _walk(fake, tmp_path, name: str, keep: bool = False, place: dict | None = None, **target) -> None:
    """start_pod over every candidate; each create answers the capacity 400. `place`: more of
    PodPlace (a served provider's pod: its HTTP port, the bootstrap as its ENTRYPOINT)."""
    fake.no_capacity = set(fake.gpus)
    with RunpodClient(fake.url, fake.account_key, sleep=lambda s: None) as client:
        with pytest.raises(NoTypePlaced):
            start_pod(client, RunpodTarget(name="pod", kind="runpod", max_hours=2.0, **target),
                      PodPlace(name, tmp_path / "runs" / name, "/workspace/overbrainer", client.base_url, keep=keep,
                               **(place or {})),
                      flag=Flag(threading.Event()), timing=Timing.default())


def _walk_cluster(fake, tmp_path, name: str, **target) -> None:
    """start_cluster over every candidate; each cluster create answers the capacity 400."""
    fake.no_capacity = set(fake.gpus)
    with RunpodClient(fake.url, fake.account_key, sleep=lambda s: None) as client:
        with pytest.raises(NoTypePlaced):
            start_cluster(client, RunpodTarget(name="pods", kind="runpod", max_hours=2.0, nodes=2, **target),
                          PodPlace(name, tmp_path / "runs" / name, "/workspace/overbrainer", client.base_url),
                          flag=Flag(threading.Event()), timing=Timing.default())


def _client_calls(fake) -> None:
    """The client's own body-carrying calls besides the create: the secret calls."""
    with RunpodClient(fake.url, fake.account_key, sleep=lambda s: None) as client:
        made = client.create_secret("overbrainer_host_key_r9", "aG9zdCBrZXk=", "host key of overbrainer run r9")
        client.create_secret("overbrainer_host_key_r8", "aG9zdCBrZXk=")
        client.patch_secret(made.id, value="bmV3IHZhbHVl")
        client.patch_secret(made.id, description="rotated")
        client.secrets("overbrainer_host_key_r9")
        client.list_pods()
        client.gpu_types(2)
        client.data_centers()


def test_every_body_the_client_sends_is_one_runpod_accepts(fake_runpod, recorded, tmp_path):
    for n, target in enumerate(TARGETS.values()):
        _walk(fake_runpod, tmp_path, f"r{n}", **target)
    _walk(fake_runpod, tmp_path, "kept", keep=True, gpu_types=[RTX4090])
    _walk(fake_runpod, tmp_path, "served", gpu_types=[RTX4090], image=SERVE_IMAGES["vllm"],
          place={"ports": ("22/tcp", "8000/http"), "own_entrypoint": True})
    _walk_cluster(fake_runpod, tmp_path, "c0", gpu_types=[RTX4090, A6000], gpu_count=2, max_cost_usd=9.0)
    _walk_cluster(fake_runpod, tmp_path, "c1", gpu_types="auto", data_center_ids="auto", min_vram_gb=20)
    _walk_cluster(fake_runpod, tmp_path, "c2", gpu_types=[A6000], network_volume_id="vol1abc",
                  data_center_ids=["EU-RO-1"])
    _client_calls(fake_runpod)

    checked: dict[str, int] = {}
    for method, path, _, body in recorded:
        schema = runpod_schema.body_schema(method, path)
        if schema is None:
            assert body is None, f"{method} {path} sends a body Runpod defines none for"
            continue
        assert runpod_schema.problems(schema, body) == [], f"{method} {path}: {body}"
        key = next(f"{m} {p}" for m, p, s in runpod_schema.BODIES if m == method and re.fullmatch(p, path))
        checked[key] = checked.get(key, 0) + 1
    # every kind of body the client sends was sent and checked: the walks' creates, the secret calls
    creates = [body for method, path, _, body in recorded if (method, path) == ("POST", "/pods")]
    clusters = [body for method, path, _, body in recorded if (method, path) == ("POST", "/clusters")]
    assert checked == {"POST /pods": len(creates), "POST /account/secrets": 7 + 3 + 2,
                       "PATCH /account/secrets/[^/]+": 2, "POST /clusters": len(clusters)}
    assert len(clusters) >= 4 and {b["compute"]["gpuCountPerPod"] for b in clusters} == {1, 2}
    assert all(b["type"] == "TRAINING" and b["compute"]["podCount"] == 2 and "gpu" not in b for b in clusters)
    assert any(b.get("mounts") for b in clusters)
    assert len(creates) >= 7
    for call in fake_runpod.calls:
        params = runpod_schema.query_schema(call.method, call.path)
        if params is not None:
            assert runpod_schema.query_problems(params, call.query) == [], (call.path, call.query)
    assert all(c.status != 422 for c in fake_runpod.calls), [c.path for c in fake_runpod.calls if c.status == 422]

    assert all(isinstance(b["args"], str) and "cmd" not in b for b in creates)
    served = [b for b in creates if b["image"] == SERVE_IMAGES["vllm"]]
    assert served and all(b["ports"] == ["22/tcp", "8000/http"] for b in served)
    assert all(json.loads(b["args"])["entrypoint"] == ["sh", "-c"] for b in served)
    assert all(b["ports"] == ["22/tcp"] and not b["args"].startswith("{") for b in creates if b not in served)
    assert {tuple(b.get("dataCenterIds", ())) for b in creates} >= {("US-KS-2", "EU-RO-1"), ("EU-RO-1",), ()}
    assert any(b.get("mounts") == {"network": [{"volumeId": "vol1abc", "path": "/workspace/data"}]} for b in creates)
    assert {b["gpu"]["count"] for b in creates} == {1, 2}
    assert all(b["gpu"]["minCudaVersion"] == "13.0" for b in creates)
    lists = [c for c in fake_runpod.calls if (c.method, c.path) == ("GET", "/pods")]
    assert lists and all(c.query == {"includeClusterPods": "false"} for c in lists)


@pytest.mark.parametrize("field,value,words", [
    ("cmd", ["bash", "-c", "true"], "$: additional properties 'cmd' not allowed"),
    ("args", ["bash", "-c", "true"], "$.args: expected string, got array"),
    ("dockerStartCmd", "bash", "$: additional properties 'dockerStartCmd' not allowed"),
    ("cloud", "ALL", "$.cloud: value must be one of 'SECURE', 'COMMUNITY'"),
    ("gpu", {"id": RTX4090, "count": 1, "gpuTypeIds": [RTX4090]}, "$.gpu: additional properties 'gpuTypeIds'"),
    ("env", {"A": 1}, "$.env.A: expected string, got integer"),
    ("ports", [22], "$.ports[0]: expected string, got integer"),
])
def test_the_fake_refuses_what_the_schema_refuses_naming_the_field(fake_runpod, field, value, words):
    body = {"name": "overbrainer-t-1", "image": "img", "gpu": {"id": RTX4090, "count": 1}, field: value}
    with RunpodClient(fake_runpod.url, fake_runpod.account_key, sleep=lambda s: None) as client:
        with pytest.raises(E.Rejected) as refused:
            client.create_pod(body)
    assert refused.value.status == 422
    [call] = fake_runpod.calls_to("POST", "/pods")
    assert call.status == 422 and fake_runpod.listed() == []
    import requests

    answer = requests.post(fake_runpod.url + "/pods", json=body, timeout=10,
                           headers={"Authorization": f"Bearer {fake_runpod.account_key}", "User-Agent": "t/1"})
    doc = answer.json()
    assert answer.status_code == 422 and doc["detail"].startswith(words) and doc["errors"][0] == doc["detail"]
    assert answer.headers["Content-Type"] == "application/problem+json"
