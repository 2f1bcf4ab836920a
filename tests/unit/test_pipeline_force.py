"""`--force` drops the selected topics' records from a stage's output by streaming the file into
its atomic rewrite (pipeline/common.force_rewrite)."""

import os

import pytest

from overbrainer.dataset.jsonl import read_records, rewrite
from overbrainer.dataset.records import Subtopic
from overbrainer.errors import OverbrainerError
from overbrainer.pipeline.common import force_rewrite


def subtopics(path):
    records = [Subtopic(f"{topic}{n}", topic, f"Ünï {n} 🙂") for n in range(3) for topic in ("a", "b", "c")]
    rewrite(path, records)
    return records


def test_force_rewrite_drops_the_selected_topics_records(tmp_path, caplog):
    path = tmp_path / "data" / "subtopics.jsonl"
    records = subtopics(path)
    with caplog.at_level("INFO"):
        force_rewrite(path, Subtopic, {"a", "c"})
    assert read_records(path, Subtopic) == [r for r in records if r.topic == "b"]
    assert "--force: removed 6 record(s) of a, c from subtopics.jsonl" in caplog.text
    assert sorted(p.name for p in path.parent.iterdir()) == ["subtopics.jsonl"]


def test_force_rewrite_leaves_the_file_alone_when_nothing_goes(tmp_path):
    path = tmp_path / "subtopics.jsonl"
    subtopics(path)
    with open(path, "a") as f:
        f.write('{"id": "x", "topic": "b", "name": "spaced, as the tool never writes"}\n')
    before, inode = path.read_bytes(), os.stat(path).st_ino
    force_rewrite(path, Subtopic, {"z"})
    assert path.read_bytes() == before and os.stat(path).st_ino == inode
    force_rewrite(tmp_path / "missing.jsonl", Subtopic, {"a"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["subtopics.jsonl"]


def test_a_bad_line_stops_force_rewrite_before_anything_changes(tmp_path):
    path = tmp_path / "subtopics.jsonl"
    subtopics(path)
    with open(path, "a") as f:
        f.write('{"id": 1}\n{"id": "y", "topic": "a", "name": "n"}\n')
    before = path.read_bytes()
    with pytest.raises(OverbrainerError, match=r"subtopics.jsonl:10: invalid record"):
        force_rewrite(path, Subtopic, {"a"})
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["subtopics.jsonl"]
