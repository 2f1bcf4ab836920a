"""What the TUI's views show, computed without Textual: the configuration's origins, the spend per
stage and model, the dataset tree, the events folded into progress, the captured logs, and what
the steering keys say."""

from __future__ import annotations

import threading

import json
import logging

from overbrainer.dataset.accounting.history import HistoryEntry
from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.front import events as ev
from overbrainer.support.usage import Usage
from overbrainer.tui import dataset_model, project_model, steering
from overbrainer.tui.live import Live
from overbrainer.tui.logbuf import LogBuffer, capture

TOML = """
[project]
name = "demo"

[[topics]]
name = "rust"
subtopics = 2
questions_per_subtopic = 3

[providers.or]
protocol = "openai"

[roles]
generator = { provider = "or", model = "gen" }
parent = { provider = "or", model = "par", reasoning = true }

[pipeline]
concurrency = 4
"""


def _config(tmp_path, environ):
    from overbrainer.config.load import load_config, read_toml

    (tmp_path / "overbrainer.toml").write_text(TOML)
    return load_config(tmp_path, environ=environ), read_toml(tmp_path / "overbrainer.toml")


def test_each_value_says_where_it_came_from_and_secrets_only_whether_they_are_set(tmp_path):
    environ = {"OVERBRAINER_PROVIDERS__OR__BASE_URL": "https://user:pw@openrouter.ai/api/v1?key=abc",
               "OVERBRAINER_PROVIDERS__OR__API_KEY": "sk-or-v1-SECRETSECRET",
               "OVERBRAINER_PIPELINE__SEED": "9", "OVERBRAINER_PIPELINE__MAX_RETRIES": "3"}
    config, file_data = _config(tmp_path, environ)
    origins = project_model.Origins(file_data, environ, dotenv_keys={"OVERBRAINER_PIPELINE__SEED"})
    rows = {r.key: (r.value, r.origin) for r in project_model.config_rows(config, origins)}
    assert rows["project.name"] == ("demo", "file")
    assert rows["topics.rust"] == ("2 subtopics x 3 questions", "file")
    assert rows["pipeline.concurrency"] == ("4", "file")
    assert rows["pipeline.seed"] == ("9", ".env OVERBRAINER_PIPELINE__SEED")
    assert rows["pipeline.max_retries"] == ("3", "env OVERBRAINER_PIPELINE__MAX_RETRIES")
    assert rows["pipeline.eval_ratio"] == ("0.1", "default")
    assert rows["roles.parent.reasoning"] == ("true", "file")
    assert rows["roles.parent.max_tokens"] == ("16384", "default")
    assert rows["providers.or.api_key"] == ("set", "env OVERBRAINER_PROVIDERS__OR__API_KEY")
    assert rows["providers.or.base_url"] == ("https://***@openrouter.ai/api/v1?***",
                                             "env OVERBRAINER_PROVIDERS__OR__BASE_URL")
    assert rows["providers.or.dialect"] == ("openrouter", "guessed")
    assert rows["hf_token"] == ("unset", "default") and rows["runpod.api_key"] == ("unset", "default")
    shown = json.dumps(rows)
    assert "SECRETSECRET" not in shown and "pw@" not in shown and "key=abc" not in shown
    assert "training.base_model" not in rows  # no [training]: nothing of it


def test_spend_is_summed_per_stage_and_model_then_in_all():
    def entry(stage, model, cost, tokens=(10, 20)):
        return HistoryEntry(stage, "t0", "t1", "ok", "or", model, done=1, input_tokens=tokens[0],
                            output_tokens=tokens[1], cost=cost)
    entries = [entry("answers", "big", 0.5), entry("subtopics", "gen", 0.01), entry("answers", "big", 0.25),
               entry("answers", "other", None), entry("split", None, None, (0, 0))]
    rows = [(r.stage, r.model, r.runs, r.input_tokens, r.output_tokens, r.cost)
            for r in project_model.spend_rows(entries)]
    assert rows == [("subtopics", "gen", 1, 10, 20, "$0.0100"), ("answers", "big", 2, 20, 40, "$0.7500"),
                    ("answers", "other", 1, 10, 20, "cost unknown"), ("split", "-", 1, 0, 0, "$0"),
                    ("total", "", 5, 40, 80, "$0.7600+")]
    assert project_model.spend_rows([]) == []


