"""The quality gate end to end: the real CLI against the fake provider. Bad answers (empty,
truncated, refused, wrong format, wrong language, too short) are dropped, no good one is; the
grader scores through a scripted reply and is never paid twice for one answer; the early stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

from tests.fixtures.cli import clean_env, signalled_when
from tests.fixtures.provider import Answer

GOOD = ("ANSWER: The answer to this question is that the value depends on the input, and it is "
        "computed in two steps which are explained here with an example for the reader.")
GERMAN = ("ANSWER: Die Antwort auf diese Frage ist, dass der Wert von der Eingabe abhängt, und er wird "
          "in zwei Schritten berechnet, die hier mit einem Beispiel für den Leser erklärt werden.")
NO_FORMAT = ("The answer to this question is that the value depends on the input, and it is computed "
             "in two steps which are explained here with an example for the reader.")
GATE = ['[gate]', 'language = "en"', 'min_chars = 60', 'format_regex = "^ANSWER: "', 'stop_after = 0']


def _gated_project(project, fake_provider, extra=(), **kw):
    project.write(topics=1, subtopics=2, questions=5, **kw)
    text = (project.dir / "overbrainer.toml").read_text()
    (project.dir / "overbrainer.toml").write_text(text + "\n" + "\n".join(list(extra) + GATE) + "\n")

    def responder(req):
        prompt = req.body["messages"][-1]["content"]
        if "You grade one answer" in prompt:
            return Answer('{"score": 3, "reason": "vague"}' if "MEDIOCRE" in prompt
                          else '{"score": 9, "reason": "correct and clear"}')
        if "JSON array" in prompt:
            return None  # the default list
        return Answer(GOOD)

    fake_provider.responder = responder


def _verdicts(project) -> dict:
    out: dict = {}
    for v in project.records("gate"):
        out.setdefault(v["id"], []).append(v)
    return out


def test_the_gate_drops_every_bad_answer_and_no_good_one(project, fake_provider, cli):
    _gated_project(project, fake_provider)
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.script(Answer(""), Answer.truncated("ANSWER: cut"), Answer.refused(), Answer(GERMAN),
                         Answer(NO_FORMAT), Answer("ANSWER: too short"))
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["subtopics", "questions", "answers", "gate", "split", "kept"]
    assert lines[3].startswith("gate: 7 answers, 7 verdicts written (3 excluded from training); 0 skipped, 0 failed;")
    assert lines[4] == ("split: 3 train, 1 eval, 3 excluded (truncated 1, empty 1, refused 1), "
                        "3 gated (language 1, length 1, format 1), 0 orphaned")
    answers = {a["id"]: a for a in project.records("answers")}
    assert len(answers) == 10  # every dropped answer stays in answers.jsonl
    verdicts = _verdicts(project)
    for answer_id, a in answers.items():
        text = a["messages"][-1]["content"]
        if a["meta"]["excluded"] is not None:
            assert answer_id not in verdicts  # excluded by `answers` already
            continue
        [v] = verdicts[answer_id]
        expected = {GOOD: None, GERMAN: "language", NO_FORMAT: "format", "ANSWER: too short": "length"}[text]
        assert (v["verdict"], v["reason"], v["check"]) == ("drop" if expected else "keep", expected, "rules")
    kept = {json.loads(line)["id"] for name in ("train", "eval")
            for line in (project.data / f"{name}.jsonl").read_text().splitlines()}
    assert kept == {i for i, a in answers.items() if a["messages"][-1]["content"] == GOOD}

    r = cli(["-C", project.dir, "dataset", "stats"], env=project.env)
    assert r.stdout.splitlines()[0] == ("topic0: 2 subtopics, 10 questions, 10 answered (4 usable, 3 excluded: "
                                        "truncated 1, empty 1, refused 1); gated 3: language 1, length 1, format 1")
    r = cli(["-C", project.dir, "dataset", "gated"], env=project.env)
    assert r.returncode == 0, r.stderr
    listed = r.stdout.splitlines()
    assert listed[-1] == "3 answers gated" and len(listed) == 4
    reasons = {line.split()[0]: line.split("  ")[2] for line in listed[:-1]}
    assert {i: v.split(": ")[1] for i, v in reasons.items()} == {
        i: {GERMAN: "language", NO_FORMAT: "format", "ANSWER: too short": "length"}[a["messages"][-1]["content"]]
        for i, a in answers.items() if i in reasons}
    assert "rules: length: 17 characters, fewer than 60" in r.stdout
    assert "rules: format: does not match format_regex" in r.stdout
    assert "rules: language: looks like de, not en (stop words: de " in r.stdout
    # A rerun judges nothing again, and the split is the same.
    r = cli(["-C", project.dir, "gate"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("gate: 0 answers, 0 verdicts written; 7 skipped, 0 failed;")
    assert "gate: nothing to do" in r.stderr
    assert len(project.records("gate")) == 7


def test_the_grader_scores_once_and_its_cost_is_counted(project, fake_provider, cli):
    _gated_project(project, fake_provider, extra=['[roles.grader]', 'provider = "fake"', 'model = "grader-model"'])
    fake_provider.models = {"grader-model": (1.0, 2.0), "deepseek/deepseek-r1": (1.0, 2.0),
                            "qwen/qwen3-235b": (0.5, 0.5)}
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.script(Answer(GERMAN), Answer(GOOD + " MEDIOCRE"))
    assert cli(["-C", project.dir, "answers"], env=project.env).returncode == 0
    fake_provider.clear()
    r = cli(["-C", project.dir, "gate"], env=project.env)
    assert r.returncode == 0, r.stderr
    graded = [q for q in fake_provider.chat_requests() if "You grade one answer" in q.body["messages"][-1]["content"]]
    assert len(graded) == 9 == len(fake_provider.chat_requests())  # the German answer is not graded
    assert r.stdout.startswith("gate: 10 answers, 19 verdicts written (2 excluded from training); 0 skipped")
    grades = [v for v in project.records("gate") if v["check"] == "grader"]
    assert len(grades) == 9 and all(v["model"] == "grader-model" and v["cost"] > 0 for v in grades)
    [low] = [v for v in grades if v["verdict"] == "drop"]
    assert (low["score"], low["reason"]) == (3, "grader")
    assert project.history()[-1]["stage"] == "gate" and project.history()[-1]["cost"] > 0
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert "2 gated (language 1, grader 1)" in r.stdout

    # A rerun pays nothing, nor do new rules (the answers they keep were graded already).
    fake_provider.clear()
    r = cli(["-C", project.dir, "gate"], env=project.env)
    assert r.returncode == 0 and fake_provider.chat_requests() == [], r.stderr
    text = (project.dir / "overbrainer.toml").read_text()
    (project.dir / "overbrainer.toml").write_text(text.replace("min_chars = 60", "min_chars = 61"))
    r = cli(["-C", project.dir, "gate"], env=project.env)
    assert r.returncode == 0 and fake_provider.chat_requests() == [], r.stderr
    assert r.stdout.startswith("gate: 9 answers, 9 verdicts written (1 excluded from training); 1 skipped")
    # A new threshold grades again.
    (project.dir / "overbrainer.toml").write_text(text + "grader_threshold = 2\n")
    r = cli(["-C", project.dir, "gate"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert len(fake_provider.chat_requests()) == 9
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert "1 gated (language 1)" in r.stdout


def test_answers_stop_early_when_most_of_the_first_answers_are_rejected(project, fake_provider, cli):
    _gated_project(project, fake_provider, pipeline={"concurrency": 1})
    text = (project.dir / "overbrainer.toml").read_text().replace("stop_after = 0", "stop_after = 4")
    (project.dir / "overbrainer.toml").write_text(text)
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.clear()
    fake_provider.script(Answer(""), Answer(GERMAN), Answer(NO_FORMAT))
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 1
    err = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert err == ["error: answers: stopped early: 3 of the first 3 answers were rejected (empty 1, format 1, "
                   "language 1), more than gate.stop_share 0.5 of gate.stop_after 4; check the parent, its "
                   "prompt and [gate] before paying for more (a rerun goes on; gate.stop_after = 0 turns this off)"]
    # Nothing new is sent; the request in flight, if any, is kept.
    sent = len(fake_provider.chat_requests())
    assert sent in (3, 4) and len(project.records("answers")) == sent
    # `gate` records the verdicts: 2 rejected of 4 is not more than half.
    r = cli(["-C", project.dir, "gate"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"gate: {sent - 1} answers, {sent - 1} verdicts written (2 excluded from training)")
    # Its own early stop: a stricter share stops it at the second rejection, before the grader is asked.
    text = (project.dir / "overbrainer.toml").read_text().replace('format_regex = "^ANSWER: "', 'format_regex = "^X"')
    (project.dir / "overbrainer.toml").write_text(text + "stop_share = 0.25\n")
    r = cli(["-C", project.dir, "gate"], env=project.env)
    assert r.returncode == 1
    assert "error: gate: stopped early: 2 of the first 2 answers were rejected (" in r.stderr
    assert r.stdout.startswith("gate: stopped after 2 of ")


def _garble_in_place(path) -> None:
    """Invalid JSON in place, with the same inode, size and times: only a reader notices."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(b"#" * st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_run_with_the_gate_and_nothing_to_do_reads_no_data_file(project, fake_provider, cli):
    _gated_project(project, fake_provider)
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.script(Answer(GERMAN))
    first = cli(["-C", project.dir, "run"], env=project.env)
    assert first.returncode == 0, first.stderr
    for name in ("subtopics", "questions", "answers", "gate"):
        _garble_in_place(project.data / f"{name}.jsonl")
    fake_provider.clear()
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[3].startswith("gate: 0 answers, 0 verdicts written; 10 skipped, 0 failed;")
    assert r.stdout.splitlines()[-2] == first.stdout.splitlines()[-2] == (
        "split: 8 train, 1 eval, 0 excluded, 1 gated (language 1), 0 orphaned")
    assert fake_provider.chat_requests() == []


