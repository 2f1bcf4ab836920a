"""The list stages' one writer: `subtopics` and `questions` workers hand each answer's new records
to the keeping thread (the one that runs the stage, support/processor.Processor.hand), which
appends them as they come, those of an item that failed after some answers included."""

from __future__ import annotations

import itertools
import json
import threading

from overbrainer.pipeline.common import Output
from tests.fixtures.provider import Answer, Fault


def _writers(monkeypatch) -> list[str]:
    """The names of the threads that append to a stage's output file."""
    threads: list[str] = []
    append_all = Output.append_all

    def recording(self, records):
        threads.append(threading.current_thread().name)
        return append_all(self, records)

    monkeypatch.setattr(Output, "append_all", recording)
    return threads


def _unique_questions(fake_provider) -> None:
    numbers = itertools.count()

    def responder(req):
        if "questions for a training dataset" in req.prompt:
            return Answer(content=json.dumps([f"Question number {next(numbers)} about things?" for _ in range(2)]),
                          delay=0.01)
        return None

    fake_provider.responder = responder


def test_every_append_is_made_by_the_keeping_thread(project, fake_provider, monkeypatch):
    # 4 subtopics of 6 questions, 2 a request, 3 at a time: batches arrive on worker threads.
    project.write(topics=2, subtopics=2, questions=6, pipeline={"concurrency": 3, "question_batch_size": 2})
    _unique_questions(fake_provider)
    writers = _writers(monkeypatch)
    texts, _, err = project.stage("questions")
    assert err is None, err
    assert len(project.records("subtopics")) == 4 and len(project.records("questions")) == 24
    assert len(writers) == 2 + 12  # one write per answer: 2 of subtopics (one per topic), 12 of questions
    assert set(writers) == {threading.current_thread().name}
    assert texts[1].startswith("questions: 4 subtopics, 24 questions written; 0 skipped, 0 failed")


def test_a_subtopic_stopped_by_a_fatal_error_keeps_its_earlier_batches(project, fake_provider, monkeypatch):
    project.write(topics=1, subtopics=1, questions=6, pipeline={"concurrency": 1, "question_batch_size": 2})
    project.stage("subtopics")
    fake_provider.clear()
    _unique_questions(fake_provider)
    fake_provider.script(Answer(content=json.dumps(["First question here?", "Second question here?"])),
                         Fault.not_found())
    writers = _writers(monkeypatch)
    texts, _, err = project.stage("questions")
    assert type(err).__name__ == "LlmError" and err.fatal
    assert [q["text"] for q in project.records("questions")] == ["First question here?", "Second question here?"]
    assert writers == [threading.current_thread().name]
    assert texts[0].startswith("questions: stopped after 1 of 1 subtopics: HTTP 404: model not found; "
                               "2 questions written;")


def test_a_topic_whose_request_failed_keeps_the_names_it_got(project, fake_provider, monkeypatch):
    # max_tokens 128: 2 names a request; the topic's second request gets no list after its retry.
    project.write(topics=1, subtopics=4, generator={"max_tokens": 128},
                  pipeline={"concurrency": 1, "max_retries": 1})
    fake_provider.script(Answer(content='["Alpha", "Beta"]'), Answer(content="nope"), Answer(content="nope"))
    writers = _writers(monkeypatch)
    texts, _, err = project.stage("subtopics")
    assert type(err).__name__ == "ItemsFailed"
    assert [s["name"] for s in project.records("subtopics")] == ["Alpha", "Beta"]
    assert writers == [threading.current_thread().name]
    assert texts[0].startswith("subtopics: 0 topics, 2 subtopics written; 0 skipped, 1 failed;")
