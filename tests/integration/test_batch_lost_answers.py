"""A batch create whose answer is lost after the provider applied it (the connection cut, a
gateway's 502, no answer until the client's timeout) is never sent again blindly: OpenAI's is
found at once by its metadata, Anthropic's stays `submitting` until a later call proves which
batch is its own. On both APIs: one batch, every question answered once, no paid item twice
(docs/retries.md)."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.provider import Fault, Raw

MODEL = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-4-5"}
CREATE = {"openai": "/batches", "anthropic": "/messages/batches"}
TIMEOUT = 1  # [pipeline] request_timeout_secs: the "timeout" fault answers after it
LOST = {
    "dropped": lambda: Raw.dropped(),
    "502": lambda: Fault(502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", {"Content-Type": "text/html"}),
    "timeout": lambda: Raw(b"", delay=TIMEOUT + 1, drop=True),
}


def _project(project, fake_provider, protocol):
    model = MODEL[protocol]
    project.write(topics=1, subtopics=2, questions=3, protocol=protocol, dialect="openai" if protocol == "openai" else None,
                  parent_model=model, generator_model=model,
                  pipeline={"mode": "batch", "max_retries": 3, "request_timeout_secs": TIMEOUT})
    fake_provider.models = {model: (2.0, 8.0)}
    return project


def _journal(project):
    return [json.loads(p.read_text()) for p in sorted((project.dir / ".overbrainer" / "batches").glob("*.json"))]


def _paid_items(fake_provider):
    """custom_id → how many batches ran it (what the provider bills)."""
    counts: dict[str, int] = {}
    for batch in fake_provider.batches.all():
        for item in batch.items:
            if item.outcome is not None and item.outcome[0] == "ok":
                counts[item.custom_id] = counts.get(item.custom_id, 0) + 1
    return counts


@pytest.mark.parametrize("lost", sorted(LOST))
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_create_whose_answer_is_lost_is_settled_never_sent_again(project, fake_provider, cli, protocol, lost):
    _project(project, fake_provider, protocol)
    assert project.stage("questions")[2] is None  # in-process: quicker than the CLI
    fake_provider.clear()
    fake_provider.batches.fault(CREATE[protocol], LOST[lost](), method="POST", after=True)
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert fake_provider.batches.created == 1, r.stderr  # applied once, never sent again
    creates = [q for q in fake_provider.requests if q.method == "POST" and q.path == CREATE[protocol]]
    assert len(creates) == 1, r.stderr
    if protocol == "openai":  # found at once by its metadata: the call goes on
        assert r.returncode == 0, r.stderr
        assert "no answer to POST /batches" in r.stderr and "found it on the provider: batch " in r.stderr
        assert [s["state"] for s in _journal(project)] == ["submitted"]
    else:  # no metadata: left for the next call's proof; this call failed (exit 1: try again later)
        assert r.returncode == 1, r.stderr
        assert "no answer to POST /messages/batches" in r.stderr and "stays `submitting`" in r.stderr
        assert r.stderr.strip().endswith("error: answers: the provider's answer to 1 batch create(s) was lost; "
                                         "run the command again: it finds them before sending anything")
        assert [s["state"] for s in _journal(project)] == ["submitting"]
    if lost in ("dropped", "timeout"):
        assert "(the connection closed after the request was sent)" in r.stderr or "timed out" in r.stderr
        assert "cannot connect" not in r.stderr
    # The next call settles it (Anthropic: adopts the batch, ended, on its results' proof) and collects.
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0, r.stderr
    answers = project.records("answers")
    assert len(answers) == 6 and len({a["id"] for a in answers}) == 6
    assert fake_provider.batches.created == 1
    paid = _paid_items(fake_provider)
    assert len(paid) == 6 and set(paid.values()) == {1}  # 0 duplicate paid items
    assert [s["state"] for s in _journal(project)] == ["collected"]


def test_wait_settles_a_lost_anthropic_create_in_the_same_call(project, fake_provider, cli):
    _project(project, fake_provider, "anthropic")
    assert project.stage("questions")[2] is None  # in-process: quicker than the CLI
    fake_provider.batches.fault("/messages/batches", Raw.dropped(), method="POST", after=True)
    r = cli(["-C", project.dir, "answers", "--wait"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert len(project.records("answers")) == 6 and fake_provider.batches.created == 1
    assert set(_paid_items(fake_provider).values()) == {1}


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_create_refused_before_anything_is_done_is_retried(project, fake_provider, cli, protocol):
    """A 429 is refused before anything is done: sent again (after its Retry-After), one batch."""
    _project(project, fake_provider, protocol)
    assert project.stage("questions")[2] is None  # in-process: quicker than the CLI
    fake_provider.batches.fault(CREATE[protocol], Fault.rate_limited(), method="POST")
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert fake_provider.batches.created == 1 and "6 question(s) submitted" in r.stdout