def test_a_gate_killed_mid_grading_then_rerun_grades_each_answer_once_more_at_most(project, fake_provider, cli,
                                                                                   tmp_path):
    """kill -9 while grader requests are in flight: the verdicts written stay, the rerun grades
    only the answers without one (those in flight were never written), and the outcome is the
    uninterrupted one's."""
    _gated_project(project, fake_provider, extra=['[roles.grader]', 'provider = "fake"', 'model = "grader-model"'],
                   pipeline={"concurrency": 2})
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.script(Answer(GERMAN), Answer(GOOD + " MEDIOCRE"), Answer(GOOD + " MEDIOCRE, again"))
    assert cli(["-C", project.dir, "answers"], env=project.env).returncode == 0
    grade = fake_provider.responder
    cond, state = threading.Condition(), {"passed": 0, "held": 0, "hold": True}

    def holding(req):
        if "You grade one answer" in req.body["messages"][-1]["content"]:
            with cond:
                if state["hold"] and state["passed"] >= 3:
                    state["held"] += 1
                    cond.wait_for(lambda: not state["hold"], timeout=60)
                state["passed"] += 1
        return grade(req)

    fake_provider.responder = holding
    home = tmp_path / "home"
    proc = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "gate"],
                            env=clean_env(project.env, home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        signalled_when(proc, lambda: state["held"] == 2 and len(project.records("gate")) == 13,
                       "3 grades written, 2 held", signum=signal.SIGKILL, timeout=60)
    finally:
        with cond:
            state["hold"] = False
            cond.notify_all()
    assert proc.returncode == -signal.SIGKILL
    fake_provider.clear()
    r = cli(["-C", project.dir, "gate"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert len(fake_provider.chat_requests()) == 6  # the 9 usable answers less the 3 graded before the kill
    verdicts = project.records("gate")
    assert sorted(v["check"] for v in verdicts) == ["grader"] * 9 + ["rules"] * 10
    assert len({v["id"] for v in verdicts if v["check"] == "grader"}) == 9
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert "3 gated (language 1, grader 2)" in r.stdout
