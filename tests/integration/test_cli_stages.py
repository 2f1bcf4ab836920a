"""The stage commands end to end: the real CLI in a subprocess against the fake provider."""

from __future__ import annotations

import json
import logging
import re

import pytest

from tests.fixtures.provider import Answer
from tests.fixtures.timescale import scaled_env


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_run_end_to_end_then_history(project, fake_provider, cli, protocol):
    # Anthropic's model listing carries no prices (nor does the fake's): there they are configured.
    priced = protocol == "anthropic"
    project.write(protocol=protocol, parent={"price": {"input": 1.0, "output": 2.0}} if priced else None,
                  generator={"price": {"input": 0.5, "output": 0.5}} if priced else None)
    fake_provider.models = {"deepseek/deepseek-r1": (1.0, 2.0), "qwen/qwen3-235b": (0.5, 0.5)}
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["subtopics", "questions", "answers", "split", "kept"]
    # Each summary counts like things: the stage's items, then what it wrote.
    assert lines[0].startswith("subtopics: 2 topics, 4 subtopics written; 0 skipped, 0 failed; tokens ")
    assert lines[1].startswith("questions: 4 subtopics, 12 questions written; 0 skipped, 0 failed; tokens ")
    assert lines[2].startswith("answers: 12 questions, 12 answers written; 0 skipped, 0 failed; tokens ")
    assert re.search(r"; cost \$\d+\.\d{4}$", lines[2])  # the parent is priced
    assert lines[3] == "split: 11 train, 1 eval, 0 excluded, 0 orphaned"
    assert re.fullmatch(r"kept: \d+ of \d+ paid output tokens \(\d+\.\d%\) are in train/eval examples", lines[4])
    assert "no [training] section: run stops after split" in r.stderr
    assert "answers: 12 to process" in r.stderr and "answers: finished" in r.stderr
    hist = project.history()
    assert [(h["stage"], h["status"]) for h in hist] == [
        ("subtopics", "ok"), ("questions", "ok"), ("answers", "ok"), ("split", "ok")]
    kept = sum(a["meta"]["output_tokens"] for a in project.records("answers"))  # every answer went to train/eval
    assert hist[3]["split"] == {"train": 11, "eval": 1, "orphaned": 0, "kept_output_tokens": kept}
    assert hist[3]["model"] is None
    paths = {r.path for r in fake_provider.chat_requests()}
    assert paths == {"/messages" if protocol == "anthropic" else "/chat/completions"}
    if protocol == "anthropic":  # no thinking asked (reasoning = false): no thinking block comes back
        assert {a["meta"]["reasoning_kind"] for a in project.records("answers")} == {"none"}

    # A second run resumes: every stage skips what is on disk.
    fake_provider.clear()
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == [
        "subtopics: 0 topics, 0 subtopics written; 2 skipped, 0 failed; tokens 0 in, 0 out; cost $0",
        "questions: 0 subtopics, 0 questions written; 4 skipped, 0 failed; tokens 0 in, 0 out; cost $0",
        "answers: 0 questions, 0 answers written; 12 skipped, 0 failed; tokens 0 in, 0 out; cost $0",
    ]
    assert fake_provider.chat_requests() == []

    r = cli(["-C", project.dir, "history"], env=project.env)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("subtopics  2 run(s), 2 topics done, 0 failed; tokens ")
    assert out[2].startswith("answers    2 run(s), 12 questions done, 0 failed; tokens ")
    assert out[-2].startswith("total      8 run(s); tokens ")
    assert out[-1] == lines[4].replace("kept: ", "kept       ")
    r = cli(["-C", project.dir, "history", "--all"], env=project.env)
    assert len(r.stdout.splitlines()) == 8
    assert any(line.split()[1:4] == ["split", "ok", "-"]
               and line.endswith(f"train 11, eval 1, excluded 0, orphaned 0; {kept} output tokens kept; $0")
               for line in r.stdout.splitlines())


