"""Batch mode at OpenAI's batch queue limit (the input tokens a model's batches in progress may
hold): submissions sized to the room the queue leaves, what does not fit left for a later call,
the limit learned from a batch the provider refused (tests/fixtures/batch_state.py enforces it
as the reference describes)."""

from __future__ import annotations

import json

from tests.integration.test_batch_answers import _batch, _journal, _prepared


def _per_request(project, fake_provider, tmp_path) -> float:
    """The input tokens the client estimates for one of the 6 requests (a first project's batch)."""
    probe = _batch(project, tmp_path, "probe")
    assert probe.stage("answers")[2] is None
    (sub,) = _journal(probe)
    fake_provider.batches.finish()  # it holds no room in the queue any more
    return sub["input_tokens"] / len(sub["items"])


def _run_until_done(batch, fake_provider, calls=8):
    for _ in range(calls):
        fake_provider.batches.finish()
        texts, datas, err = batch.stage("answers")
        assert err is None, texts
        if datas[0]["pending"] == 0 and len(batch.records("answers")) == 6:
            return
    raise AssertionError("not every question was answered")


def test_a_configured_queue_limit_splits_the_submissions_before_the_provider_refuses(project, fake_provider,
                                                                                      tmp_path):
    _prepared(project, fake_provider)
    per = _per_request(project, fake_provider, tmp_path)
    limit = int(per * 2.5)  # two requests at a time
    fake_provider.batches.queue_tokens = limit
    fake_provider.batches.auto_finish_after = None
    batch = _batch(project, tmp_path)
    batch.env["OVERBRAINER_PROVIDERS__FAKE__BATCH_QUEUE_TOKENS"] = str(limit)
    texts, datas, err = batch.stage("answers")
    assert err is None, texts
    assert "2 question(s) submitted" in texts[0], texts
    assert f"4 not submitted yet: the batch queue of deepseek/deepseek-r1 is full ({limit:,} enqueued tokens)" \
        in texts[0]
    assert datas[0]["queued"] == 4
    _run_until_done(batch, fake_provider)
    assert all(b.status != "failed" for b in fake_provider.batches.all())  # none was refused
    subs = _journal(batch)
    assert len(subs) == 3 and all(s["input_tokens"] <= limit for s in subs)


def test_the_limit_a_refused_batch_states_is_learned_and_its_items_sent_again(project, fake_provider, tmp_path):
    _prepared(project, fake_provider)
    per = _per_request(project, fake_provider, tmp_path)
    limit = int(per * 2.5)
    fake_provider.batches.queue_tokens = limit
    batch = _batch(project, tmp_path)
    texts, _, err = batch.stage("answers")  # all 6 in one batch: the provider refuses it whole
    assert err is None and "6 question(s) submitted" in texts[0], texts
    (refused,) = fake_provider.batches.all()[:1]
    fake_provider.batches.polled(refused)
    assert refused.status == "failed" and refused.errors[0]["code"] == "token_limit_exceeded"
    fake_provider.batches.auto_finish_after = None
    texts, datas, err = batch.stage("answers")  # collects the refusal, learns, sends what fits
    assert err is None, texts
    first = _journal(batch)[0]
    assert first["queue_full"] is True and len(first["unresolved"]) == 6
    recorded = json.loads((batch.dir / ".overbrainer" / "rate_limits.json").read_text())
    assert recorded["providers"]["fake"]["deepseek/deepseek-r1"]["batch_queue_tokens"] == limit
    assert datas[0]["submitted"] == 2 and datas[0]["queued"] == 4, texts
    _run_until_done(batch, fake_provider)
    # The refused batch was no failure of its questions: all six answered, none given up on.
    assert [b.status for b in fake_provider.batches.all()].count("failed") == 1
    assert "no answer from two batches" not in " ".join(texts)
