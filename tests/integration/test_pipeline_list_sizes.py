"""A list request never asks for more items than fit the generator's max_tokens
(ask_list.items_per_request): subtopics split a topic's missing count over several requests,
questions cap their batches; in-process against the fake provider."""

from __future__ import annotations

import itertools
import json
import logging
import re

from overbrainer.pipeline.ask_list import items_per_request, request_counts
from tests.fixtures.provider import Answer, Fault

COUNT = re.compile(r"JSON array of (\d+) strings")


def _asked(fake_provider, kind: str) -> list[int]:
    """The count each list request of `kind` ("subtopics" / "questions") asked for, in order."""
    marker = "List " if kind == "subtopics" else "Write "
    return [int(COUNT.search(r.prompt).group(1)) for r in fake_provider.chat_requests() if marker in r.prompt]


def _fresh_names(prefix: str = "Name"):
    """A responder giving each request as many names as it asks for, never given before."""
    serial = itertools.count()

    def responder(req):
        n = int(COUNT.search(req.prompt).group(1))
        return Answer(content=json.dumps([f"{prefix} {next(serial)} of the list" for _ in range(n)]))

    return responder


def test_items_per_request_and_request_counts():
    assert items_per_request(16384) == 256 and items_per_request(None) == 256  # the client's default
    assert items_per_request(256) == 4 and items_per_request(100) == 1 and items_per_request(1) == 1
    assert request_counts(10, 4) == [4, 4, 2] and request_counts(8, 4) == [4, 4] and request_counts(3, 4) == [3]
    assert request_counts(0, 4) == [] and request_counts(5, 0) == [1, 1, 1, 1, 1]


def test_subtopics_split_a_large_count_over_several_requests(project, fake_provider):
    # max_tokens 256: 4 names a request; 10 missing: requests of 4, 4 and 2, all of one topic.
    project.write(topics=2, subtopics=10, generator={"max_tokens": 256}, pipeline={"concurrency": 2})
    fake_provider.responder = _fresh_names()
    texts, datas, err = project.stage("subtopics")
    assert err is None
    assert sorted(_asked(fake_provider, "subtopics")) == [2, 2, 4, 4, 4, 4]
    assert {r.body["max_tokens"] for r in fake_provider.chat_requests()} == {256}
    for topic in project.topic_names:
        names = [s["name"] for s in project.records("subtopics") if s["topic"] == topic]
        assert len(names) == len(set(names)) == 10
    # Still one item a topic: 2 done, 20 written.
    assert texts[0].startswith("subtopics: 2 topics, 20 subtopics written; 0 skipped, 0 failed;")
    assert (datas[0]["total"], datas[0]["done"], datas[0]["written"]) == (2, 2, 20)
    assert [(h["done"], h["failed"]) for h in project.history()] == [(2, 0)]
    # Nothing missing: a rerun sends nothing.
    fake_provider.clear()
    texts, _, err = project.stage("subtopics")
    assert err is None and fake_provider.chat_requests() == [] and "2 skipped" in texts[0]


def test_subtopics_requests_of_one_topic_drop_repeats_and_keep_at_most_their_count(project, fake_provider, caplog):
    project.write(topics=1, subtopics=6, generator={"max_tokens": 256}, pipeline={"concurrency": 1})
    fake_provider.script(
        Answer(content=json.dumps(["Alpha", "Beta", "Gamma", "Delta", "Epsilon"])),  # 4 asked: 4 kept
        Answer(content=json.dumps(["alpha", "Zeta", "Eta"])),  # 2 asked: alpha repeats Alpha
    )
    with caplog.at_level(logging.INFO, logger="overbrainer.pipeline"):
        texts, _, err = project.stage("subtopics")
    assert err is None and _asked(fake_provider, "subtopics") == [4, 2]
    assert [s["name"] for s in project.records("subtopics")] == ["Alpha", "Beta", "Gamma", "Delta", "Zeta", "Eta"]
    assert "6 subtopics written" in texts[0]
    # A request that adds fewer: the topic is still done, and a rerun asks for the rest.
    fake_provider.clear()
    project.write(topics=1, subtopics=9, generator={"max_tokens": 256}, pipeline={"concurrency": 1})
    fake_provider.script(Answer(content=json.dumps(["Beta", "Theta"])))
    with caplog.at_level(logging.INFO, logger="overbrainer.pipeline"):
        texts, _, err = project.stage("subtopics")
    assert err is None and _asked(fake_provider, "subtopics") == [3]
    assert "topic0: 1 of 3 new subtopics; a rerun asks for the rest" in caplog.text
    assert texts[0].startswith("subtopics: 1 topic, 1 subtopic written; 0 skipped, 0 failed")


