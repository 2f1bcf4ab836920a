"""Each dialect's bodies against its strict fake (tests/fixtures/provider_rules.py), and what each
provider's errors and bills mean to the client."""

from __future__ import annotations

import json

import pytest
import requests

from overbrainer.config.model import Pipeline, Provider, Role
from overbrainer.errors import ConfigError
from overbrainer.llm import http
from overbrainer.llm.client import connect
from overbrainer.llm.errors import CreditsError, LlmError
from overbrainer.llm.types import ChatRequest
from tests.fixtures.provider import Answer, Fault, llm_session

MODELS = {"openai": "gpt-5-mini", "openrouter": "deepseek/deepseek-r1", "llamacpp": "smollm2",
          "ollama": "qwen3:8b", "vllm": "Qwen/Qwen3-8B", "generic": "m1"}
TOKEN_FIELD = {"openai": "max_completion_tokens", "openrouter": "max_tokens", "llamacpp": "max_tokens",
               "ollama": "max_tokens", "vllm": "max_completion_tokens", "generic": "max_tokens"}
LIST = "Give a JSON array of 3 strings: subtopics of Rust."
VERDICT = "Which answer is better, A or B? Reply with a JSON object."
KINDS = {
    "generator": ({}, ChatRequest(LIST, structured=True)),
    "parent": ({}, ChatRequest("What is a borrow?", system="Be exact.")),
    "parent reasoning": ({"reasoning": True}, ChatRequest("What is a borrow?", system="Be exact.")),
    "parent reasoning high": ({"reasoning": True, "reasoning_effort": "high"}, ChatRequest("What is a borrow?")),
    "parent reasoning off": ({"reasoning_effort": "none"}, ChatRequest("What is a borrow?")),
    "judge": ({"temperature": 1.0}, ChatRequest(VERDICT, structured=True, schema="verdict")),
}


def make(fake, dialect=None, protocol="openai", *, max_retries=2, **role_kw):
    provider = Provider("fake", protocol, fake.url, dialect=dialect)
    role = dict(model=MODELS.get(dialect, "m1"), reasoning=False, max_tokens=64, temperature=None,
                reasoning_effort=None, thinking_budget=None, thinking=None)
    role.update(role_kw)
    return connect(provider, Role("fake", **role), Pipeline(concurrency=2, max_retries=max_retries, request_timeout_secs=10),
                   llm=llm_session())


@pytest.fixture(autouse=True)
def fresh_channels(monkeypatch):
    monkeypatch.setattr(http, "BACKOFF_BASE", 0.01)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dialect", list(MODELS))
def test_each_dialects_bodies_are_what_its_server_takes(fake_provider, dialect, kind):
    """Generator, parent and judge bodies, with and without reasoning, accepted by the dialect's
    strict fake, none of their fields silently dropped; reasoning comes back only when asked, and
    only where that server puts it (OpenAI's chat completions never show it)."""
    fake_provider.dialect = dialect
    role_kw, request = KINDS[kind]
    r = make(fake_provider, dialect, **role_kw).chat(request)
    sent = fake_provider.chat_requests()[-1].body
    assert fake_provider.ignored == [], fake_provider.ignored
    assert sent[TOKEN_FIELD[dialect]] == 64 and r.finish_reason == "stop"
    asked = role_kw.get("reasoning", False)
    if request.structured:
        assert json.loads(r.content)["items"] and "response_format" in sent
    elif (asked and dialect != "openai") or dialect == "generic":  # a generic server shows what it thinks
        assert r.reasoning_kind == "raw" and r.reasoning.startswith("Thinking about")
    else:
        assert r.reasoning is None and r.reasoning_kind == "none"
    if dialect == "openai" and asked:
        assert r.reasoning_tokens == 5  # thought, but never shown


