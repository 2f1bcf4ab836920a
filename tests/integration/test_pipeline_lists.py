"""subtopics and questions in-process against the fake provider: list parsing, re-asks, token
limit growth, structured-output fallback, rejected items, --force, dedup (lexical, embeddings,
serialized across parallel subtopics), the auto-subtopics pre-step, fatal errors."""

from __future__ import annotations

import json
import logging

from overbrainer.dataset.ids import subtopic_id
from tests.fixtures.provider import Answer, Fault


def _names(project, topic):
    return [s["name"] for s in project.records("subtopics") if s["topic"] == topic]


def test_subtopics_lenient_lists_reasks_and_token_growth(project, fake_provider):
    # One topic at a time, so the scripted answers go to the topics in order; max_tokens 128 lets
    # one request ask for 2 names (ask_list.ITEM_TOKENS).
    project.write(topics=2, subtopics=2, generator={"max_tokens": 128}, pipeline={"concurrency": 1})
    fake_provider.script(
        Answer(content="Sure! Here are [2] subtopics:\n1. Alpha\n2) Beta"),   # topic0: bullets
        Answer(content="I cannot help with that."),                           # topic1: not a list
        Answer(content='["Gam', finish="length"),                             # cut short
        Answer(content='{"items": ["Gamma", "Delta", "Epsilon"]}'),
    )
    texts, datas, err = project.stage("subtopics")
    assert err is None
    assert _names(project, "topic0") == ["Alpha", "Beta"]
    assert _names(project, "topic1") == ["Gamma", "Delta"]  # at most `missing` kept
    limits = [r.body["max_tokens"] for r in fake_provider.chat_requests()]
    assert limits == [128, 128, 128, 256]
    # An answer that is not JSON at all refuses structured output: plain lists from then on.
    assert ["response_format" in r.body for r in fake_provider.chat_requests()] == [True, True, False, False]
    # Tokens of every attempt count: 4 answers of (10, 20).
    assert texts == ["subtopics: 2 topics, 4 subtopics written; 0 skipped, 0 failed; tokens 40 in, 80 out; "
                     "cost unknown"]
    assert datas[0] == {"stage": "subtopics", "unit": "topics", "records": "subtopics", "total": 2,
                        "done": 2, "skipped": 0, "failed": 0, "excluded": 0, "written": 4,
                        "stopped": False, "interrupted": False,
                        "input_tokens": 40, "output_tokens": 80, "cost": None}
    assert project.records("subtopics")[0]["id"] == subtopic_id("topic0", "alpha")


def test_subtopics_run_topics_concurrently(project, fake_provider):
    # Every answer waits until `concurrency` (3) requests are in the server at once: topics asked
    # one at a time would break the barrier (and fail) instead.
    import threading

    project.write(topics=4, subtopics=2, pipeline={"concurrency": 3})
    barrier = threading.Barrier(3, timeout=10)

    def responder(req):
        if len(fake_provider.chat_requests()) <= 3:
            barrier.wait()
        return None

    fake_provider.responder = responder
    texts, _, err = project.stage("subtopics")
    assert err is None
    assert fake_provider.max_in_flight == 3
    assert sorted({s["topic"] for s in project.records("subtopics")}) == project.topic_names
    assert len(project.records("subtopics")) == 8


def test_subtopics_no_list_after_all_retries_fails_the_item(project, fake_provider):
    project.write(topics=2, subtopics=1, pipeline={"max_retries": 1, "concurrency": 1})
    fake_provider.script(Answer(content="nope"), Answer(content="[1, 2]"))
    texts, _, err = project.stage("subtopics")
    assert type(err).__name__ == "ItemsFailed"
    assert str(err) == "1 subtopics item(s) failed; run the command again to retry them"
    assert texts[0].startswith("subtopics: 1 topic, 1 subtopic written; 0 skipped, 1 failed;")
    assert [h["status"] for h in project.history()] == ["failed"]
    # A rerun asks only for what is missing.
    fake_provider.clear()
    texts, _, err = project.stage("subtopics")
    assert err is None and texts[0].startswith("subtopics: 1 topic, 1 subtopic written; 1 skipped, 0 failed")
    # The worker may have taken the next subtopic before the error was seen; no more than that.
    assert len(project.records("questions")) <= 3


