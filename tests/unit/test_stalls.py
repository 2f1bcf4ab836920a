"""The rounds that added nothing (dataset/stalls.py): the prompt's key, the file, its rewrite."""

from __future__ import annotations

import os

from overbrainer.config.model import Topic
from overbrainer.dataset import stalls
from overbrainer.dataset.accounting.stages import StageStats
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.pipeline.run_flow import stalled_error
from overbrainer.pipeline.stage import StageResult, summary_line
from overbrainer.pipeline.subtopics import EXISTING_BYTES, EXISTING_NAMES, existing_names
from overbrainer.support.usage import Usage

TOPIC = Topic(name="rust", description="Ownership", subtopics=4, questions_per_subtopic=3)


def _key(topic=TOPIC, template="T", provider="p", model="m"):
    return stalls.prompt_key(topic, template, provider, model)


def test_the_key_changes_with_each_thing_that_makes_the_prompt():
    base = _key()
    assert base == _key() and len(base) == 32
    changed = [
        _key(Topic("rust2", "Ownership", 4, 3)), _key(Topic("rust", "Borrowing", 4, 3)),
        _key(Topic("rust", None, 4, 3)), _key(Topic("rust", "Ownership", 5, 3)),
        _key(Topic("rust", "Ownership", 4, 4)), _key(template="T2"), _key(provider="q"), _key(model="n"),
    ]
    assert base not in changed and len(set(changed)) == len(changed)
    assert _key(Topic("rust", None, 4, 3)) == _key(Topic("rust", "", 4, 3))  # no description is an empty one


def test_record_save_load_and_clear(tmp_path):
    paths = ProjectPaths(tmp_path)
    s = stalls.load(paths)  # no file: none
    assert s.held("subtopics", "rust", "k") is None and not paths.stalls.exists()
    s.save()  # nothing changed: nothing written
    assert not paths.stalls.exists()
    s.record("subtopics", "rust", "rust", "k", 2)
    s.record("questions", "s1", "rust", "k", 1)
    s.save()
    again = stalls.load(paths)
    held = again.held("subtopics", "rust", "k")
    assert held is not None and (held.topic, held.key, held.have) == ("rust", "k", 2)
    assert held.at == stalls.today()
    assert again.held("subtopics", "rust", "other") is None  # another prompt: asked again
    assert [item for item, _ in again.of_topic("questions", "rust")] == ["s1"]
    inode = os.stat(paths.stalls).st_ino
    again.clear("subtopics", "rust")
    again.save()
    assert os.stat(paths.stalls).st_ino != inode  # rewritten atomically (a new file renamed over)
    last = stalls.load(paths)
    assert last.held("subtopics", "rust", "k") is None and last.held("questions", "s1", "k") is not None
    assert not list(tmp_path.joinpath(".overbrainer").glob("*.tmp*"))


def test_a_bad_or_foreign_file_holds_nothing_back(tmp_path):
    paths = ProjectPaths(tmp_path)
    paths.state.mkdir()
    for text in ("not json", '{"format": 99, "subtopics": {}}', '{"format": 1, "subtopics": {"x": {}}}', "[]"):
        paths.stalls.write_text(text)
        assert stalls.load(paths).held("subtopics", "x", "k") is None


def test_the_existing_names_a_prompt_lists_are_bounded():
    assert existing_names(["a", "b"]) == ["a", "b"]
    many = [f"name {i}" for i in range(EXISTING_NAMES + 50)]
    assert existing_names(many) == many[-EXISTING_NAMES:]  # the last ones, oldest first
    long = ["x" * 1000 for _ in range(100)]
    listed = existing_names(long)
    assert len(listed) == EXISTING_BYTES // 1003 and sum(len(n) + 3 for n in listed) <= EXISTING_BYTES


def test_the_summary_and_the_error_name_what_added_nothing_and_what_is_held_back():
    stats = StageStats(1, 0, 0, 0, Usage(10, 5), None)
    r = StageResult("subtopics", stats, total=1, stalled=["rust"], held=2, held_at="2026-12-01")
    line = summary_line(r)
    assert line.endswith("; 1 topic added no new subtopics: rust; 2 topic(s) held back: no new items at the "
                         "last try (2026-12-01); change the prompt or the config to ask again")
    assert r.data()["stalled"] == ["rust"] and (r.data()["held"], r.data()["held_at"]) == (2, "2026-12-01")
    many = StageResult("questions", stats, stalled=[f"`s{i}` (rust)" for i in range(8)])
    assert summary_line(many).endswith("; 8 subtopics added no new questions: `s0` (rust), `s1` (rust), `s2` (rust), "
                                       "`s3` (rust), `s4` (rust) and 3 more")
    error = stalled_error([r, StageResult("answers", stats), many])
    assert str(error).startswith("no new items at the last try: subtopics of rust; questions of `s0` (rust), ")
    assert "the prompt (prompts/subtopics.txt, prompts/questions.txt)" in str(error) and error.exit_code == 1
    assert stalled_error([StageResult("answers", stats)]) is None
    quiet = StageResult("subtopics", stats)
    assert "held back" not in summary_line(quiet) and "stalled" not in quiet.data()