def test_the_strict_fakes_refuse_in_the_providers_own_words(fake_provider):
    def post(path, body, dialect="generic"):
        fake_provider.dialect = dialect
        r = requests.post(fake_provider.url + path, json=body, timeout=5)
        return r.status_code, r.json()

    msgs = [{"role": "user", "content": "hi"}]
    status, doc = post("/chat/completions", {"model": "gpt-5", "messages": msgs, "max_tokens": 9}, "openai")
    assert status == 400 and doc["error"]["message"].startswith("Unsupported parameter: 'max_tokens' is not "
                                                                "supported with this model.")
    status, doc = post("/chat/completions", {"model": "gpt-4.1", "messages": msgs, "reasoning": {"effort": "low"}},
                       "openai")
    assert (status, doc["error"]["message"]) == (400, "Unrecognized request argument supplied: reasoning")
    status, doc = post("/chat/completions", {"model": "q", "messages": msgs, "reasoning_effort": "max"}, "ollama")
    assert status == 400 and doc["error"]["message"].startswith("invalid reasoning value: 'max'")
    status, _ = post("/chat/completions", {"model": "q", "messages": msgs, "max_completion_tokens": 9}, "ollama")
    assert status == 200 and fake_provider.ignored == ["max_completion_tokens"]
    status, doc = post("/chat/completions", {"model": "q", "messages": msgs, "reasoning_effort": "extreme"}, "vllm")
    assert status == 400 and doc["error"]["type"] == "BadRequestError"
    status, doc = post("/chat/completions", {"model": "q", "messages": msgs,
                                             "reasoning": {"effort": "low", "max_tokens": 9}}, "openrouter")
    assert status == 400
    base = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "messages": msgs}
    status, doc = post("/messages", {**base, "thinking": {"type": "adaptive"}})
    assert (status, doc["error"]["message"]) == (400, "adaptive thinking is not supported on this model")
    status, doc = post("/messages", {**base, "model": "claude-opus-4-7",
                                     "thinking": {"type": "enabled", "budget_tokens": 2048}})
    assert status == 400 and doc["error"]["message"].startswith('"thinking.type.enabled" is not supported')
    status, doc = post("/messages", {**base, "reasoning_effort": "low"})
    assert (status, doc["error"]["message"]) == (400, "reasoning_effort: Extra inputs are not permitted")


@pytest.mark.parametrize("model, role_kw, thinking", [
    ("claude-sonnet-4-5", {"thinking_budget": 2048}, {"type": "enabled", "budget_tokens": 2048}),
    ("claude-opus-4-6", {}, {"type": "adaptive"}),
    ("claude-opus-4-6", {"thinking_budget": 2048}, {"type": "enabled", "budget_tokens": 2048}),
    ("claude-opus-4-7", {"reasoning_effort": "low"}, {"type": "adaptive"}),
    ("claude-sonnet-5", {}, {"type": "adaptive"}),
])
def test_anthropic_thinking_by_family_is_accepted(fake_provider, model, role_kw, thinking):
    client = make(fake_provider, protocol="anthropic", model=model, reasoning=True, max_tokens=4096, **role_kw)
    r = client.chat(ChatRequest("Explain lifetimes", system="s"))
    sent = fake_provider.chat_requests()[-1].body
    assert sent["thinking"] == thinking
    # Claude 4.7 and later leave the thinking out of the answer unless asked to show it.
    assert r.reasoning_kind == ("redacted" if model in ("claude-opus-4-7", "claude-sonnet-5") else "summary")
    plain = make(fake_provider, protocol="anthropic", model=model, max_tokens=4096).chat(ChatRequest("hi"))
    assert "thinking" not in fake_provider.chat_requests()[-1].body and plain.reasoning_kind == "none"


@pytest.mark.parametrize("model, role_kw, problem", [
    ("claude-opus-4-7", {"thinking_budget": 2048}, "claude-opus-4-7 refuses a fixed thinking budget"),
    ("claude-sonnet-4-5", {}, "claude-sonnet-4-5 thinks only with a fixed budget"),
    ("claude-haiku-4-5", {"reasoning_effort": "low"}, "claude-haiku-4-5 thinks only with a fixed budget"),
])
def test_a_refused_anthropic_combination_is_stopped_before_any_request(fake_provider, model, role_kw, problem):
    with pytest.raises(ConfigError, match=problem):
        client = make(fake_provider, protocol="anthropic", model=model, reasoning=True, max_tokens=4096, **role_kw)
        client.chat(ChatRequest("q"))  # were it let through, the strict fake would refuse it
    assert fake_provider.count == 0


# --- errors as each provider means them ----------------------------------------------------------

def test_openrouter_moderation_flags_the_item_only(fake_provider):
    fake_provider.dialect = "openrouter"
    fake_provider.script(Fault.moderation(("violence", "harassment")))
    client = make(fake_provider, "openrouter")
    r = client.chat(ChatRequest("q"))
    assert (r.flagged, r.content, r.finish_reason) == ("violence, harassment", "", "content_filter")
    assert client.spend(r).cost == 0.0 and len(fake_provider.chat_requests()) == 1
    assert client.chat(ChatRequest("next")).content == "Answer to: next"


