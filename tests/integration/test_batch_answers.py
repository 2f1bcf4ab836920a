"""answers in batch mode against the fake batch APIs (tests/fixtures/batch_*.py), in-process:
submit then collect, the records byte for byte those of an online run, half the cost, items
resubmitted once, the spend cap reserved at submission, a crash's batch found again."""

from __future__ import annotations

import json
import shutil

import pytest

from overbrainer.errors import ItemsFailed
from overbrainer.pipeline import answers_batch
from tests.fixtures.project import Project
from tests.fixtures.provider_wire import Fault

PARENT = "deepseek/deepseek-r1"
PROTOCOLS = [("openai", "openai"), ("anthropic", None)]


def _prepared(project, fake_provider, protocol="openai", dialect="openai", **pipeline):
    model = "claude-sonnet-4-5" if protocol == "anthropic" else PARENT
    # OpenAI's and Anthropic's listings carry no prices: the price is configured.
    project.write(topics=1, subtopics=2, questions=3, protocol=protocol, dialect=dialect, parent_model=model,
                  generator_model=model, pipeline={"concurrency": 1, **pipeline},
                  parent={"price": {"input": 2.0, "output": 8.0}})
    texts, _, err = project.stage("questions")
    assert err is None, texts
    fake_provider.batches.shuffle = False
    return model


def _batch(project, tmp_path, name="batch", **pipeline):
    other = Project(tmp_path / name, project.url)
    shutil.copytree(project.dir, other.dir)
    toml = other.dir / "overbrainer.toml"
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in {"mode": "batch", **pipeline}.items())
    toml.write_text(toml.read_text().replace("[pipeline]\n", "[pipeline]\n" + extra, 1))
    other.env = dict(project.env)
    return other


@pytest.mark.parametrize("protocol,dialect", PROTOCOLS)
def test_submit_then_collect_matches_online(project, fake_provider, tmp_path, protocol, dialect):
    _prepared(project, fake_provider, protocol, dialect)
    batch = _batch(project, tmp_path)
    texts, online, err = project.stage("answers")
    assert err is None, texts
    texts, datas, err = batch.stage("answers")
    assert err is None, texts
    assert "6 question(s) submitted" in texts[0] and "pending in 1 batch(es)" in texts[0], texts
    assert datas[0]["mode"] == "batch" and datas[0]["pending"] == 6 and not batch.records("answers")
    assert fake_provider.batches.created == 1
    texts, datas, err = batch.stage("answers")
    assert err is None, texts
    assert datas[0]["done"] + datas[0]["excluded"] == 6 and datas[0]["pending"] == 0, texts
    assert (batch.data / "answers.jsonl").read_bytes() == (project.data / "answers.jsonl").read_bytes()
    assert datas[0]["cost"] == pytest.approx(online[0]["cost"] * 0.5)
    assert fake_provider.batches.created == 1


def _journal(project) -> list[dict]:
    folder = project.dir / ".overbrainer" / "batches"
    docs = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    return sorted(docs, key=lambda d: (d["created_at"], d["id"]))


@pytest.mark.parametrize("protocol,dialect", PROTOCOLS)
def test_expired_batch_resubmitted_once_then_failed(project, fake_provider, tmp_path, protocol, dialect):
    _prepared(project, fake_provider, protocol, dialect)
    batch = _batch(project, tmp_path)
    fake_provider.batches.auto_finish_after = None  # nothing runs: the batches expire
    assert batch.stage("answers")[2] is None
    fake_provider.batches.advance(25)
    texts, datas, err = batch.stage("answers")  # collects the expired batch, sends its items again
    assert err is None, texts
    assert fake_provider.batches.created == 2 and datas[0]["submitted"] == 6
    first, second = _journal(batch)
    assert first["state"] == "collected" and len(first["unresolved"]) == 6 and second["round"] == 1
    assert "expired" in next(iter(first["errors"].values()))
    fake_provider.batches.advance(25)
    texts, datas, err = batch.stage("answers")  # expired again: failed items, not sent a third time
    assert isinstance(err, ItemsFailed), texts
    assert datas[0]["failed"] == 6 and "no answer from two batches, not sent again" in texts[0]
    assert fake_provider.batches.created == 2
    texts, datas, err = batch.stage("answers")
    assert isinstance(err, ItemsFailed) and fake_provider.batches.created == 2


@pytest.mark.parametrize("protocol,dialect", PROTOCOLS)
def test_errored_items_resubmitted_once(project, fake_provider, tmp_path, protocol, dialect):
    _prepared(project, fake_provider, protocol, dialect)
    batch = _batch(project, tmp_path)
    questions = project.records("questions")
    bad = {questions[0]["id"], questions[1]["id"]}
    fake_provider.batches.fail_items(lambda custom_id, body: custom_id.split("-", 1)[1] in bad, status=500,
                                     message="The server had an error.")
    assert batch.stage("answers")[2] is None
    texts, datas, err = batch.stage("answers")  # 4 answers in; the 2 errored ones sent again
    assert err is None, texts
    assert datas[0]["done"] + datas[0]["excluded"] == 4 and datas[0]["submitted"] == 2, texts
    assert fake_provider.batches.created == 2
    texts, datas, err = batch.stage("answers")  # they error again: failed, named
    assert isinstance(err, ItemsFailed), texts
    assert all(i in texts[0] for i in bad) and fake_provider.batches.created == 2
    assert len(batch.records("answers")) == 4


