"""The fake Anthropic Message Batches API (tests/fixtures/batch_anthropic.py) against its references
(tests/fixtures/batch_schema.py): it takes the reference's own example, refuses what the service
refuses with the reference's status and error object, and runs the whole lifecycle."""

from __future__ import annotations

import json

import pytest
import requests

HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-test"}
# The "Create a Message Batch" example of the Batch processing guide.
EXAMPLE = {"requests": [
    {"custom_id": "my-first-request",
     "params": {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [{"role": "user", "content": "Hello, world"}]}},
    {"custom_id": "my-second-request",
     "params": {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                "messages": [{"role": "user", "content": "Hi again, friend"}]}},
]}
FIELDS = {"id", "type", "processing_status", "request_counts", "ended_at", "created_at", "expires_at", "archived_at",
          "cancel_initiated_at", "results_url"}


@pytest.fixture
def fake(fake_provider):
    fake_provider.api_key = HEADERS["x-api-key"]
    return fake_provider


def reqs(n: int, **params) -> dict:
    return {"requests": [{"custom_id": f"q-{i}", "params": {
        "model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": f"Question {i}?"}],
        **params}} for i in range(n)]}


def post(fake, path: str, body=None, headers=HEADERS) -> requests.Response:
    return requests.post(f"{fake.url}/messages/batches{path}", json=body, headers=headers, timeout=10)


def get(fake, path: str, headers=HEADERS) -> requests.Response:
    return requests.get(f"{fake.url}/messages/batches{path}", headers=headers, timeout=10)


def results(fake, batch_id: str) -> dict[str, dict]:
    r = get(fake, f"/{batch_id}/results")
    assert r.status_code == 200, r.text
    return {x["custom_id"]: x["result"] for x in map(json.loads, r.content.splitlines())}


def refused(r: requests.Response, status: int, kind: str = "invalid_request_error", contains: str = "") -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == kind and contains in body["error"]["message"], body