def test_json_output_one_object_per_stage(project, fake_provider, cli):
    r = cli(["-C", project.dir, "--json", "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o["stage"] for o in objs] == ["subtopics", "questions", "answers", "split", "kept"]
    assert set(objs[2]) == {"stage", "unit", "records", "total", "done", "skipped", "failed", "excluded",
                            "written", "stopped", "interrupted", "input_tokens", "output_tokens", "cost"}
    assert (objs[0]["unit"], objs[0]["done"], objs[0]["records"], objs[0]["written"]) == (
        "topics", 2, "subtopics", 4)
    assert objs[2]["stopped"] is False
    assert objs[3]["excluded_by_reason"] == {"truncated": 0, "empty": 0, "refused": 0, "no_raw_reasoning": 0}
    assert all(json.loads(line)["event"] for line in r.stderr.splitlines())


def test_stage_by_stage_with_resume_after_each(project, fake_provider, cli):
    for stage, line in [("subtopics", "subtopics: 2 topics, 4 subtopics written;"),
                        ("questions", "questions: 4 subtopics, 12 questions written;"),
                        ("answers", "answers: 12 questions, 12 answers written;"), ("split", "split: 11 train")]:
        r = cli(["-C", project.dir, stage], env=project.env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(line)
    r = cli(["-C", project.dir, "questions", "--topic", "topic1"], env=project.env)
    assert r.stdout.startswith("questions: 0 subtopics, 0 questions written; 2 skipped")


def test_split_needs_no_provider_and_refuses_force(project, fake_provider, cli):
    r = cli(["-C", project.dir, "split"], env={})  # no base URL at all
    assert r.returncode == 1, r.stderr  # no train example written
    assert r.stdout == "split: 0 train, 0 eval, 0 excluded, 0 orphaned\n"
    assert "OVERBRAINER_PROVIDERS" not in r.stderr
    r = cli(["-C", project.dir, "split", "--force"], env=project.env)
    assert r.returncode == 2


def test_unknown_topic_and_missing_url(project, cli):
    r = cli(["-C", project.dir, "answers", "--topic", "nope"], env=project.env)
    assert r.returncode == 2 and "unknown topic `nope`" in r.stderr
    assert project.history() == []
    r = cli(["-C", project.dir, "subtopics"], env={})
    assert r.returncode == 2
    assert "OVERBRAINER_PROVIDERS__FAKE__BASE_URL" in r.stderr


def test_failed_items_exit_1_after_the_summary(project, fake_provider, cli):
    project.write(topics=1, subtopics=1, pipeline={"max_retries": 0})
    fake_provider.script(Answer(content="no list here"))
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 1
    assert r.stdout.startswith("subtopics: 0 topics, 0 subtopics written; 0 skipped, 1 failed")
    assert len(r.stdout.splitlines()) == 1  # the run stops at the first stage that fails
    assert "error: 1 subtopics item(s) failed; run the command again to retry them" in r.stderr


def test_dataset_stats_and_reject(project, fake_provider, cli):
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    r = cli(["-C", project.dir, "--json", "dataset", "stats"], env=project.env)
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    assert [t["subtopics"] for t in stats["topics"]] == [2, 2]
    assert [t["answered"] for t in stats["topics"]] == [6, 6]
    sub = next(s for s in project.records("subtopics") if s["topic"] == "topic0")
    r = cli(["-C", project.dir, "dataset", "reject", sub["id"]], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "removed 1 subtopic, 3 questions, 3 answers" in r.stdout
    assert [x["id"] for x in project.records("rejected")] == [sub["id"]]
    r = cli(["-C", project.dir, "dataset", "reject", sub["id"]], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("was already rejected: nothing to do\n")
    r = cli(["-C", project.dir, "dataset", "stats"], env=project.env)
    assert r.stdout.splitlines()[0].startswith("topic0: 1 subtopic, 3 questions, 3 answered")
    # An ID that names nothing is a usage error, as an unknown --topic is: exit 2, one line naming it.
    r = cli(["-C", project.dir, "dataset", "reject", "DEADBEEF"], env=project.env)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == f"error: no subtopic, question or answer has the ID deadbeef in {project.dir / 'data'}"
    # The next run regenerates the missing subtopic, but never the rejected one.
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert sub["id"] not in {s["id"] for s in project.records("subtopics")}
    assert len(project.records("answers")) == 12


def test_run_without_training_stops_after_split(project, fake_provider, cli):
    project.write()
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "no [training] section: run stops after split" in r.stderr
    assert not (project.dir / "runs").exists()


def test_run_trains_after_split_when_training_is_set(project, fake_provider, fake_axolotl, cli):
    project.write(topics=1, subtopics=2, questions=3, training=fake_axolotl.venv)
    env = {**project.env, **scaled_env(0.05)}
    r = cli(["-C", project.dir, "run"], env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == ["subtopics", "questions", "answers", "split"]
    adapter = [line for line in lines if line.startswith("train: adapter in runs/")]
    assert len(adapter) == 1
    out = project.dir / adapter[0].removeprefix("train: adapter in ")
    assert (out / "adapter_model.safetensors").is_file()


def test_run_reloads_the_config_between_stages(project, fake_provider, caplog):
    from overbrainer.errors import ConfigError
    from overbrainer.pipeline.run_flow import ConfigWatch, run_all

    project.write(topics=1, subtopics=1, questions=2)
    toml = project.dir / "overbrainer.toml"
    first = project.config()
    watch = ConfigWatch(project.dir, project.config)
    seen = []

    def report(text, data):
        seen.append((data["stage"], (watch.config or first).pipeline.concurrency))
        if data["stage"] == "subtopics":
            toml.write_text(toml.read_text().replace("concurrency = 4", "concurrency = 16"))

    with caplog.at_level(logging.INFO):
        run_all(project.session(report).with_config(first), watch=watch)
    assert seen == [("subtopics", 4), ("questions", 16), ("answers", 16), ("split", 16)]
    assert caplog.text.count("config reloaded") == 1

    def breaking(text, data):
        toml.write_text(toml.read_text().replace("concurrency = 16", "concurrency = 0"))

    with pytest.raises(ConfigError) as e:
        run_all(project.session(breaking).with_config(project.config()), watch=ConfigWatch(project.dir, project.config))
    assert str(e.value).startswith("the configuration changed and cannot be used; the run stops")
    assert [h["stage"] for h in project.history()][-1] == "subtopics"