def test_a_failed_request_fails_its_topic_once_and_the_topic_sends_no_more(project, fake_provider):
    # One request at a time: topic0's second request fails (no list, no retry); its third is
    # not sent; topic1 is filled.
    project.write(topics=2, subtopics=10, generator={"max_tokens": 256},
                  pipeline={"concurrency": 1, "max_retries": 0})
    fresh = _fresh_names()
    calls = itertools.count()
    fake_provider.responder = lambda req: Answer(content="nope") if next(calls) == 1 else fresh(req)
    texts, datas, err = project.stage("subtopics")
    assert type(err).__name__ == "ItemsFailed"
    assert _asked(fake_provider, "subtopics") == [4, 4, 4, 4, 2]
    assert (datas[0]["done"], datas[0]["failed"], datas[0]["written"]) == (1, 1, 14)
    assert [(h["done"], h["failed"]) for h in project.history()] == [(1, 1)]
    # The rerun asks topic0 for its 6 missing names: 4, then 2.
    fake_provider.clear()
    fake_provider.responder = _fresh_names("Rerun")
    texts, _, err = project.stage("subtopics")
    assert err is None and _asked(fake_provider, "subtopics") == [4, 2]
    assert len(project.records("subtopics")) == 20


def test_a_fatal_error_fails_the_topic_once_and_its_later_requests_are_not_sent(project, fake_provider):
    # A topic's requests go one after another (each prompt lists what the earlier ones added):
    # the first meets a fatal error, the other two are never sent.
    project.write(topics=1, subtopics=10, generator={"max_tokens": 256}, pipeline={"concurrency": 3})
    fake_provider.responder = lambda req: Fault.not_found()
    texts, datas, err = project.stage("subtopics")
    assert type(err).__name__ == "LlmError" and err.fatal
    assert _asked(fake_provider, "subtopics") == [4]
    assert (datas[0]["total"], datas[0]["done"], datas[0]["failed"]) == (1, 0, 1)
    assert texts[0].startswith("subtopics: stopped after 1 of 1 topics: HTTP 404: model not found;")
    assert project.history()[-1]["failed"] == 1


def test_a_split_topic_asks_in_order_each_prompt_listing_the_names_so_far(project, fake_provider):
    # 10 missing at 4 a request, two topics in parallel: each topic's prompts differ, and each
    # lists the names its earlier requests added.
    project.write(topics=2, subtopics=10, generator={"max_tokens": 256}, pipeline={"concurrency": 2})
    fake_provider.responder = _fresh_names()
    texts, _, err = project.stage("subtopics")
    assert err is None
    for topic in project.topic_names:
        prompts = [r.prompt for r in fake_provider.chat_requests() if f'topic "{topic}"' in r.prompt]
        assert len(prompts) == len(set(prompts)) == 3
        names = [s["name"] for s in project.records("subtopics") if s["topic"] == topic]
        assert "already exist" not in prompts[0]
        assert all(f"- {n}\n" in prompts[1] for n in names[:4]) and f"- {names[4]}\n" not in prompts[1]
        assert all(f"- {n}\n" in prompts[2] for n in names[:8])


def test_questions_batches_never_ask_for_more_than_fits_max_tokens(project, fake_provider):
    # question_batch_size 10 but max_tokens 256 (4 items a request): batches of 4, 4 and 2.
    project.write(topics=1, subtopics=2, questions=10, generator={"max_tokens": 256},
                  pipeline={"question_batch_size": 10, "concurrency": 1})
    texts, _, err = project.stage("questions")
    assert err is None
    assert _asked(fake_provider, "subtopics") == [2]
    assert _asked(fake_provider, "questions") == [4, 4, 2, 4, 4, 2]
    assert len(project.records("questions")) == 20
    # A smaller question_batch_size is still the batch.
    fake_provider.clear()
    project.write(topics=1, subtopics=2, questions=13, generator={"max_tokens": 256},
                  pipeline={"question_batch_size": 3, "concurrency": 1})
    texts, _, err = project.stage("questions")
    assert err is None and _asked(fake_provider, "questions") == [3, 3]
    assert len(project.records("questions")) == 26
