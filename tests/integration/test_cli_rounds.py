"""No paid round that cannot add anything: a list round that added nothing ends its command with
exit 1 naming it, and later runs hold it back (no request, no data file read, exit 0, a note in
the summary) until what makes its prompt changes (docs/stages.md#rounds-that-add-nothing).
The real CLI against the fake provider."""

from __future__ import annotations

import json
import os
import re

from tests.fixtures.provider import Answer

HELD = re.compile(r"; 1 (topic|subtopic)\(s\) held back: no new items at the last try \(\d{4}-\d{2}-\d{2}\); "
                  r"change the prompt or the config to ask again$")


def _same_answers(subtopics=("Alpha", "Beta"), questions=None):
    """A generator that always gives the same subtopic names (and, when given, the same questions)."""
    def responder(req):
        if "subtopics of this topic" in req.prompt:
            return Answer(content=json.dumps(list(subtopics)))
        if questions is not None and "questions for a training dataset" in req.prompt:
            return Answer(content=json.dumps(list(questions)))
        return None
    return responder


def _garbled(project):
    """The data files overwritten in place with invalid JSON (same inode, size and times): a
    command that reads one fails. Returns how to put them back as they were."""
    kept = {}
    for name in ("subtopics", "questions", "answers"):
        path = project.data / f"{name}.jsonl"
        st = os.stat(path)
        kept[path] = (path.read_bytes(), st)
        with open(path, "r+b") as f:
            f.write(b"#" * st.st_size)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    def restore():
        for path, (data, st) in kept.items():
            with open(path, "r+b") as f:
                f.write(data)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return restore


def _three_runs_pay_nothing(project, fake_provider, cli, index: int, head: str) -> None:
    """Three `run`s in a row: no request, exit 0, the summary line `index` starting with `head`
    and saying what is held back."""
    fake_provider.clear()
    for _ in range(3):
        r = cli(["-C", project.dir, "run"], env=project.env)
        assert r.returncode == 0, r.stderr
        line = r.stdout.splitlines()[index]
        assert line.startswith(head) and HELD.search(line), line
    assert fake_provider.chat_requests() == []


def _subtopic_prompts(fake_provider):
    return [r.prompt for r in fake_provider.chat_requests() if "subtopics of this topic" in r.prompt]


def test_a_config_change_that_adds_nothing_is_paid_once(project, fake_provider, cli):
    project.write(topics=1, subtopics=2, questions=2)
    fake_provider.responder = _same_answers()
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    # 2 -> 4 subtopics; the generator keeps giving the same two names.
    project.write(topics=1, subtopics=4, questions=2)
    fake_provider.clear()
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["subtopics", "questions", "answers", "split", "kept"]  # all ran
    assert lines[0].startswith("subtopics: 1 topic, 0 subtopics written; 0 skipped, 0 failed; tokens ")
    assert lines[0].endswith("; 1 topic added no new subtopics: topic0")
    assert ("error: no new items at the last try: subtopics of topic0; not asked again until the topic's "
            "description or counts, the prompt (prompts/subtopics.txt) or the generator's model change, "
            "or with --force") in r.stderr
    prompts = _subtopic_prompts(fake_provider)
    assert len(prompts) == 1  # the round stopped at its first answer with nothing new
    assert "These subtopics already exist" in prompts[0] and "- Alpha\n- Beta\n" in prompts[0]
    assert "List 2 distinct subtopics" in prompts[0]
    stalls = json.loads((project.dir / ".overbrainer" / "stalls.json").read_text())
    assert list(stalls["subtopics"]) == ["topic0"] and stalls["subtopics"]["topic0"]["have"] == 2

    # The next three runs pay nothing, read no data file, exit 0 and say why.
    restore = _garbled(project)
    _three_runs_pay_nothing(project, fake_provider, cli, 0,
                            "subtopics: 0 topics, 0 subtopics written; 0 skipped, 0 failed; tokens 0 in, 0 out")
    r = cli(["-C", project.dir, "run", "--plan"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "subtopics: 0 requests: nothing to ask; 1 topic(s) held back: no new items at the last try" in r.stdout
    restore()

    # A new description is a new prompt: asked again (and stalled again, naming it).
    toml = project.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace('description = "All about topic0"', 'description = "Everything"'))
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 1 and "subtopics of topic0" in r.stderr
    assert len(_subtopic_prompts(fake_provider)) == 1 and "Topic description: Everything" in _subtopic_prompts(
        fake_provider)[0]
    # --force asks again too; names that come back make the topic no longer stalled.
    fake_provider.clear()
    fake_provider.responder = _same_answers(("Alpha", "Beta", "Gamma"))
    r = cli(["-C", project.dir, "subtopics", "--force"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("subtopics: 1 topic, 3 subtopics written;")
    assert json.loads((project.dir / ".overbrainer" / "stalls.json").read_text())["subtopics"] == {}


def test_a_subtopic_whose_questions_stall_is_held_back(project, fake_provider, cli):
    project.write(topics=1, subtopics=1, questions=4, pipeline={"max_retries": 2})
    fake_provider.responder = _same_answers(("Alpha",), ("How does it work?", "Why does it fail?"))
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].startswith("questions: 1 subtopic, 2 questions written;")
    assert lines[1].endswith("; 1 subtopic added no new questions: `Alpha` (topic0)")
    assert lines[2].startswith("answers: 2 questions, 2 answers written;")
    assert "error: no new items at the last try: questions of `Alpha` (topic0);" in r.stderr
    assert len([p for p in fake_provider.chat_requests() if "questions for a training" in p.prompt]) == 3

    restore = _garbled(project)
    _three_runs_pay_nothing(project, fake_provider, cli, 1,
                            "questions: 0 subtopics, 0 questions written; 0 skipped, 0 failed")
    r = cli(["-C", project.dir, "--json", "run", "--plan"], env=project.env)
    assert r.returncode == 0, r.stderr
    plans = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(p.get("stage"), p.get("requests"), p.get("held")) for p in plans if p.get("stage") == "questions"] == [
        ("questions", 0, 1)]
    restore()
    # More questions per subtopic is a new prompt: asked again.
    project.write(topics=1, subtopics=1, questions=5, pipeline={"max_retries": 2})
    r = cli(["-C", project.dir, "questions"], env=project.env)
    assert r.returncode == 1 and "questions of `Alpha` (topic0)" in r.stderr
    assert fake_provider.chat_requests() != []


def test_an_own_subtopics_prompt_without_existing_still_works(project, fake_provider, cli):
    project.write(topics=1, subtopics=2, questions=1)
    (project.dir / "prompts").mkdir(exist_ok=True)
    (project.dir / "prompts" / "subtopics.txt").write_text(
        "Subtopics of {{ topic }}. Reply with a JSON array of {{ count }} strings and nothing else.\n")
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("subtopics: 1 topic, 2 subtopics written;")
    assert "prompts/subtopics.txt does not use `existing`" in r.stderr
