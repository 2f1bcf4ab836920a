"""Stage commands that fail early, end to end (the real CLI against the fake provider): `--force`
removes nothing before the provider answered, a dead provider stops the stage at once, and a
stage that stops says so."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from tests.fixtures.provider import Fault, closed_url


# Written by every writing command whatever happens: the lock holds its holder's PID, and the
# history gains the failed stage's line (0 tokens, $0).
_BOOKKEEPING = {".overbrainer/lock", ".overbrainer/history.jsonl"}


def _snapshot(root) -> dict[str, str]:
    """Every file under the project → its sha256 (the bookkeeping files left out)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and str(p.relative_to(root)) not in _BOOKKEEPING}


@pytest.fixture
def answered(project, cli):
    """A project with every stage's output on disk (2 topics, 12 answers)."""
    project.write(pipeline={"max_retries": 0, "concurrency": 2})
    for stage in ("questions", "answers"):  # in-process: quicker than the CLI
        assert project.stage(stage)[2] is None
    assert len(project.records("answers")) == 12
    return project


CAUSES = {"unset base_url": "OVERBRAINER_PROVIDERS__FAKE__BASE_URL", "401": "authentication failed",
          "nothing listening": "connection refused", "VAULT_ADDR unset": "VAULT_ADDR"}


@pytest.mark.parametrize("case", list(CAUSES))
def test_force_removes_nothing_until_the_provider_answered(answered, fake_provider, cli, case):
    project = answered
    env = dict(project.env)
    if case == "unset base_url":
        del env["OVERBRAINER_PROVIDERS__FAKE__BASE_URL"]
    elif case == "401":
        fake_provider.api_key = "sk-the-right-one"
        env["OVERBRAINER_PROVIDERS__FAKE__API_KEY"] = "sk-wrong-4242"
    elif case == "nothing listening":
        env["OVERBRAINER_PROVIDERS__FAKE__BASE_URL"] = closed_url()
    else:
        env["OVERBRAINER_PROVIDERS__FAKE__API_KEY"] = "vault:secret/overbrainer#fake"
    for command in (["answers", "--force"], ["questions", "--force"], ["subtopics", "--force"]):
        before = _snapshot(project.dir)
        history = len(project.history())
        r = cli(["-C", project.dir, *command], env=env)
        assert r.returncode == {"401": 77, "unset base_url": 2, "VAULT_ADDR unset": 2}.get(case, 1), r.stderr
        assert CAUSES[case] in r.stderr, r.stderr
        assert _snapshot(project.dir) == before, (command, r.stderr)
        assert "--force: removed" not in r.stderr
        assert [h["status"] for h in project.history()[history:]] in ([], ["failed"])
        assert all(h["input_tokens"] == 0 for h in project.history()[history:])
    assert len(project.records("answers")) == 12


def test_force_removes_the_topics_output_once_the_provider_answered(answered, fake_provider, cli):
    project = answered
    old = {a["id"]: a["messages"][-1]["content"] for a in project.records("answers")}
    fake_provider.responder = lambda req: None
    r = cli(["-C", project.dir, "answers", "--force", "--topic", "topic0"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "--force: removed 6 record(s) of topic0 from answers.jsonl" in r.stderr
    assert r.stdout.startswith("answers: 6 questions, 6 answers written;")
    assert sorted(a["id"] for a in project.records("answers")) == sorted(old)


def test_dead_provider_stops_the_stage_and_says_so(project, cli):
    # No retries, 2 at a time: the 6th refused attempt (3 × concurrency) stops the stage.
    project.write(topics=8, pipeline={"max_retries": 0, "concurrency": 2})
    url = closed_url()
    project.env["OVERBRAINER_PROVIDERS__FAKE__BASE_URL"] = url
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 1
    assert (f"error: provider fake ({url}) is unreachable: connection refused; nothing more was sent"
            in r.stderr)
    assert r.stdout.startswith("subtopics: stopped after ")
    assert " of 8 topics: provider unreachable (connection refused);" in r.stdout
    assert r.stderr.count("request failed (connection refused)") <= 7  # the price lookup's + 6 at most
    assert project.history()[-1]["status"] == "failed"


def test_two_items_against_a_closed_port_end_unreachable_within_seconds(project, cli):
    """The defaults (concurrency 8, 5 retries): 12 attempts in all would never make the streak
    of 24; a provider never reached is called dead after 3 refused connections."""
    project.write(topics=2, pipeline={"max_retries": 5, "concurrency": 8})
    url = closed_url()
    project.env["OVERBRAINER_PROVIDERS__FAKE__BASE_URL"] = url
    started = time.monotonic()
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert time.monotonic() - started < 20
    assert r.returncode == 1
    assert (f"error: provider fake ({url}) is unreachable: connection refused; nothing more was sent"
            in r.stderr)
    assert "item(s) failed" not in r.stderr
    assert r.stdout.startswith("subtopics: stopped after 2 of 2 topics: provider unreachable (connection refused);")
    # The log says the stage stopped, and no progress line counts the items that met the stop.
    assert "WARN subtopics: stopped: provider unreachable (connection refused)" in r.stderr
    assert "subtopics: finished" not in r.stderr and "subtopics: 1/2" not in r.stderr
    assert "subtopics: 2/2" not in r.stderr


def test_auth_failure_names_the_key_variable_and_the_summary_says_stopped(project, fake_provider, cli):
    project.write(topics=2, pipeline={"concurrency": 1})
    fake_provider.api_key = "sk-the-right-one"
    project.env["OVERBRAINER_PROVIDERS__FAKE__API_KEY"] = "sk-wrong-SECRET-77"
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 77  # a person must act: a refused key is no flaky night
    # The topic that met the error is not left out of the counts: it failed.
    assert r.stdout.startswith("subtopics: stopped after 1 of 2 topics: authentication failed; "
                               "0 subtopics written; 0 skipped, 1 failed;")
    assert ("error: provider fake: authentication failed; check its API key "
            "(OVERBRAINER_PROVIDERS__FAKE__API_KEY)") in r.stderr
    assert "sk-wrong-SECRET-77" not in r.stdout + r.stderr
    r = cli(["-C", project.dir, "--json", "subtopics"], env=project.env)
    assert r.returncode == 77 and json.loads(r.stderr.splitlines()[-1])["exit_code"] == 77
    summary = json.loads(r.stdout.splitlines()[0])
    assert summary["stopped"] is True and summary["reason"] == "authentication failed"
    assert (summary["done"], summary["failed"], summary["total"], summary["unit"]) == (0, 1, 2, "topics")
    assert [h["failed"] for h in project.history()] == [1, 1]


def test_a_5xx_storm_is_cut_short(project, fake_provider, cli):
    # Every request answers 503 (retry at once): after 3 × concurrency (6) attempts with no
    # success in between, nothing more is sent, where the retries alone would send 4 × 6.
    project.write(topics=4, pipeline={"max_retries": 5, "concurrency": 2})
    fake_provider.responder = lambda req: Fault(503, {"error": {"message": "overloaded"}}, {"Retry-After": "0"})
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 1
    assert "is unreachable: HTTP 503: overloaded; nothing more was sent" in r.stderr
    assert 6 <= len(fake_provider.chat_requests()) <= 7  # one more may have been on the wire already
