"""`answers --retry-excluded [--topic NAME]`: only the questions whose latest answer is excluded are
asked again; the new answer is appended and supersedes the old one for every reader (split,
dataset stats); nothing is removed."""

from __future__ import annotations

import json

from tests.fixtures.provider import Answer


def _excluded_run(project, fake_provider, cli, topics=1):
    project.write(topics=topics, subtopics=2, questions=3, reasoning=False)
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    # Three answers of the first topic come back cut, refused and empty; the others are usable.
    fake_provider.script(Answer.truncated("A long story, cut"), Answer.refused(), Answer("   "))
    r = cli(["-C", project.dir, "answers", "--topic", "topic0"], env=project.env)
    assert r.returncode == 0, r.stderr
    excluded = {a["id"]: a["meta"]["excluded"] for a in project.records("answers") if a["meta"]["excluded"]}
    assert sorted(excluded.values()) == ["empty", "refused", "truncated"]
    return excluded


def _asked(fake_provider) -> list[str]:
    return sorted(r.body["messages"][-1]["content"] for r in fake_provider.chat_requests())


def test_retry_excluded_asks_exactly_the_excluded_and_the_new_answers_supersede(project, fake_provider, cli):
    excluded = _excluded_run(project, fake_provider, cli)
    texts = {q["id"]: q["text"] for q in project.records("questions")}
    before = (project.data / "answers.jsonl").read_bytes()
    fake_provider.clear()
    r = cli(["-C", project.dir, "answers", "--retry-excluded"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert _asked(fake_provider) == sorted(texts[i] for i in excluded)
    assert r.stdout.startswith("answers: 3 questions, 3 answers written; 3 skipped, 0 failed;")
    after = (project.data / "answers.jsonl").read_bytes()
    assert after.startswith(before)  # appended; nothing removed or rewritten
    lines = project.records("answers")
    assert len(lines) == 9 and {a["id"] for a in lines[6:]} == set(excluded)
    assert all(a["meta"]["excluded"] is None for a in lines[6:])

    # Every reader takes the latest answer of each question.
    r = cli(["-C", project.dir, "--json", "split"], env=project.env)
    assert r.returncode == 0, r.stderr
    split = json.loads(r.stdout)
    assert split["train"] + split["eval"] == 6 and split["excluded"] == 0
    train = [json.loads(line) for line in (project.data / "train.jsonl").read_text().splitlines()]
    assert len({e["id"] for e in train}) == len(train)
    r = cli(["-C", project.dir, "--json", "dataset", "stats"], env=project.env)
    [topic] = json.loads(r.stdout)["topics"]
    assert (topic["answered"], topic["usable"], topic["excluded"]) == (6, 6, 0)

    # Nothing is excluded any more: nothing to ask, and a plain rerun asks nothing either.
    fake_provider.clear()
    for args in (["answers", "--retry-excluded"], ["answers"]):
        r = cli(["-C", project.dir, *args], env=project.env)
        assert r.returncode == 0 and fake_provider.chat_requests() == [], r.stderr


def test_retry_excluded_of_one_topic_and_its_plan(project, fake_provider, cli):
    excluded = _excluded_run(project, fake_provider, cli, topics=2)
    texts = {q["id"]: q["text"] for q in project.records("questions")}
    fake_provider.clear()
    fake_provider.script(Answer.truncated("cut again"), Answer("Usable.", reasoning="r"), Answer("Usable."))
    plan = [json.loads(line) for line in cli(["-C", project.dir, "--json", "answers", "--retry-excluded", "--plan"],
                                             env=project.env).stdout.splitlines()]
    assert plan[0]["requests"] == 3  # the excluded ones, not topic1's unanswered 6
    assert fake_provider.chat_requests() == []
    r = cli(["-C", project.dir, "answers", "--retry-excluded", "--topic", "topic1"], env=project.env)
    assert r.returncode == 0 and fake_provider.chat_requests() == [], r.stderr  # topic1 has none excluded
    r = cli(["-C", project.dir, "answers", "--retry-excluded", "--topic", "topic0"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert _asked(fake_provider) == sorted(texts[i] for i in excluded)
    # One came back cut again: it is still the one to retry, the others are done.
    latest = {a["id"]: a["meta"]["excluded"] for a in project.records("answers")}
    assert sorted(v for v in latest.values() if v) == ["truncated"]
    r = cli(["-C", project.dir, "--json", "answers", "--retry-excluded", "--plan"], env=project.env)
    assert json.loads(r.stdout.splitlines()[0])["requests"] == 1


def test_retry_excluded_and_force_do_not_go_together(project, cli):
    r = cli(["-C", project.dir, "answers", "--retry-excluded", "--force"], env=project.env)
    assert r.returncode == 2
    assert "error: --force and --retry-excluded do not go together" in r.stderr
