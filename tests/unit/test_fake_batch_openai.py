"""The fake OpenAI Files + Batch API (tests/fixtures/batch_openai.py) against its references
(tests/fixtures/batch_schema.py): it takes the reference's own examples, refuses what the service
refuses with the reference's status and error object, and runs the whole lifecycle."""

from __future__ import annotations

import json
import threading

import pytest
import requests

from tests.fixtures.provider import Fault

ENDPOINT = "/v1/chat/completions"
# The Batch API guide's example input (platform.openai.com/docs/guides/batch).
GUIDE_LINES = [
    {"custom_id": "request-1", "method": "POST", "url": ENDPOINT,
     "body": {"model": "gpt-3.5-turbo-0125", "messages": [{"role": "system", "content": "You are a helpful assistant."},
                                                          {"role": "user", "content": "Hello world!"}],
              "max_tokens": 1000}},
    {"custom_id": "request-2", "method": "POST", "url": ENDPOINT,
     "body": {"model": "gpt-3.5-turbo-0125", "messages": [{"role": "system", "content": "You are an unhelpful "
                                                                                         "assistant."},
                                                          {"role": "user", "content": "Hello world!"}],
              "max_tokens": 1000}},
]


@pytest.fixture
def fake(fake_provider):
    fake_provider.dialect = "openai"
    return fake_provider


def lines(n: int, model: str = "gpt-4o-mini", **change) -> list[dict]:
    return [{"custom_id": f"q-{i}", "method": "POST", "url": ENDPOINT,
             "body": {"model": model, "messages": [{"role": "user", "content": f"Question {i}?"}]}, **change}
            for i in range(n)]


def upload(fake, rows, purpose: str = "batch", name: str = "input.jsonl") -> requests.Response:
    data = "\n".join(json.dumps(r) for r in rows).encode() + b"\n"
    return requests.post(f"{fake.url}/files", files={"file": (name, data)}, data={"purpose": purpose}, timeout=10)


def create(fake, rows=None, file_id=None, **body) -> requests.Response:
    if file_id is None:
        file_id = upload(fake, rows if rows is not None else lines(2)).json()["id"]
    body = {"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h", **body}
    return requests.post(f"{fake.url}/batches", json=body, timeout=10)


def get(fake, path: str) -> requests.Response:
    return requests.get(f"{fake.url}{path}", timeout=10)


def content(fake, file_id) -> list[dict]:
    return [json.loads(x) for x in get(fake, f"/files/{file_id}/content").content.splitlines()]


def refused(r: requests.Response, status: int, param=None, contains: str = "") -> dict:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param and contains in error["message"]
    return error


def test_the_guides_example_runs_and_each_answer_is_the_online_one(fake):
    f = upload(fake, GUIDE_LINES)
    assert f.status_code == 200
    assert {k: f.json()[k] for k in ("object", "purpose", "filename")} == {
        "object": "file", "purpose": "batch", "filename": "input.jsonl"}
    created = create(fake, file_id=f.json()["id"], metadata={"description": "nightly eval job"})
    assert created.status_code == 200
    batch = created.json()
    assert batch["object"] == "batch" and batch["status"] == "validating" and batch["completion_window"] == "24h"
    assert batch["expires_at"] == batch["created_at"] + 24 * 3600 and batch["request_counts"]["total"] == 2
    assert set(batch) >= {"id", "endpoint", "errors", "input_file_id", "output_file_id", "error_file_id",
                          "in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at",
                          "cancelling_at", "cancelled_at", "metadata", "usage"}
    done = get(fake, f"/batches/{batch['id']}").json()
    assert done["status"] == "completed" and done["request_counts"] == {"total": 2, "completed": 2, "failed": 0}
    assert done["error_file_id"] is None and done["usage"]["total_tokens"] > 0
    out = content(fake, done["output_file_id"])
    assert sorted(o["custom_id"] for o in out) == ["request-1", "request-2"]
    for o in out:
        assert o["error"] is None and o["response"]["status_code"] == 200
        online = requests.post(f"{fake.url}/chat/completions", json=GUIDE_LINES[int(o["custom_id"][-1]) - 1]["body"],
                               timeout=10)
        assert o["response"]["body"] == online.json()
    assert fake.batches.created == 1 and fake.files.created == 1


