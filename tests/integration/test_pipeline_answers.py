"""answers in-process against the fake provider: exclusion reasons, hidden reasoning, resume,
--force/--topic, retry storms, item failures, a fatal 401 mid-way, requests kept in flight."""

from __future__ import annotations

import re
import threading
from collections import Counter

from overbrainer.errors import ConfigError
from overbrainer.front.events import ItemFailed
from tests.fixtures.provider import Answer, Fault


class Events:
    def __init__(self):
        self.items = []
        self._lock = threading.Lock()

    def publish(self, ev):
        with self._lock:
            self.items.append(ev)


def _prepare(project, **kw):
    project.write(**kw)
    assert project.stage("questions")[2] is None  # subtopics pre-step, then questions


def test_every_exclusion_reason_and_resume(project, fake_provider):
    _prepare(project, topics=1, subtopics=1, questions=5, reasoning=True, pipeline={"concurrency": 1})
    fake_provider.clear()
    fake_provider.script(
        Answer.truncated("half an ans"),
        Answer.refused(),
        Answer(content="   ", reasoning="thought about it"),
        Answer(content="fine", reasoning="a summary", form="details_summary"),
        Answer(content="good", reasoning="raw thoughts"),
    )
    texts, datas, err = project.stage("answers")
    assert err is None
    answers = project.records("answers")
    reasons = Counter(a["meta"]["excluded"] for a in answers)
    assert reasons == Counter({"truncated": 1, "refused": 1, "empty": 1, "no_raw_reasoning": 1, None: 1})
    by_reason = {a["meta"]["excluded"]: a for a in answers}
    assert by_reason[None]["messages"][-1] == {"role": "assistant", "content": "good",
                                               "reasoning_content": "raw thoughts"}
    assert by_reason["empty"]["messages"][-1]["reasoning_content"] == "thought about it"  # kept for inspection
    assert by_reason["no_raw_reasoning"]["meta"]["reasoning_kind"] == "summary"
    assert [m["role"] for m in by_reason[None]["messages"]] == ["user", "assistant"]
    assert texts == ["answers: 5 questions, 5 answers written (4 excluded from training); 0 skipped, 0 failed; "
                     "tokens 50 in, 100 out; cost unknown"]
    assert datas[0]["excluded"] == 4
    # Resume: an excluded answer counts as answered; nothing is asked again.
    fake_provider.clear()
    texts, _, err = project.stage("answers")
    assert err is None and fake_provider.count == 0
    # Nothing was asked, so nothing was paid: $0, whatever the price the last run did not know.
    assert texts[0] == ("answers: 0 questions, 0 answers written; 5 skipped, 0 failed; tokens 0 in, 0 out; "
                        "cost $0")


def test_hidden_reasoning_parent_and_system_prompt(project, fake_provider, caplog):
    _prepare(project, topics=1, subtopics=1, questions=2, reasoning=True, parent_model="openai/gpt-6",
             pipeline={"include_system_prompt": True})
    sent = fake_provider.count
    texts, _, err = project.stage("answers")
    assert isinstance(err, ConfigError) and "roles.parent.reasoning = false" in str(err)
    assert fake_provider.count == sent and project.records("answers") == []  # refused before sending
    project.write(topics=1, subtopics=1, questions=2, reasoning=False, parent_model="openai/gpt-6",
                  pipeline={"include_system_prompt": True})
    texts, _, err = project.stage("answers")
    assert err is None
    for a in project.records("answers"):
        assert a["meta"]["excluded"] is None
        assert a["messages"][0]["role"] == "system" and "topic0" in a["messages"][0]["content"]
    assert all(r.body["messages"][0]["role"] == "system" for r in fake_provider.chat_requests()[-2:])


def test_force_and_topic(project, fake_provider):
    _prepare(project, topics=2, subtopics=1, questions=2)
    assert project.stage("answers")[2] is None
    before = {a["id"]: a for a in project.records("answers")}
    fake_provider.clear()
    texts, _, err = project.stage("answers", topic="topic0", force=True)
    assert err is None
    assert texts[0].startswith("answers: 2 questions, 2 answers written; 0 skipped")
    prompts = {r.prompt for r in fake_provider.chat_requests()}
    topic0 = {q["text"] for q in project.records("questions") if q["topic"] == "topic0"}
    assert prompts == topic0
    after = project.records("answers")
    assert sorted(a["id"] for a in after) == sorted(before)
    assert all(before[a["id"]] == a for a in after if a["topic"] == "topic1")