def test_cap_reserved_at_submission(project, fake_provider, tmp_path):
    _prepared(project, fake_provider)
    # One answer's bound at the batch price: (prompt bytes + 256) × $2/M + 16384 × $8/M, halved ≈ $0.066.
    batch = _batch(project, tmp_path, max_cost_usd=0.2)
    texts, datas, err = batch.stage("answers")
    assert err is None, texts
    assert datas[0]["submitted"] == 3 and datas[0]["capped"] == 3, texts
    assert "3 not submitted: spend cap" in texts[0]
    (sub,) = _journal(batch)
    assert len(sub["items"]) == 3 and 0 < sub["reserved_usd"] <= 0.2
    texts, datas, err = batch.stage("answers")  # collects 3, reserves for the other 3
    assert err is None and datas[0]["submitted"] == 3 and len(batch.records("answers")) == 3


def test_batch_requests_are_the_online_bodies(project, fake_provider, tmp_path):
    """The fake refuses any field its reference lacks; each request kind the client sends is
    sent here (upload, create, retrieve, file content), and every batch request's body is the body
    the online request of the same question had."""
    _prepared(project, fake_provider)
    batch = _batch(project, tmp_path)
    fake_provider.clear()
    assert project.stage("answers")[2] is None
    online = sorted(json.dumps(r.body, sort_keys=True) for r in fake_provider.requests
                    if r.path == "/chat/completions")
    assert batch.stage("answers")[2] is None and batch.stage("answers")[2] is None
    (b,) = fake_provider.batches.all()
    assert sorted(json.dumps(i.body, sort_keys=True) for i in b.items) == online
    assert fake_provider.batches.invalid == []
    kinds = {(r.method, r.path.split("/")[1]) for r in fake_provider.requests}
    assert {("POST", "files"), ("POST", "batches"), ("GET", "batches"), ("GET", "files")} <= kinds


def test_anthropic_recovery_tells_its_batch_from_another_by_the_results(project, fake_provider, tmp_path):
    """A crash left a submission `submitting` (its batch sent, its id not recorded); another
    batch of as many requests was created since (another project on the account): once both have
    ended, the one whose results carry this submission's custom_ids is adopted."""
    import requests

    _prepared(project, fake_provider, "anthropic", None)
    batch = _batch(project, tmp_path)
    fake_provider.batches.auto_finish_after = None
    assert batch.stage("answers")[2] is None
    path = next((batch.dir / ".overbrainer" / "batches").glob("*.json"))
    doc = json.loads(path.read_text())
    ours = doc["batch_id"]
    path.write_text(json.dumps({**doc, "state": "submitting", "batch_id": None, "status": None}))
    other = {"requests": [{"custom_id": f"other-{i}", "params": {"model": "claude-sonnet-4-5", "max_tokens": 16,
                                                                   "messages": [{"role": "user", "content": "hi"}]}}
                          for i in range(6)]}
    r = requests.post(f"{fake_provider.url}/messages/batches", json=other, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200, r.text
    texts, datas, err = batch.stage("answers")  # both in progress: neither is adopted, nothing sent again
    assert err is None and datas[0]["unsettled"] == 1 and fake_provider.batches.created == 2
    fake_provider.batches.finish()
    texts, datas, err = batch.stage("answers")  # ended: ours is told apart by its results
    assert err is None, texts
    assert json.loads(path.read_text())["batch_id"] == ours
    texts, datas, err = batch.stage("answers")
    assert err is None and len(batch.records("answers")) == 6 and fake_provider.batches.created == 2


@pytest.mark.parametrize("ended", [True, False], ids=["its batch ended", "its batch in progress"])
def test_anthropic_recovery_never_adopts_another_projects_batch_of_the_same_questions(project, fake_provider, tmp_path,
                                                                                      ended):
    """A copy of the project (another model) sent the same questions as a batch of the same size;
    then this project's command died after recording its submission, before its batch was created
    (here the create is refused: the same state on disk). The copy's batch is the only one that
    fits by time and size, yet it is not this submission's: while it runs nothing is adopted and
    nothing sent again; once it has ended, its results (custom_ids with the copy's submission tag)
    tell it apart: the submission is `lost`, its questions are sent anew and answered by this
    project's model."""
    model = _prepared(project, fake_provider, "anthropic", None)
    copy = _batch(project, tmp_path, "copy")
    toml = copy.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace(model, "claude-opus-4-1"))
    fake_provider.models["claude-opus-4-1"] = (15.0, 75.0)
    fake_provider.batches.auto_finish_after = None if not ended else 1
    assert copy.stage("answers")[2] is None
    (foreign,) = fake_provider.batches.all("anthropic")
    if ended:
        assert copy.stage("answers")[2] is None and len(copy.records("answers")) == 6
    batch = _batch(project, tmp_path)
    fake_provider.batches.fault("/messages/batches", Fault(400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "refused here"}}), method="POST")
    texts, _, err = batch.stage("answers")
    assert err is not None, texts
    (sub,) = _journal(batch)
    assert sub["state"] == "submitting" and sub["batch_id"] is None and fake_provider.batches.created == 1
    if not ended:
        texts, datas, err = batch.stage("answers")  # the copy's batch runs: it cannot be told apart yet
        assert err is None and datas[0]["unsettled"] == 1 and datas[0]["submitted"] == 0, texts
        assert _journal(batch)[0]["state"] == "submitting" and fake_provider.batches.created == 1
        fake_provider.batches.finish()
    texts, datas, err = batch.stage("answers")
    assert err is None and datas[0]["unsettled"] == 0, texts
    first, second = _journal(batch)
    assert first["state"] == "lost" and first["batch_id"] is None, first
    assert second["batch_id"] != foreign.id and datas[0]["submitted"] == 6 and fake_provider.batches.created == 2
    fake_provider.batches.auto_finish_after = 1
    texts, datas, err = batch.stage("answers")
    assert err is None and len(batch.records("answers")) == 6, texts
    ours = fake_provider.batches.get(second["batch_id"])
    assert {i.body["model"] for i in ours.items} == {model}
    assert {i.body["model"] for i in foreign.items} == {"claude-opus-4-1"}


