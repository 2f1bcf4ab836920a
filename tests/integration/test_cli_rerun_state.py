"""A rerun with nothing to do reads no data file: the stages decide from the dataset's saved
figures (.overbrainer/dataset.json), kept up to date as they append, and used only while every
data file is the one they were taken from (docs/data-files.md#the-datasets-saved-figures)."""

from __future__ import annotations

import json
import os

from overbrainer.dataset.figures import Figures, scan
from overbrainer.dataset.paths import ProjectPaths


def _saved(project) -> Figures:
    data = json.loads((project.dir / ".overbrainer" / "dataset.json").read_text())
    return Figures.from_json(data["figures"])


def _garble_in_place(path) -> None:
    """Overwrite a file's bytes in place with invalid JSON, keeping its inode, size and times: a
    command that reads it fails, one that trusts its saved figures does not notice."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(b"#" * st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_the_saved_figures_after_a_run_are_those_of_a_new_scan(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=3)
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert _saved(project) == scan(ProjectPaths(project.dir))


def test_a_stage_rerun_with_nothing_to_do_reads_no_data_file(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=3)
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    for name in ("subtopics", "questions", "answers"):
        _garble_in_place(project.data / f"{name}.jsonl")
    fake_provider.clear()
    for stage, skipped in (("subtopics", 2), ("questions", 4), ("answers", 12)):
        r = cli(["-C", project.dir, stage], env=project.env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"{stage}: 0 ") and f" written; {skipped} skipped, 0 failed" in r.stdout, r.stdout
    assert fake_provider.chat_requests() == []


def test_a_line_added_by_hand_is_noticed_and_asked(project, fake_provider, cli):
    project.write(topics=1, subtopics=1, questions=2)
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    q = project.records("questions")[0]
    extra = dict(q, id="0" * 32, text="A question written by hand?")
    with open(project.data / "questions.jsonl", "a") as f:
        f.write(json.dumps(extra, separators=(",", ":")) + "\n")
    fake_provider.clear()
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("answers: 1 question, 1 answer written; 2 skipped"), r.stdout
    assert [a["id"] for a in project.records("answers")][-1] == "0" * 32
    assert _saved(project) == scan(ProjectPaths(project.dir))


def test_a_run_with_nothing_to_do_reads_no_data_file_and_rewrites_nothing(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=3)
    first = cli(["-C", project.dir, "run"], env=project.env)
    assert first.returncode == 0, first.stderr
    split_files = {name: (project.data / name).read_bytes() for name in ("train.jsonl", "eval.jsonl")}
    stats = {name: os.stat(project.data / name) for name in split_files}
    for name in ("subtopics", "questions", "answers"):
        _garble_in_place(project.data / f"{name}.jsonl")
    fake_provider.clear()
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]  # the same split counts
    assert "train.jsonl and eval.jsonl are up to date" in r.stderr
    assert fake_provider.chat_requests() == []
    for name, data in split_files.items():
        assert (project.data / name).read_bytes() == data
        assert os.stat(project.data / name).st_ino == stats[name].st_ino  # not even rewritten


def test_a_split_runs_again_when_its_settings_or_its_files_changed(project, fake_provider, cli):
    project.write(topics=1, subtopics=2, questions=3)
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    train = project.data / "train.jsonl"
    before = train.read_bytes()
    train.write_bytes(b"")  # emptied by hand: the next split writes it again
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "up to date" not in r.stderr and train.read_bytes() == before
    toml = project.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace("[pipeline]", "[pipeline]\nseed = 7"))
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "up to date" not in r.stderr
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert r.returncode == 0 and "up to date" in r.stderr