def test_subtopics_structured_output_fallback(project, fake_provider):
    project.write(topics=1, subtopics=2)
    fake_provider.script(Fault.bad_request("response_format is not supported"))
    texts, _, err = project.stage("subtopics")
    assert err is None
    bodies = [r.body for r in fake_provider.chat_requests()]
    assert "response_format" in bodies[0] and "response_format" not in bodies[1]
    assert len(_names(project, "topic0")) == 2


def test_subtopics_rejected_are_never_regenerated_even_with_force(project, fake_provider):
    project.write(topics=2, subtopics=2)
    fake_provider.responder = lambda req: Answer(content=json.dumps(["Alpha", "Beta", "Gamma"]))
    assert project.stage("subtopics")[2] is None
    assert _names(project, "topic0") == ["Alpha", "Beta"]
    from overbrainer.dataset.reject import reject

    reject(project.dir, subtopic_id("topic0", "Alpha"))
    texts, _, err = project.stage("subtopics")
    assert err is None and _names(project, "topic0") == ["Beta", "Gamma"]
    assert texts[0].startswith("subtopics: 1 topic, 1 subtopic written; 1 skipped")
    texts, _, err = project.stage("subtopics", topic="topic0", force=True)
    assert err is None
    assert _names(project, "topic0") == ["Beta", "Gamma"]
    assert _names(project, "topic1") == ["Alpha", "Beta"]  # --topic: the other topic untouched
    assert [r["kind"] for r in project.records("rejected")] == ["subtopic"]


def test_unknown_topic_fails_before_anything(project, fake_provider):
    _, _, err = project.stage("answers", topic="nope")
    assert str(err) == "unknown topic `nope` (topics: topic0, topic1)"
    assert fake_provider.count == 0 and project.history() == []


def test_questions_prestep_and_dedup_serialized_across_parallel_subtopics(project, fake_provider, caplog):
    project.write(topics=1, subtopics=3, questions=3, pipeline={"concurrency": 4, "max_retries": 2})
    same = ["How does borrowing work?", "Why is the sky blue today?", "What breaks when caches go stale?"]

    def responder(req):
        if "questions for a training dataset" in req.prompt:
            return Answer(content=json.dumps(same), delay=0.02)
        return None

    fake_provider.responder = responder
    with caplog.at_level(logging.WARNING):
        texts, _, err = project.stage("questions")
    assert [t.split(":")[0] for t in texts] == ["subtopics", "questions"]
    stored = [q["text"] for q in project.records("questions")]
    assert sorted(stored) == sorted(same)  # each accepted once in the topic, whatever subtopic asked
    assert texts[1].startswith("questions: 3 subtopics, 3 questions written; 0 skipped, 0 failed")
    assert "the generator kept repeating itself" in caplog.text
    assert [h["stage"] for h in project.history()] == ["subtopics", "questions"]
    # The two subtopics that stalled are named, exit 1; they are held back by the next run.
    assert type(err).__name__ == "ItemsFailed" and str(err).startswith("no new items at the last try: questions of")
    assert texts[1].count("(topic0)") == 2 and "2 subtopics added no new questions" in texts[1]
    fake_provider.clear()
    texts, _, err = project.stage("questions")
    assert err is None and fake_provider.chat_requests() == []
    assert texts[0].startswith("questions: 0 subtopics, 0 questions written; 1 skipped, 0 failed")
    assert "; 2 subtopic(s) held back: no new items at the last try (" in texts[0]


