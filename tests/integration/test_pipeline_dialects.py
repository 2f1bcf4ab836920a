"""Stages against strict dialect fakes: a moderated question is excluded and the stage goes on,
bills are the cost (the estimate beside them), a list the balance cannot cover is asked once with
what it covers or the stage stops with `credits: …`; `config check` shows the dialect, and a
thinking setting the reference refuses is a configuration error (exit 2)."""

from __future__ import annotations

import json
import logging

import pytest

from tests.fixtures.provider import Fault

PARENT = "deepseek/deepseek-r1"
GENERATOR = "qwen/qwen3-235b"


def _openrouter(project, fake_provider, **kw):
    fake_provider.dialect = "openrouter"
    project.write(dialect="openrouter", **kw)


def test_a_moderated_question_is_excluded_and_the_stage_goes_on(project, fake_provider, caplog):
    _openrouter(project, fake_provider, topics=1, subtopics=1, questions=3, pipeline={"concurrency": 1})
    assert project.stage("questions")[2] is None
    fake_provider.clear()
    fake_provider.script(Fault.moderation(("violence",)))
    with caplog.at_level(logging.WARNING):
        texts, datas, err = project.stage("answers")
    assert err is None and datas[0]["done"] == 2 and datas[0]["excluded"] == 1
    answers = project.records("answers")
    flagged = [a for a in answers if a["meta"]["excluded"] is not None]
    assert len(answers) == 3 and len(flagged) == 1
    assert flagged[0]["meta"]["excluded"] == "refused" and flagged[0]["meta"]["finish_reason"] == "content_filter"
    assert flagged[0]["messages"][-1]["content"] == ""
    assert f"answers: {flagged[0]['id']}: the provider's moderation flagged the question (violence)" in caplog.text
    fake_provider.clear()  # excluded counts as answered: the flagged question is not sent again
    assert project.stage("answers")[2] is None and fake_provider.count == 0


def test_bills_are_the_cost_the_estimate_stays_beside_and_a_gap_is_said_once(project, fake_provider, caplog):
    _openrouter(project, fake_provider, topics=1, subtopics=1, questions=4)
    assert project.stage("questions")[2] is None
    fake_provider.models = {PARENT: (1.0, 2.0, 0.0001)}
    fake_provider.billing_factor = 1.5
    with caplog.at_level(logging.WARNING):
        texts, datas, err = project.stage("answers")
    assert err is None
    bills = estimate = 0.0
    for a in project.records("answers"):
        meta = a["meta"]
        one = (meta["input_tokens"] * 1.0 + meta["output_tokens"] * 2.0) / 1e6 + 0.0001
        estimate += one
        bills += one * 1.5
    line = project.history()[-1]
    assert line["cost"] == pytest.approx(bills) and line["cost_estimate"] == pytest.approx(estimate)
    assert datas[0]["cost"] == pytest.approx(bills, abs=1e-8) and datas[0]["cost_estimate"] == pytest.approx(estimate)
    assert texts[0].endswith(f"cost ${bills:.4f}")
    warned = [r.getMessage() for r in caplog.records if "the provider billed" in r.getMessage()]
    assert warned == [f"answers: the provider billed ${bills:.4f}; the listed prices give ${estimate:.4f} (33% "
                      "less); the summary counts what was billed"]
    # The generator is not in the listing: its bills ($0 here) are still the cost, where the
    # listed prices alone would have left it unknown; no estimate to keep beside them.
    questions = [h for h in project.history() if h["stage"] == "questions"][0]
    assert questions["cost"] == 0 and "cost_estimate" not in questions


def test_a_list_the_balance_cannot_cover_is_asked_once_with_what_it_covers(project, fake_provider):
    _openrouter(project, fake_provider, topics=1, subtopics=3)
    fake_provider.script(Fault.cannot_afford(16384, 3919))
    texts, datas, err = project.stage("subtopics")
    assert err is None and len(project.records("subtopics")) == 3
    assert [r.body["max_tokens"] for r in fake_provider.chat_requests()] == [16384, 3919]


def test_a_balance_below_what_a_list_needs_stops_the_command(project, fake_provider, cli):
    _openrouter(project, fake_provider, topics=2, subtopics=2, pipeline={"concurrency": 1})
    fake_provider.script(Fault.cannot_afford(16384, 120))
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 77, r.stderr  # a person must add credit
    assert r.stdout.startswith("subtopics: stopped after 1 of 2 topics: credits; 0 subtopics written; 0 skipped, "
                               "1 failed; ")
    assert "error: credits: provider fake: This request requires more credits, or fewer max_tokens. You " \
           "requested up to 16384 tokens, but can only afford 120." in r.stderr
    # Not retried with what the balance covers (a worker may have taken the next topic already).
    sent = fake_provider.chat_requests()
    assert [q.body["max_tokens"] for q in sent] == [16384] * len(sent) and len({q.prompt for q in sent}) == len(sent)


def test_config_check_says_which_dialect_and_whether_it_was_guessed(project, cli):
    project.write()
    r = cli(["-C", project.dir, "config", "check", "--json"], env=project.env)
    assert r.returncode == 0, r.stderr
    provider = json.loads(r.stdout)["providers"]["fake"]
    assert (provider["dialect"], provider["dialect_guessed"]) == ("generic", True)
    env = {**project.env, "OVERBRAINER_PROVIDERS__FAKE__DIALECT": "ollama"}
    r = cli(["-C", project.dir, "config", "check"], env=env)
    assert r.returncode == 0 and "providers.fake.dialect = ollama\n" in r.stdout
    r = cli(["-C", project.dir, "config", "check"], env={**env, "OVERBRAINER_PROVIDERS__FAKE__DIALECT": "lmstudio"})
    assert r.returncode == 2
    assert "providers.fake.dialect: expected one of openai, openrouter, llamacpp, ollama, vllm, generic " \
           "(from OVERBRAINER_PROVIDERS__FAKE__DIALECT)" in r.stderr


def test_a_thinking_setting_the_reference_refuses_is_a_configuration_error(project, fake_provider, cli):
    project.write(protocol="anthropic", generator={"model": "claude-sonnet-4-5", "reasoning": True,
                                                    "thinking": "adaptive"})
    for args in (["config", "check"], ["subtopics"]):
        r = cli(["-C", project.dir, *args], env=project.env)
        assert r.returncode == 2, r.stderr
        assert 'roles.generator.thinking: claude-sonnet-4-5 has no adaptive thinking (it came with Claude 4.6); ' \
               'use "enabled" with roles.generator.thinking_budget' in r.stderr
    assert fake_provider.count == 0
    project.write(protocol="anthropic", generator={"model": "claude-sonnet-4-5", "reasoning": True,
                                                    "thinking_budget": 2048, "max_tokens": 4096})
    r = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "thinking_budget: 2048, thinking: enabled (by model family))" in r.stdout