def test_a_cap_that_leaves_nothing_to_submit_stops(project, fake_provider, tmp_path):
    _prepared(project, fake_provider)
    batch = _batch(project, tmp_path, max_cost_usd=0.01)  # less than one answer's bound
    texts, datas, err = batch.stage("answers")
    assert err is not None and "spend cap reached" in str(err), texts
    assert datas[0]["capped"] == 6 and fake_provider.batches.created == 0 and fake_provider.files.created == 0


def test_online_refuses_while_batches_are_out(project, fake_provider, tmp_path):
    _prepared(project, fake_provider)
    batch = _batch(project, tmp_path)
    assert batch.stage("answers")[2] is None
    toml = batch.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace('mode = "batch"', 'mode = "online"'))
    fake_provider.clear()
    texts, datas, err = batch.stage("answers")
    assert err is not None and err.exit_code == 2 and "still out" in str(err), texts
    assert fake_provider.count == 0


def test_a_topic_call_collects_every_topic_it_finds_ended(project, fake_provider, tmp_path):
    project.write(topics=2, subtopics=1, questions=2, protocol="openai", dialect="openai", parent_model=PARENT,
                  generator_model=PARENT, pipeline={"concurrency": 1, "mode": "batch"})
    assert project.stage("questions")[2] is None
    assert project.stage("answers", topic="topic0")[2] is None  # topic0's questions go out
    texts, datas, err = project.stage("answers", topic="topic1")  # collects them, sends topic1's
    assert err is None, texts
    assert {a["topic"] for a in project.records("answers")} == {"topic0"} and datas[0]["submitted"] == 2
    assert project.stage("answers", topic="topic1")[2] is None
    assert len(project.records("answers")) == 4 and fake_provider.batches.created == 2


def test_wait_under_a_cap_frees_each_bound_as_its_batch_is_collected(project, fake_provider, tmp_path, monkeypatch):
    _prepared(project, fake_provider)
    monkeypatch.setattr(answers_batch, "POLL_FIRST", 0.05)  # the looks, not their pace, are under test
    batch = _batch(project, tmp_path, max_cost_usd=0.2)  # 3 bounds at a time
    fake_provider.batches.auto_finish_after = 2
    texts, datas, err = batch.stage("answers", wait=True)
    assert err is None, texts
    assert len(batch.records("answers")) == 6 and fake_provider.batches.created == 2
    assert datas[0]["pending"] == 0 and datas[0]["submitted"] == 6 and datas[0]["cost"] < 0.2


def test_a_batch_that_failed_validation_is_resubmitted_once(project, fake_provider, tmp_path):
    _prepared(project, fake_provider)
    batch = _batch(project, tmp_path)
    fake_provider.batches.fail_validation("invalid_request", "The batch failed validation.")
    assert batch.stage("answers")[2] is None
    texts, datas, err = batch.stage("answers")  # failed: its items go out once more
    assert err is None and datas[0]["submitted"] == 6, texts
    first = _journal(batch)[0]
    assert first["status"] == "failed" and set(first["errors"].values()) == {"no result (batch failed: The batch failed validation.)"}
    texts, datas, err = batch.stage("answers")
    assert err is None and len(batch.records("answers")) == 6 and fake_provider.batches.created == 2
