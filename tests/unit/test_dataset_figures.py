"""The dataset's figures (dataset/figures.py) and their saved state (dataset/state.py): what a
scan counts, that the saved figures are used only while every data file is the one they were
taken from, and that a bad state file is only a cache miss."""

from __future__ import annotations

import json
import os

from overbrainer.dataset import state
from overbrainer.dataset.figures import Figures, scan
from overbrainer.dataset.ids import packed, question_id, subtopic_id
from overbrainer.dataset.jsonl import Appender
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.dataset.records import Example, Message, Meta, Question, Subtopic


def _answer(q: Question, excluded=None, tokens=(10, 20)) -> Example:
    meta = Meta("parent", tokens[0], tokens[1], "stop", "none", excluded)
    return Example(q.id, q.topic, q.subtopic, [Message("user", q.text), Message("assistant", "a")], meta)


def _write(paths: ProjectPaths, name: str, records) -> None:
    with Appender(paths.data / f"{name}.jsonl") as out:
        out.append_all(records)


def _project(tmp_path):
    paths = ProjectPaths(tmp_path)
    s1 = Subtopic(subtopic_id("t", "one"), "t", "one")
    s2 = Subtopic(subtopic_id("t", "two"), "t", "two")
    s3 = Subtopic(subtopic_id("u", "three"), "u", "three")
    qs = [Question(question_id(s1.id, f"q{i}"), "t", s1.id, "one", f"q{i}") for i in range(3)]
    qs.append(Question(question_id(s3.id, "é?"), "u", s3.id, "three", "é?"))
    _write(paths, "subtopics", [s1, s2, s3])
    _write(paths, "questions", qs)
    # q0 answered, q1 excluded then answered again (the latest counts), q2 unanswered,
    # u's question excluded; one answer whose question is gone.
    orphan = Question("f" * 32, "t", s1.id, "one", "gone")
    _write(paths, "answers", [_answer(qs[0]), _answer(qs[1], "truncated"), _answer(qs[1], tokens=(0, 0)),
                              _answer(qs[3], "refused", (5, 7)), _answer(orphan)])
    return paths, qs


def test_a_scan_counts_per_topic_what_the_stages_decide_on(tmp_path):
    paths, qs = _project(tmp_path)
    f = scan(paths)
    t, u = f.topics["t"], f.topics["u"]
    assert (t.subtopics, t.subtopic_bytes, t.fill) == (2, 6, {3: 1, 0: 1})
    assert (t.questions, t.question_bytes, t.distinct, t.unanswered, t.unanswered_bytes) == (3, 6, 3, 1, 2)
    assert (t.retry, t.retry_bytes) == (0, 0)  # q1's latest answer is usable
    assert (u.subtopics, u.fill, u.questions, u.question_bytes, u.unanswered, u.retry, u.retry_bytes) == (
        1, {1: 1}, 1, 3, 0, 1, 3)
    assert f.answers == 4 and f.orphan_answers == 1 and f.orphan_questions == 0
    # The latest answer of each question that used tokens: q0, u's, the orphan (q1's latest used none).
    assert f.answer_tokens == (3, 25, 47)
    assert not f.exact and t.short_of(1) == 1 and t.short_of(3) == 1 and t.short_of(4) == 2


def test_figures_survive_their_json_form(tmp_path):
    paths, _ = _project(tmp_path)
    f = scan(paths)
    again = Figures.from_json(json.loads(json.dumps(f.to_json())))
    assert again == f


def test_the_state_is_used_while_the_files_are_the_same_and_scanned_again_when_one_changed(tmp_path):
    paths, qs = _project(tmp_path)
    first = state.current(paths)
    assert paths.dataset_state.exists() and state.load(paths) == first
    # An edit by hand (one more question) is noticed: the saved figures no longer match.
    with open(paths.questions, "a") as f:
        f.write(json.dumps(Question("a" * 32, "t", qs[0].subtopic_id, "one", "new").to_dict()) + "\n")
    assert state.load(paths) is None
    assert state.current(paths).topics["t"].unanswered == 2


def test_a_same_size_rewrite_with_a_new_mtime_is_noticed(tmp_path):
    paths, _ = _project(tmp_path)
    state.current(paths)
    data = paths.answers.read_bytes()
    st = os.stat(paths.answers)
    paths.answers.write_bytes(data.replace(b'"truncated"', b'"refused"  '))  # same size
    os.utime(paths.answers, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert os.stat(paths.answers).st_size == st.st_size
    assert state.load(paths) is None


def test_a_state_file_that_is_not_ours_is_only_a_cache_miss(tmp_path):
    paths, _ = _project(tmp_path)
    expected = scan(paths)
    paths.state.mkdir(exist_ok=True)
    for content in (b"not json", b"[]", b'{"format": 99}', b'{"format": 1, "files": {}, "figures": {}}'):
        paths.dataset_state.write_bytes(content)
        assert state.load(paths) is None
        assert state.current(paths) == expected


def test_what_the_stages_note_equals_a_new_scan(tmp_path):
    """The notes the stages make as they append keep the figures those of a new scan."""
    paths = ProjectPaths(tmp_path)
    figures = state.current(paths)
    assert figures == Figures() and figures.exact
    s = Subtopic(subtopic_id("t", "one"), "t", "one")
    _write(paths, "subtopics", [s])
    figures.note_subtopic("t", "one")
    qs = [Question(question_id(s.id, f"question {i}"), "t", s.id, "one", f"question {i}") for i in range(2)]
    _write(paths, "questions", qs)
    figures.note_questions("t", 0, [q.text for q in qs])
    answers = [_answer(qs[0]), _answer(qs[1], "empty", (0, 0))]
    _write(paths, "answers", answers)
    for q, a in zip(qs, answers):
        figures.note_answer("t", q.text, a.meta)
    assert figures == scan(paths)
    state.save(paths, figures)
    assert state.load(paths) == figures


def test_a_packed_id_is_compact_for_our_ids_and_never_merges_two_texts():
    ours = question_id("s", "q")
    assert packed(ours) == int(ours, 16)
    assert packed("ABC") == "ABC" and packed("0x" + "1" * 30) == "0x" + "1" * 30
    assert packed(ours.upper()) != packed(ours)