def test_a_402_naming_an_affordable_limit_is_retried_once_with_it(fake_provider):
    fake_provider.dialect = "openrouter"
    fake_provider.script(Fault.cannot_afford(64, 40))
    notes = []
    r = make(fake_provider, "openrouter").chat(ChatRequest(LIST, structured=True, min_tokens=32),
                                               on_retry=notes.append)
    assert json.loads(r.content)["items"]
    assert [q.body["max_tokens"] for q in fake_provider.chat_requests()] == [64, 40]
    assert notes == ["credits: provider fake: This request requires more credits, or fewer max_tokens. You "
                     "requested up to 64 tokens, but can only afford 40. To increase, visit "
                     "https://openrouter.ai/settings/credits and add more credits; retrying once with max_tokens 40"]


@pytest.mark.parametrize("faults", [[Fault.cannot_afford(64, 10)], [Fault.cannot_afford(64, 40)] * 2])
def test_a_402_that_does_not_fit_stops_everything(fake_provider, faults):
    fake_provider.dialect = "openrouter"
    fake_provider.script(*faults)
    with pytest.raises(CreditsError) as e:
        make(fake_provider, "openrouter").chat(ChatRequest("q", min_tokens=32))
    assert e.value.fatal and str(e.value).startswith("credits: provider fake: This request requires more credits")
    assert len(fake_provider.chat_requests()) == len(faults)


def test_a_spent_openai_quota_is_a_billing_stop_not_a_rate_limit(fake_provider):
    fake_provider.dialect = "openai"
    fake_provider.script(Fault.insufficient_quota())
    with pytest.raises(CreditsError) as e:
        make(fake_provider, "openai").chat(ChatRequest("q"))
    assert str(e.value).startswith("credits: provider fake: You exceeded your current quota")
    assert len(fake_provider.chat_requests()) == 1
    fake_provider.script(Fault.rate_limited(0.01))
    assert make(fake_provider, "openai").chat(ChatRequest("q")).content == "Answer to: q"


def test_a_low_anthropic_balance_is_a_billing_stop(fake_provider):
    fake_provider.script(Fault.credit_balance_low())
    with pytest.raises(CreditsError, match="credit balance is too low"):
        make(fake_provider, protocol="anthropic").chat(ChatRequest("q"))


@pytest.mark.parametrize("fault", [Fault.in_body(502), Fault.mid_answer(503)])
def test_an_error_in_a_200_is_that_error_and_retried_when_transient(fake_provider, fault):
    fake_provider.dialect = "openrouter"
    fake_provider.script(fault)
    notes = []
    r = make(fake_provider, "openrouter").chat(ChatRequest("q"), on_retry=notes.append)
    assert r.content == "Answer to: q" and len(notes) == 1
    assert notes[0].startswith(f"HTTP {fault.body.get('error', {}).get('code', 503)} (in a 200 answer): ")
    fake_provider.script(Fault.in_body(400, "bad input"))
    with pytest.raises(LlmError) as e:
        make(fake_provider, "openrouter").chat(ChatRequest("q"))
    assert str(e.value) == "HTTP 400 (in a 200 answer): bad input" and not e.value.retryable


# --- what an answer cost -------------------------------------------------------------------------

def test_openrouter_bills_are_the_cost_and_the_estimate_stays_beside(fake_provider):
    fake_provider.dialect = "openrouter"
    fake_provider.models = {"deepseek/deepseek-r1": (1.0, 2.0, 0.001, 4.0)}
    fake_provider.billing_factor = 1.25
    client = make(fake_provider, "openrouter", reasoning=True)
    fake_provider.script(Answer(content="A", reasoning="R", usage=(1000, 500), reasoning_tokens=200))
    spent = client.spend(client.chat(ChatRequest("q")))
    estimate = (1000 * 1.0 + 300 * 2.0 + 200 * 4.0) / 1e6 + 0.001
    assert spent.billed and spent.estimate == pytest.approx(estimate)
    assert spent.cost == pytest.approx(estimate * 1.25)
    fake_provider.dialect = "vllm"  # a server that bills nothing: the estimate is the cost
    other = make(fake_provider, "vllm", model="deepseek/deepseek-r1")
    s = other.spend(other.chat(ChatRequest("q")))
    assert not s.billed and s.cost == s.estimate
    fake_provider.dialect = "generic"  # a reseller that reports its bill the OpenRouter way
    fake_provider.script({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "cost": 0.5}})
    generic = make(fake_provider, "generic", model="deepseek/deepseek-r1")
    assert generic.spend(generic.chat(ChatRequest("q"))).cost == 0.5