def test_retry_storms_then_success_and_a_final_item_failure(project, fake_provider):
    _prepare(project, topics=1, subtopics=2, questions=3, pipeline={"max_retries": 2, "concurrency": 3})
    questions = [q["text"] for q in project.records("questions")]
    doomed = questions[0]
    seen = Counter()
    lock = threading.Lock()

    def responder(req):
        with lock:
            seen[req.prompt] += 1
            n = seen[req.prompt]
        if req.prompt == doomed:
            return Fault(500, {"error": {"message": "upstream exploded"}}, {"Retry-After": "0"})
        if n == 1:
            return Fault.rate_limited(0)
        if n == 2:
            return Fault(503, {"error": {"message": "overloaded"}}, {"Retry-After": "0"})
        return None

    fake_provider.responder = responder
    events = Events()
    texts, _, err = project.stage("answers", bus=events)
    assert str(err) == "1 answers item(s) failed; run the command again to retry them"
    assert texts[0].startswith("answers: 5 questions, 5 answers written; 0 skipped, 1 failed;")
    finals = [e for e in events.items if isinstance(e, ItemFailed) and not e.retryable]
    retries = [e for e in events.items if isinstance(e, ItemFailed) and e.retryable]
    assert len(finals) == 1 and "HTTP 500" in finals[0].error
    assert len(retries) >= 12 and all("retrying in" in e.error for e in retries)
    assert project.history()[-1]["status"] == "failed" and project.history()[-1]["failed"] == 1
    # The rerun retries only the failed one.
    fake_provider.responder = None
    fake_provider.clear()
    texts, _, err = project.stage("answers")
    assert err is None and texts[0].startswith("answers: 1 question, 1 answer written; 5 skipped")
    assert len(project.records("answers")) == 6


def test_fatal_401_saves_answers_received_before(project, fake_provider):
    _prepare(project, topics=1, subtopics=2, questions=4, pipeline={"concurrency": 2})
    served = Counter()
    lock = threading.Lock()

    def responder(req):
        with lock:
            served["n"] += 1
            if served["n"] <= 3:
                served["ok"] += 1
                return None
        return Fault(401, {"error": {"message": "Incorrect API key provided: sk-secret-4242"}}, delay=0.2)

    fake_provider.responder = responder
    texts, datas, err = project.stage("answers")
    assert type(err).__name__ == "KeyRefused" and err.fatal and err.exit_code == 77
    assert "sk-secret" not in str(err)
    # The provider and the variable that holds its key are named (this project sets none).
    assert str(err) == "provider fake: authentication failed; it has no API key: set OVERBRAINER_PROVIDERS__FAKE__API_KEY"
    assert len(project.records("answers")) == served["ok"] == 3
    # The questions that met the error failed (one, or two when both workers had sent theirs).
    assert re.match(r"answers: stopped after (4 of 8 questions: .*; 0 skipped, 1 failed|5 of 8 questions: .*; "
                    r"0 skipped, 2 failed); tokens ", texts[0]), texts[0]
    assert "authentication failed; 3 answers written; 0 skipped" in texts[0]
    assert datas[0]["stopped"] is True and datas[0]["reason"] == "authentication failed"
    assert project.history()[-1]["status"] == "failed" and project.history()[-1]["done"] == 3
    assert served["n"] < 8  # the stage stopped: the other questions were never asked


def test_keeps_concurrency_requests_in_flight(project, fake_provider):
    _prepare(project, topics=1, subtopics=2, questions=8, pipeline={"concurrency": 4})
    fake_provider.clear()
    fake_provider.latency = 0.05
    texts, _, err = project.stage("answers")
    assert err is None and texts[0].startswith("answers: 16 questions, 16 answers written;")
    assert fake_provider.max_in_flight == 4


def test_interrupt_event_abandons_the_stage_and_records_it(project, fake_provider):
    _prepare(project, topics=1, subtopics=2, questions=4, pipeline={"concurrency": 2})
    stop = threading.Event()
    served = Counter()

    def responder(req):
        served["n"] += 1
        if served["n"] == 3:
            stop.set()  # "Ctrl-C" while requests are in flight
        return None

    fake_provider.responder = responder
    fake_provider.latency = 0.05
    texts, datas, err = project.stage("answers", interrupt=stop)
    assert type(err).__name__ == "StageInterrupted" and err.exit_code == 130
    assert str(err) == "interrupted: answers stopped; rerun `overbrainer answers` (or `overbrainer run`) to resume"
    saved = len(project.records("answers"))
    # The summary still says how far the stage got.
    assert len(texts) == 1
    assert texts[0].startswith(f"answers: stopped after {saved} of 8 questions: interrupted; "
                               f"{saved} answer{'' if saved == 1 else 's'} written;")
    assert datas[0]["stopped"] is True and datas[0]["interrupted"] is True
    assert project.history()[-1]["status"] == "interrupted"
    assert saved < 8
    texts, _, err = project.stage("answers")
    assert err is None and len(project.records("answers")) == 8