def test_the_questions_a_prompt_lists_are_bounded_as_the_subtopics_are(project, fake_provider, cli):
    """A subtopic of 450 questions asked 150 at a time: each prompt lists the subtopic's questions
    so far, but only the latest of them, at most 200 and 16,000 bytes (subtopics.existing_names)."""
    from overbrainer.pipeline.subtopics import EXISTING_BYTES, EXISTING_NAMES
    from tests.fixtures.provider_text import realistic

    project.write(topics=1, subtopics=1, questions=450, pipeline={"question_batch_size": 150})
    fake_provider.responder = realistic  # distinct questions of 60-160 characters
    r = cli(["-C", project.dir, "questions"], env=project.env)
    assert r.returncode == 0, r.stderr
    stored = [q["text"] for q in project.records("questions")]
    assert len(stored) == 450
    prompts = [req.prompt for req in fake_provider.chat_requests() if 'subtopic "' in req.prompt]
    assert len(prompts) == 3
    listed = [[line[2:] for line in p.splitlines() if line.startswith("- ")] for p in prompts]
    assert listed[0] == [] and 0 < len(listed[1]) <= 150 and 0 < len(listed[2]) <= EXISTING_NAMES
    for i, texts in enumerate(listed[1:], 1):
        assert texts == stored[150 * i - len(texts):150 * i]  # the latest ones, oldest first
        assert sum(len(t.encode()) + 3 for t in texts) <= EXISTING_BYTES


def test_questions_lexical_then_embedding_dedup_with_rejected_seed(project, fake_provider, caplog):
    project.write(topics=1, subtopics=1, questions=3, embedder=True, pipeline={"max_retries": 2})
    project.stage("subtopics")
    sub = project.records("subtopics")[0]
    rejected = {"kind": "question", "id": "0" * 32, "topic": "topic0", "subtopic_id": sub["id"],
                "text": "How does X work?"}
    (project.data / "rejected.jsonl").write_text(json.dumps(rejected) + "\n")
    fake_provider.responder = lambda req: Answer(content=json.dumps(
        ["how does x  work", "Alpha beta gamma delta?", "Epsilon zeta eta theta?"]))

    def vectors(*vs):
        return {"data": [{"index": i, "embedding": v} for i, v in enumerate(vs)]}

    fake_provider.script_embeddings(
        vectors([1.0, 0.0, 0.0]),                      # seed: the rejected question
        vectors([0.0, 1.0, 0.0], [0.0, 1.0, 0.0]),     # batch 1: the third means the second
    )   # batches 2 and 3 (2 candidates each) are lexical copies: nothing more is embedded
    with caplog.at_level(logging.DEBUG, logger="overbrainer.pipeline"):
        texts, _, err = project.stage("questions")
    assert str(err).startswith("no new items at the last try: questions of `")  # batches 2 and 3 stalled
    assert [q["text"] for q in project.records("questions")] == ["Alpha beta gamma delta?"]
    assert len(fake_provider.embedding_requests()) == 2
    assert "a near-copy of 'How does X work?'" in caplog.text
    assert "too close in meaning to 'Alpha beta gamma delta?'" in caplog.text


def test_questions_fatal_error_stops_the_stage(project, fake_provider):
    project.write(topics=1, subtopics=2, questions=3, pipeline={"concurrency": 1})
    project.stage("subtopics")
    fake_provider.clear()
    fake_provider.script(Fault.not_found())
    texts, _, err = project.stage("questions")
    assert type(err).__name__ == "LlmError" and err.fatal
    assert texts[0].startswith("questions: stopped after 1 of 2 subtopics: HTTP 404: model not found; "
                               "0 questions written; 0 skipped, 1 failed; tokens 0 in, 0 out; cost $0")
    assert project.history()[-1]["status"] == "failed" and project.history()[-1]["failed"] == 1
    # The worker that met the error takes no other subtopic.
    assert project.records("questions") == [] and len(fake_provider.chat_requests()) == 1
