"""The questions stage's deduplicators (pipeline/topic_dedups.py): one per topic, made by its first
subtopic (seeded from the stored questions at their offsets, and the rejected ones), shared by
its subtopics, dropped with its last; a seeding failure fails every subtopic of the topic with
one request to the embedder."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import pytest

from overbrainer.dataset.ids import question_id
from overbrainer.dataset.jsonl import Appender, iter_records
from overbrainer.dataset.records import Question, Rejected
from overbrainer.pipeline.topic_dedups import TopicDedup, TopicDedups


@dataclass
class Topic:
    name: str


@dataclass
class Sub:
    id: str


@dataclass
class Job:
    topic: Topic
    subtopic: Sub
    have: int = 0
    accepted: list = field(default_factory=list)


def _questions(tmp_path):
    path = tmp_path / "questions.jsonl"
    records = [Question(question_id(f"s{t}", f"what is thing {i} of {t}?"), t, f"s{t}", "sub",
                        f"what is thing {i} of {t}?") for t in ("a", "b") for i in range(3)]
    with Appender(path) as out:
        out.append_all(records)
    offsets: dict[str, array] = {"a": array("Q"), "b": array("Q")}
    for offset, q in iter_records(path, Question, offsets=True):
        offsets[q.topic].append(offset)
    return path, offsets


def test_a_topic_is_seeded_once_shared_by_its_subtopics_and_dropped_with_the_last(tmp_path):
    path, offsets = _questions(tmp_path)
    made = []

    def make(name):
        made.append(name)
        return TopicDedup(name, 0.8)

    jobs = [Job(Topic("a"), Sub("sa"), have=3), Job(Topic("a"), Sub("new")), Job(Topic("b"), Sub("sb"))]
    rejected = {"a": [Rejected("question", "r" * 32, "a", subtopic_id="sa", text="a rejected question here")]}
    dedups = TopicDedups(path, jobs, offsets, rejected, make)
    first = dedups.acquire(jobs[0])
    assert jobs[0].accepted == [f"what is thing {i} of a?" for i in range(3)]  # the prompt lists them
    assert dedups.acquire(jobs[1]) is first and made == ["a"] and dedups.alive() == 1
    assert first.dedup.filter(["What is thing 1 of a?", "a rejected question here", "brand new one"]) == [
        "brand new one"]
    assert len(first.known) == 4
    dedups.release(jobs[0])
    assert dedups.alive() == 1
    dedups.release(jobs[1])
    assert dedups.alive() == 0  # topic a is done: its deduplicator is gone
    dedups.acquire(jobs[2])
    assert made == ["a", "b"] and dedups.alive() == 1


def test_a_seeding_failure_fails_every_subtopic_of_the_topic_with_one_request(tmp_path):
    path, offsets = _questions(tmp_path)
    calls = []

    def embed(texts):
        calls.append(len(texts))
        raise RuntimeError("embedder down")

    jobs = [Job(Topic("a"), Sub("x")), Job(Topic("a"), Sub("y"))]
    dedups = TopicDedups(path, jobs, offsets, {}, lambda name: TopicDedup(name, 0.8, embed, 0.9))
    for job in jobs:
        with pytest.raises(RuntimeError, match="embedder down"):
            dedups.acquire(job)
        dedups.release(job)
    assert calls == [3] and dedups.alive() == 0