@pytest.mark.parametrize("extra, param, words", [
    ({"model": "gpt-4o"}, "model", "Unrecognized request argument supplied: model"),
    ({"completion_window": "1h"}, "completion_window", "'24h'"),
    ({"endpoint": "/v1/chat"}, "endpoint", "Invalid value"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata", "at most 16"),
    ({"metadata": {"k" * 65: "v"}}, "metadata", "maximum length 64"),
    ({"metadata": {"k": "v" * 513}}, "metadata", "maximum length 512"),
    ({"metadata": {"k": 1}}, "metadata", "expected a string"),
    ({"output_expires_after": {"anchor": "created_at", "seconds": 60}}, "output_expires_after.seconds", "3600"),
])
def test_create_refuses_what_the_reference_refuses(fake, extra, param, words):
    refused(create(fake, **extra), 400, param, words)
    assert fake.batches.created == 0


def test_create_takes_the_references_optional_fields(fake):
    r = create(fake, metadata={f"k{i}": "v" * 512 for i in range(16)},
               output_expires_after={"anchor": "created_at", "seconds": 3600})
    assert r.status_code == 200 and len(r.json()["metadata"]) == 16


def test_a_missing_or_wrong_purpose_file_is_refused(fake):
    refused(create(fake, file_id="file-nope"), 404, "input_file_id", "No such File object: file-nope")
    other = upload(fake, lines(1), purpose="fine-tune").json()["id"]
    refused(create(fake, file_id=other), 400, "input_file_id", "purpose 'batch'")
    refused(upload(fake, lines(1), purpose="batches"), 400, "purpose", "Invalid value: 'batches'")
    refused(upload(fake, lines(1), name="input.json"), 400, "file", ".jsonl")
    r = requests.post(f"{fake.url}/files", files={"file": ("a.jsonl", b"{}")},
                      data={"purpose": "batch", "tag": "x"}, timeout=10)
    refused(r, 400, "tag", "Unrecognized request argument supplied: tag")
    assert fake.files.created == 1 and fake.batches.created == 0


@pytest.mark.parametrize("rows, code", [
    (lines(2) + [lines(1)[0]], "duplicate_custom_id"),
    (lines(1) + [{**lines(2, model="gpt-4o")[1]}], "mismatched_model"),
    (lines(1, url="/v1/embeddings"), "invalid_url"),
    (lines(1, method="GET"), "invalid_method"),
    (lines(1, extra=1), "invalid_request"),
    (lines(4), "too_many_requests"),
])
def test_a_file_that_breaks_the_rules_makes_the_batch_fail_validation(fake, rows, code):
    fake.batches.max_file_lines = 3
    batch = create(fake, rows).json()
    assert batch["status"] == "validating"
    failed = get(fake, f"/batches/{batch['id']}").json()
    assert failed["status"] == "failed" and failed["failed_at"] is not None
    assert failed["errors"]["object"] == "list" and failed["errors"]["data"][0]["code"] == code
    assert set(failed["errors"]["data"][0]) == {"code", "line", "message", "param"}
    assert failed["request_counts"] == {"total": 0, "completed": 0, "failed": 0} and fake.batches.processed == []


def test_the_limits_default_to_the_references():
    from tests.fixtures.provider import FakeProvider

    b = FakeProvider().batches
    assert (b.max_file_lines, b.max_file_bytes, b.max_upload_bytes) == (50_000, 200 * 2**20, 512 * 2**20)


def test_an_oversized_file_fails_validation(fake):
    fake.batches.max_file_bytes = 100
    batch = create(fake, lines(3)).json()
    assert get(fake, f"/batches/{batch['id']}").json()["errors"]["data"][0]["code"] == "file_too_large"


def test_unknown_ids_are_404_and_keys_are_checked(fake):
    refused(get(fake, "/batches/batch_nope"), 404, "batch_id", "No such Batch object")
    refused(get(fake, "/files/file-nope"), 404, "file_id")
    refused(get(fake, "/files/file-nope/content"), 404, "file_id")
    fake.api_key = "sk-right"
    r = get(fake, "/batches")
    assert r.status_code == 401 and "didn't provide an API key" in r.json()["error"]["message"]
    r = requests.get(f"{fake.url}/batches", headers={"Authorization": "Bearer sk-wrong"}, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    r = requests.get(f"{fake.url}/batches", headers={"Authorization": "Bearer sk-right"}, timeout=10)
    assert r.status_code == 200


def test_cancel_leaves_the_requests_run_and_reports_the_others(fake):
    fake.batches.auto_finish_after = None
    batch = create(fake, lines(3)).json()
    assert get(fake, f"/batches/{batch['id']}").json()["status"] == "in_progress"
    fake.batches.progress(batch["id"], 1)
    cancelling = requests.post(f"{fake.url}/batches/{batch['id']}/cancel", timeout=10).json()
    assert cancelling["status"] == "cancelling" and cancelling["cancelling_at"] is not None
    done = get(fake, f"/batches/{batch['id']}").json()
    assert done["status"] == "cancelled" and done["request_counts"] == {"total": 3, "completed": 1, "failed": 2}
    errors = content(fake, done["error_file_id"])
    assert [e["error"]["code"] for e in errors] == ["batch_cancelled"] * 2 and errors[0]["response"] is None
    assert len(content(fake, done["output_file_id"])) == 1
    refused(requests.post(f"{fake.url}/batches/{batch['id']}/cancel", timeout=10), 400, None, "'cancelled'")


def test_a_batch_expires_24_hours_after_creation(fake):
    fake.batches.auto_finish_after = None
    batch = create(fake, lines(3)).json()
    fake.batches.progress(batch["id"], 2)
    fake.batches.advance(23.9)
    assert get(fake, f"/batches/{batch['id']}").json()["status"] == "in_progress"
    fake.batches.advance(0.2)
    done = get(fake, f"/batches/{batch['id']}").json()
    assert done["status"] == "expired" and done["expired_at"] is not None
    assert [e["error"]["code"] for e in content(fake, done["error_file_id"])] == ["batch_expired"]
    assert len(content(fake, done["output_file_id"])) == 2


def test_failed_requests_go_to_the_error_file(fake):
    fake.batches.fail_items(["q-0"])
    fake.batches.fail_items(lambda cid, body: cid == "q-1", code="rate_limit_exceeded", message="slow", status=429)
    rows = lines(4)
    rows[2]["body"]["temperature_x"] = 1  # a field the Chat Completions API refuses
    done = get(fake, f"/batches/{create(fake, rows).json()['id']}").json()
    assert done["request_counts"] == {"total": 4, "completed": 1, "failed": 3}
    errors = {e["custom_id"]: e for e in content(fake, done["error_file_id"])}
    assert errors["q-0"]["response"] is None and errors["q-0"]["error"]["code"] == "request_timeout"
    assert errors["q-1"]["response"]["status_code"] == 429 and errors["q-1"]["error"] is None
    assert errors["q-2"]["response"]["status_code"] == 400
    assert "Unrecognized request argument supplied: temperature_x" in errors["q-2"]["response"]["body"]["error"][
        "message"]
    assert [(cid, body["error"]["param"]) for _, cid, body in fake.batches.invalid] == [("q-2", None)]


def test_list_pages_with_a_cursor(fake):
    ids = [create(fake, lines(1)).json()["id"] for _ in range(5)]
    first = get(fake, "/batches?limit=2").json()
    assert first["object"] == "list" and [b["id"] for b in first["data"]] == ids[::-1][:2] and first["has_more"]
    assert first["first_id"] == ids[4] and first["last_id"] == ids[3]
    rest = get(fake, f"/batches?limit=100&after={first['last_id']}").json()
    assert [b["id"] for b in rest["data"]] == ids[::-1][2:] and not rest["has_more"]
    assert len(get(fake, "/batches").json()["data"]) == 5
    refused(get(fake, "/batches?limit=101"), 400, "limit")
    refused(get(fake, "/batches?limit=0"), 400, "limit")


def test_files_list_filter_and_delete(fake):
    kept = upload(fake, lines(1)).json()["id"]
    other = upload(fake, lines(1), purpose="user_data").json()["id"]
    listed = get(fake, "/files?purpose=batch").json()
    assert [f["id"] for f in listed["data"]] == [kept] and listed["object"] == "list"
    assert get(fake, f"/files/{kept}/content").content.count(b"\n") == 1
    deleted = requests.delete(f"{fake.url}/files/{other}", timeout=10)
    assert deleted.json() == {"id": other, "object": "file", "deleted": True}
    refused(requests.delete(f"{fake.url}/files/{other}", timeout=10), 404, "file_id")


def test_billing_is_at_half_the_listed_price(fake):
    fake.models = {"gpt-4o-mini": (1.0, 2.0)}
    batch = create(fake, lines(3)).json()
    done = get(fake, f"/batches/{batch['id']}").json()
    tally = fake.batches.tally(batch["id"])
    assert tally["input_tokens"] == done["usage"]["input_tokens"] and tally["succeeded"] == 3
    listed = (tally["input_tokens"] * 1.0 + tally["output_tokens"] * 2.0) / 1e6
    assert tally["cost_usd"] == pytest.approx(listed / 2)


def test_faults_and_holds_on_batch_routes(fake):
    fake.batches.fault("/batches", Fault.server_error(), method="POST", after=True)
    lost = create(fake, lines(1), metadata={"run": "r1"})
    assert lost.status_code == 500 and fake.batches.created == 1  # created, the answer lost
    found = [b for b in get(fake, "/batches").json()["data"] if b["metadata"] == {"run": "r1"}]
    assert len(found) == 1
    fake.batches.fault("/files", Fault.rate_limited(), times=1)
    assert upload(fake, lines(1)).status_code == 429 and fake.files.created == 1
    hold = fake.batches.hold("/batches")
    answer = {}
    t = threading.Thread(target=lambda: answer.update(r=create(fake, lines(1))))
    t.start()
    assert hold.wait(10) and fake.batches.created == 2 and "r" not in answer
    hold.release()
    t.join(10)
    assert answer["r"].status_code == 200


def test_a_request_held_before_its_effect_and_dropped_never_happens(fake):
    hold = fake.batches.hold("/files", before=True)
    answer = {}

    def send():
        try:
            answer["r"] = upload(fake, lines(1))
        except requests.ConnectionError as e:
            answer["e"] = e

    t = threading.Thread(target=send)
    t.start()
    assert hold.wait(10) and fake.files.created == 0
    hold.release(drop=True)
    t.join(10)
    assert "e" in answer and fake.files.created == 0 and get(fake, "/files").json()["data"] == []