def test_the_guides_example_runs_and_each_message_is_the_online_one(fake):
    created = post(fake, "", EXAMPLE)
    assert created.status_code == 200
    batch = created.json()
    assert set(batch) == FIELDS and batch["id"].startswith("msgbatch_") and batch["type"] == "message_batch"
    assert batch["processing_status"] == "in_progress" and batch["results_url"] is None
    assert batch["request_counts"] == {"processing": 2, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    assert batch["created_at"].endswith("Z") and batch["expires_at"] > batch["created_at"]
    done = get(fake, f"/{batch['id']}").json()
    assert done["processing_status"] == "ended" and done["ended_at"] is not None
    assert done["request_counts"] == {"processing": 0, "succeeded": 2, "errored": 0, "canceled": 0, "expired": 0}
    assert done["results_url"] == f"{fake.url}/messages/batches/{batch['id']}/results"
    got = results(fake, batch["id"])
    for request in EXAMPLE["requests"]:
        online = requests.post(f"{fake.url}/messages", json=request["params"], headers=HEADERS, timeout=10)
        assert got[request["custom_id"]] == {"type": "succeeded", "message": online.json()}
    assert fake.batches.created == 1


@pytest.mark.parametrize("body, contains", [
    ({**reqs(1), "model": "x"}, "model: Extra inputs are not permitted"),
    ({"requests": []}, "at least 1 item"),
    ({}, "requests: Field required"),
    ({"requests": [{**reqs(1)["requests"][0], "custom_id": "has space"}]}, "String should match pattern"),
    ({"requests": [{**reqs(1)["requests"][0], "custom_id": "x" * 65}]}, "String should match pattern"),
    ({"requests": reqs(1)["requests"] * 2}, "Duplicate custom_id"),
    ({"requests": [{**reqs(1)["requests"][0], "extra": 1}]}, "requests.0.extra: Extra inputs"),
    (reqs(1, stream=True), "requests.0.params.stream"),
    (reqs(3), "at most 2 items"),
])
def test_create_refuses_what_the_reference_refuses(fake, body, contains):
    fake.batches.max_batch_requests = 2
    refused(post(fake, "", body), 400, contains=contains)
    assert fake.batches.created == 0


def test_the_limits_default_to_the_references_and_size_is_413(fake):
    assert (fake.batches.max_batch_requests, fake.batches.max_batch_bytes) == (100_000, 256 * 2**20)
    fake.batches.max_batch_bytes = 200
    refused(post(fake, "", reqs(3)), 413, "request_too_large")


def test_keys_versions_and_unknown_ids(fake):
    refused(post(fake, "", reqs(1), headers={"anthropic-version": "2023-06-01"}), 401, "authentication_error")
    refused(post(fake, "", reqs(1), headers={"x-api-key": HEADERS["x-api-key"]}), 400, contains="anthropic-version")
    for r in (get(fake, "/msgbatch_nope"), get(fake, "/msgbatch_nope/results"), post(fake, "/msgbatch_nope/cancel")):
        refused(r, 404, "not_found_error")
    assert fake.batches.created == 0


def test_params_are_checked_as_the_messages_api_checks_them_when_the_batch_runs(fake):
    body = reqs(2)
    body["requests"][1]["params"]["top_n"] = 3
    batch = post(fake, "", body).json()
    assert get(fake, f"/{batch['id']}").json()["request_counts"]["errored"] == 1
    got = results(fake, batch["id"])
    assert got["q-0"]["type"] == "succeeded"
    assert got["q-1"] == {"type": "errored", "error": {"type": "error", "error": {
        "type": "invalid_request_error", "message": "top_n: Extra inputs are not permitted"}}}
    assert [(cid, e["error"]["type"]) for _, cid, e in fake.batches.invalid] == [("q-1", "invalid_request_error")]


def test_results_only_once_ended_and_cancel_only_before(fake):
    fake.batches.auto_finish_after = None
    batch = post(fake, "", reqs(3)).json()
    assert get(fake, f"/{batch['id']}").json()["processing_status"] == "in_progress"
    refused(get(fake, f"/{batch['id']}/results"), 400, contains="not yet ended")
    refused(requests.delete(f"{fake.url}/messages/batches/{batch['id']}", headers=HEADERS, timeout=10), 400)
    fake.batches.progress(batch["id"], 1)
    canceling = post(fake, f"/{batch['id']}/cancel").json()
    assert canceling["processing_status"] == "canceling" and canceling["cancel_initiated_at"] is not None
    done = get(fake, f"/{batch['id']}").json()
    assert done["processing_status"] == "ended"
    assert done["request_counts"] == {"processing": 0, "succeeded": 1, "errored": 0, "canceled": 2, "expired": 0}
    assert sorted(r["type"] for r in results(fake, batch["id"]).values()) == ["canceled", "canceled", "succeeded"]
    refused(post(fake, f"/{batch['id']}/cancel"), 400, contains="already ended")
    deleted = requests.delete(f"{fake.url}/messages/batches/{batch['id']}", headers=HEADERS, timeout=10)
    assert deleted.json() == {"id": batch["id"], "type": "message_batch_deleted"}
    refused(get(fake, f"/{batch['id']}"), 404, "not_found_error")


def test_a_batch_expires_24_hours_after_creation(fake):
    fake.batches.auto_finish_after = None
    batch = post(fake, "", reqs(3)).json()
    fake.batches.progress(batch["id"], 1)
    fake.batches.advance(24)
    done = get(fake, f"/{batch['id']}").json()
    assert done["processing_status"] == "ended" and done["request_counts"]["expired"] == 2
    assert sorted(r["type"] for r in results(fake, batch["id"]).values()) == ["expired", "expired", "succeeded"]


def test_failed_items_and_provider_cancel(fake):
    fake.batches.fail_items(["q-0"])
    fake.batches.fail_items(["q-1"], code="overloaded_error", message="Overloaded", status=529)
    batch = post(fake, "", reqs(3)).json()
    got = (get(fake, f"/{batch['id']}"), results(fake, batch["id"]))[1]
    assert got["q-0"]["error"]["error"]["type"] == "api_error"
    assert got["q-1"]["error"] == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake.batches.auto_finish_after = None
    other = post(fake, "", reqs(2)).json()
    fake.batches.provider_cancel(other["id"])
    assert get(fake, f"/{other['id']}").json()["request_counts"]["canceled"] == 2


def test_list_pages_both_ways(fake):
    ids = [post(fake, "", reqs(1)).json()["id"] for _ in range(5)][::-1]  # newest first
    first = get(fake, "?limit=2").json()
    assert set(first) == {"data", "has_more", "first_id", "last_id"} and first["has_more"]
    assert [b["id"] for b in first["data"]] == ids[:2] and first["last_id"] == ids[1]
    rest = get(fake, f"?limit=1000&after_id={first['last_id']}").json()
    assert [b["id"] for b in rest["data"]] == ids[2:] and not rest["has_more"]
    back = get(fake, f"?limit=1&before_id={ids[2]}").json()
    assert [b["id"] for b in back["data"]] == [ids[1]] and back["has_more"]
    assert len(get(fake, "").json()["data"]) == 5
    refused(get(fake, "?limit=1001"), 400)
    refused(get(fake, "?limit=0"), 400)


def test_billing_is_at_half_the_listed_price(fake):
    fake.models = {"claude-sonnet-4-5": (3.0, 15.0)}
    batch = post(fake, "", reqs(2)).json()
    get(fake, f"/{batch['id']}")
    tally = fake.batches.tally(batch["id"])
    assert tally["succeeded"] == 2
    assert tally["cost_usd"] == pytest.approx((tally["input_tokens"] * 3 + tally["output_tokens"] * 15) / 1e6 / 2)
