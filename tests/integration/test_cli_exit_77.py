"""Exit 77 (sysexits' EX_NOPERM) when a person must act — a refused or missing key, spent credit,
prompts the provider's moderation refuses — and exit 1 ("failed, try again later") for a
provider that is down, through the real command, as a cron wrapper's `case $?` sees them
(docs/exit-codes.md)."""

from __future__ import annotations

import pytest

from tests.fixtures.provider import Fault, closed_url

KEY_VAR = "OVERBRAINER_PROVIDERS__FAKE__API_KEY"


def _error(r) -> str:
    return r.stderr.strip().splitlines()[-1]


def test_a_refused_key_exits_77_a_dead_port_1(project, fake_provider, cli):
    project.write(topics=2, pipeline={"concurrency": 1, "max_retries": 0})
    fake_provider.api_key = "sk-the-right-one"
    r = cli(["-C", project.dir, "subtopics"], env={**project.env, KEY_VAR: "sk-revoked-123"})
    assert r.returncode == 77, r.stderr
    assert _error(r) == f"error: provider fake: authentication failed; check its API key ({KEY_VAR})"
    assert "sk-revoked-123" not in r.stdout + r.stderr
    r = cli(["-C", project.dir, "subtopics"], env=project.env)  # no key set, and the provider wants one
    assert r.returncode == 77, r.stderr
    assert _error(r) == f"error: provider fake: authentication failed; it has no API key: set {KEY_VAR}"
    url = closed_url()
    r = cli(["-C", project.dir, "subtopics"], env={**project.env, "OVERBRAINER_PROVIDERS__FAKE__BASE_URL": url})
    assert r.returncode == 1, r.stderr  # a dead provider: try again later
    assert "request failed (connection refused)" in r.stderr
    fake_provider.api_key = None
    fake_provider.responder = lambda req: Fault.server_error()
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 1, r.stderr  # a provider failing: try again later
    assert project.records("subtopics") == []


@pytest.mark.parametrize("protocol,fault", [
    ("openai", lambda: Fault(402, {"error": {"message": "Insufficient credits"}})),
    ("openai", Fault.insufficient_quota),  # OpenAI's 429 that is no rate limit
    ("anthropic", Fault.credit_balance_low),
    ("anthropic", Fault.usage_limit_reached),
    ("anthropic", lambda: Fault.usage_limit_reached(workspace=True)),
])
def test_spent_credit_exits_77(project, fake_provider, cli, protocol, fault):
    project.write(topics=1, protocol=protocol, pipeline={"concurrency": 1},
                  generator_model="claude-sonnet-4-5" if protocol == "anthropic" else "qwen/qwen3-235b")
    fake_provider.responder = lambda req: fault()
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 77, r.stderr
    assert _error(r).startswith("error: credits: provider fake: ")
    assert r.stdout.startswith("subtopics: stopped after 1 of 1 topics: credits;")
    assert len(fake_provider.chat_requests()) == 1  # not retried


def test_prompts_the_moderation_refuses_exit_77_other_failures_1(project, fake_provider, cli):
    """A list prompt the provider's moderation flags is flagged again on every run: when it is
    what every failed item met, a person must change it (77); with another failure among them,
    running again may help (1)."""
    fake_provider.dialect = "openrouter"
    project.write(topics=["war", "peace"], dialect="openrouter", pipeline={"concurrency": 1, "max_retries": 0})
    fake_provider.responder = lambda req: Fault.moderation(("violence",)) if "war" in req.prompt else None
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 77, r.stderr
    assert _error(r) == ("error: 1 subtopics item(s) failed: the provider's moderation flagged their prompt, as it "
                         "will on every run; change the topic's description or prompts/subtopics.txt, or the "
                         "generator's model")
    assert {s["topic"] for s in project.records("subtopics")} == {"peace"}  # the other topic went on
    project.write(topics=["war", "peace", "calm"], dialect="openrouter", pipeline={"concurrency": 1, "max_retries": 0})
    fake_provider.responder = lambda req: (Fault.moderation(("violence",)) if "war" in req.prompt
                                           else Fault.bad_request("something else") if "calm" in req.prompt else None)
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert r.returncode == 1, r.stderr
    assert _error(r) == "error: 2 subtopics item(s) failed; run the command again to retry them"