def _write(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _answer(qid, topic, subtopic, text, excluded=None):
    return {"id": qid, "topic": topic, "subtopic": subtopic,
            "messages": [{"role": "user", "content": text},
                         {"role": "assistant", "content": f"A: {text}", "reasoning_content": "thinking…"}],
            "meta": {"model": "par", "input_tokens": 5, "output_tokens": 7, "finish_reason": "stop",
                     "reasoning_kind": "raw", "excluded": excluded}}


def test_the_dataset_tree_marks_each_question_by_its_answer(tmp_path):
    data = tmp_path / "data"
    _write(data / "subtopics.jsonl", [{"id": "s1", "topic": "rust", "name": "Ownership"}])
    _write(data / "questions.jsonl", [
        {"id": "q1", "topic": "rust", "subtopic_id": "s1", "subtopic": "Ownership", "text": "What is [a] move?"},
        {"id": "q2", "topic": "rust", "subtopic_id": "s1", "subtopic": "Ownership", "text": "Why borrow?"},
        {"id": "q3", "topic": "rust", "subtopic_id": "s1", "subtopic": "Ownership", "text": "Lifetimes?"},
        {"id": "q4", "topic": "rust", "subtopic_id": "s0", "subtopic": "Gone", "text": "Its subtopic is gone?"}])
    _write(data / "answers.jsonl", [_answer("q1", "rust", "Ownership", "What is [a] move?"),
                                    _answer("q2", "rust", "Ownership", "Why borrow?", excluded="truncated"),
                                    _answer("q9", "rust", "Ownership", "A question rejected since"),
                                    _answer("q8", "rust", "Lost", "Its subtopic and question are gone")])
    [rust, empty] = dataset_model.topics(tmp_path, ["rust", "go"])
    assert (rust.label(), empty.label()) == ("rust (1 subtopics, 4 questions)", "go (0 subtopics, 0 questions)")
    page = dataset_model.subtopics(tmp_path, rust)
    assert page.more is None
    [sub, gone, lost] = page.items
    assert (sub.label(), gone.label(), lost.label()) == ("Ownership (2/3 answered)", "Gone (0/1 answered)",
                                                        "Lost (0/0 answered)")
    assert (sub.orphans, gone.id, lost.id, lost.orphans) == (1, "s0", None, 1)
    questions = dataset_model.questions(tmp_path, sub).items
    assert [q.label() for q in questions] == ["[a] What is [a] move?", "[x] Why borrow? (truncated)",
                                              "[ ] Lifetimes?", "[o] A question rejected since"]
    detail = dataset_model.detail(tmp_path, questions[0])
    assert "What is [a] move?" in detail and "── reasoning ──\nthinking…" in detail
    assert detail.endswith("── answer ──\nA: What is [a] move?")
    assert "excluded: truncated" in dataset_model.detail(tmp_path, questions[1])
    assert dataset_model.detail(tmp_path, questions[2]).endswith("not answered yet")
    assert dataset_model.detail(tmp_path, questions[3]).startswith("answer q9 (its question is gone)")
    assert [q.label() for q in dataset_model.questions(tmp_path, lost).items] == [
        "[o] Its subtopic and question are gone"]
    assert dataset_model.rejectable(questions[0])[0] == "q1"
    assert dataset_model.rejectable(sub)[0] == "s1"
    assert dataset_model.rejectable(questions[3])[0] == "q9"
    assert dataset_model.rejectable(rust) is None and dataset_model.rejectable(lost) is None


def test_the_dataset_tree_reads_a_page_at_a_time_and_keeps_no_record(tmp_path):
    """A subtopic of 250 questions (every one answered, some twice: the latest line is the answer)
    comes a page of PAGE at a time; a node holds the answer's line offset, not the answer."""
    data = tmp_path / "data"
    n = 2 * dataset_model.PAGE + 50
    _write(data / "subtopics.jsonl", [{"id": f"s{i}", "topic": "t", "name": f"S{i}"} for i in range(n)])
    _write(data / "questions.jsonl", [{"id": f"q{i}", "topic": "t", "subtopic_id": "s0", "subtopic": "S0",
                                       "text": f"Q{i}?"} for i in range(n)])
    _write(data / "answers.jsonl", [_answer(f"q{i}", "t", "S0", f"Q{i}?", excluded="truncated") for i in range(n)]
           + [_answer(f"q{i}", "t", "S0", f"Q{i}?") for i in range(0, n, 2)])
    [topic] = dataset_model.topics(tmp_path)
    assert topic.label() == f"t ({n} subtopics, {n} questions)"
    first = dataset_model.subtopics(tmp_path, topic)
    assert len(first.items) == dataset_model.PAGE and first.items[0].label() == f"S0 ({n}/{n} answered)"
    assert first.more.label() == f"… {n - dataset_model.PAGE} more (Enter shows the next {dataset_model.PAGE})"
    last = dataset_model.subtopics(tmp_path, topic, 2 * dataset_model.PAGE)
    assert [s.name for s in last.items] == [f"S{i}" for i in range(2 * dataset_model.PAGE, n)] and last.more is None
    pages, start = [], 0
    while True:
        page = dataset_model.questions(tmp_path, first.items[0], start)
        pages.append(page.items)
        if page.more is None:
            break
        start = page.more.start
    assert [len(p) for p in pages] == [dataset_model.PAGE, dataset_model.PAGE, 50]
    shown = [q for p in pages for q in p]
    assert [q.id for q in shown] == [f"q{i}" for i in range(n)]
    assert all(isinstance(q.answer, int) for q in shown)  # where to read it, not the answer
    assert [q.marker for q in shown[:4]] == ["[a]", "[x]", "[a]", "[x]"]


def test_events_fold_into_stage_and_run_progress():
    live = Live()
    for e in (ev.StageModel("answers", "par"), ev.StageStarted("answers", 4),
              ev.ItemDone("answers", "a", Usage(10, 20), 0.01),
              ev.ItemDone("answers", "b", Usage(5, 5), None, excluded=True),
              ev.ItemDone("answers", "c"), ev.ItemFailed("answers", "d", "HTTP 503", retryable=True),
              ev.ItemFailed("answers", "d", "HTTP 503", retryable=False)):
        live.apply(e)
    st = live.stages["answers"]
    assert (st.handled, st.done, st.skipped, st.failed, st.excluded, st.retries) == (4, 2, 1, 1, 1, 1)
    assert (st.input_tokens, st.output_tokens, st.cost_text(), st.model) == (15, 25, "$0.0100+", "par")
    live.apply(ev.StageFinished("answers", StageStats(2, 1, 1, 1, Usage(15, 25), 0.02)))
    assert st.finished and st.cost_text() == "$0.0200"

    for e in (ev.PodStatus("r1", "creating", gpu="A40"), ev.PodStatus("r1", "created", "pod1", "A40", 0.4)):
        live.apply(e)
    assert live.runs["r1"].provisioning
    for e in (ev.RunWatched("r1"), ev.JobStatus("r1", "running"),
              ev.Metric("r1", 100.0, 1, max_steps=10, loss=2.0), ev.Metric("r1", 110.0, 3, max_steps=10, loss=1.5),
              ev.Mark("r1", "eval", step=1, total=4)):
        live.apply(e)
    run = live.runs["r1"]
    assert run.watched and not run.provisioning and run.losses == [2.0, 1.5]
    assert run.summary.step == 3 and run.summary.time_left() == 35.0 and run.phase() == "evaluating 1/4"
    live.apply(ev.JobStatus("r1", "exited", 0))
    assert not run.watched and run.phase() == "retrieving results"


def test_the_log_buffer_keeps_redacted_lines_by_level_instead_of_stderr():
    from overbrainer.front.logs import StderrHandler
    from overbrainer.support.redact import register

    register("tui-secret-123456")
    buffer = LogBuffer(limit=3)
    root = logging.getLogger()
    stderr = StderrHandler()
    root.addHandler(stderr)
    logger = logging.getLogger("overbrainer.tuitest")
    logger.setLevel(logging.DEBUG)
    try:
        with capture(buffer):
            assert stderr not in root.handlers and buffer in root.handlers
            logger.debug("one")
            logger.info("key tui-secret-123456 \x1b[31mred")
            logger.warning("three")
            logger.error("four")
        assert stderr in root.handlers and buffer not in root.handlers
    finally:
        root.removeHandler(stderr)
        logger.setLevel(logging.NOTSET)
    lines = buffer.since(0)
    assert [(line.level, line.message) for line in lines] == [("INFO", "key *** red"), ("WARN", "three"),
                                                                ("ERROR", "four")]
    assert [line.message for line in buffer.since(0, "WARN")] == ["three", "four"]
    assert buffer.since(lines[-1].seq) == [] and buffer.last_seq == 4


class _Task:
    def __init__(self, kind="training", run_id=None, pod=False, label="train"):
        self.kind, self.run_id, self.pod, self.label = kind, run_id, pod, label
        self.detach, self.abandon = threading.Event(), threading.Event()


def test_the_steering_keys_say_what_they_do_to_the_running_task():
    live = Live()
    stage = _Task("pipeline", label="answers")
    live.apply(ev.StageStarted("answers", 10))
    assert steering.status(stage, live) == "answers: answers 0/10, 0 retries, $0 (s in Pipeline stops it)"
    assert steering.consequence(stage, live).startswith("the stage stops at a safe point")
    assert steering.cannot_detach(stage, live).startswith("no run is followed now")
    assert steering.cannot_abandon(stage, live) == "a abandons a Runpod provisioning: answers makes no pod"
    stage.detach.set()  # stopped: the stage waits for its requests in flight, s again abandons them
    assert steering.status(stage, live) == "answers: stopping, waiting for its requests in flight (s again abandons them)"
    assert steering.consequence(stage, live).startswith("the requests still in flight are abandoned")
    stage.abandon.set()
    assert steering.status(stage, live) == "answers: stopping, its requests in flight abandoned"

    train = _Task(run_id="r1", pod=True)
    live.apply(ev.PodStatus("r1", "created", "pod1", "A40", 0.4))
    assert steering.provisioning(train, live) and steering.cannot_abandon(train, live) is None
    assert steering.cannot_detach(train, live) == "run r1 is still being provisioned: a abandons it"
    assert steering.consequence(train, live) == (
        "the pod being made for run r1 is deleted and the run fails before any training")
    live.apply(ev.RunWatched("r1"))
    assert steering.following(train, live) and steering.cannot_detach(train, live) is None
    assert steering.cannot_abandon(train, live).startswith("the pod of run r1 is made and its job runs")
    assert steering.consequence(train, live).startswith("run r1 keeps running on its target;")
    assert "its pod bills until the run is collected" in steering.consequence(train, live)
    assert steering.status(train, live) == "following run r1: waiting for its first metrics (d detaches: the job goes on)"
