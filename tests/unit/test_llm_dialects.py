"""Dialects of the openai protocol, Anthropic thinking by model family, what error answers mean,
and the cost estimate (pure functions)."""


import pytest

from overbrainer.config.model import Role
from overbrainer.llm import dialects, meanings, thinking
from overbrainer.llm import openai_protocol as oai
from overbrainer.llm.errors import CreditsError, LlmError, Moderated
from overbrainer.llm.prices import Price, price_in
from overbrainer.llm.spend import divergence
from overbrainer.llm.types import ChatRequest
from overbrainer.support.usage import Usage


def role(**kw):
    base = dict(model="m", reasoning=False, max_tokens=100, temperature=None, reasoning_effort=None,
                thinking_budget=None, thinking=None)
    base.update(kw)
    return Role("p", **base)


def body(dialect, **kw):
    return oai.chat_body(role(**kw), ChatRequest("q"), 100, False, dialects.get(dialect))


# --- bodies -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dialect, field", [
    ("openai", "max_completion_tokens"), ("openrouter", "max_tokens"), ("llamacpp", "max_tokens"),
    ("ollama", "max_tokens"), ("vllm", "max_completion_tokens"), ("generic", "max_tokens")])
def test_each_dialect_limits_the_answer_with_its_own_field(dialect, field):
    sent = body(dialect)
    assert sent == {"model": "m", "messages": [{"role": "user", "content": "q"}], field: 100}


@pytest.mark.parametrize("dialect, on, low, off", [
    ("openai", {"reasoning_effort": "medium"}, {"reasoning_effort": "low"}, {"reasoning_effort": "none"}),
    ("openrouter", {"reasoning": {"effort": "medium"}}, {"reasoning": {"effort": "low"}},
     {"reasoning": {"effort": "none"}}),
    ("llamacpp", {"chat_template_kwargs": {"enable_thinking": True}},
     {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "low"}, {"reasoning_effort": "none"}),
    ("ollama", {"reasoning_effort": "medium"}, {"reasoning_effort": "low"}, {"reasoning_effort": "none"}),
    ("vllm", {"chat_template_kwargs": {"enable_thinking": True}},
     {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "low"},
     {"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": False}}),
    ("generic", {"reasoning": {"effort": "medium"}}, {"reasoning": {"effort": "low"}}, {"reasoning_effort": "none"}),
])
def test_each_dialect_asks_for_reasoning_its_own_way(dialect, on, low, off):
    def extra(**kw):
        sent = body(dialect, **kw)
        return {k: v for k, v in sent.items() if k not in ("model", "messages", dialects.get(dialect).token_field)}

    assert extra() == {}
    assert extra(reasoning=True) == on
    assert extra(reasoning=True, reasoning_effort="low") == low
    assert extra(reasoning=True, reasoning_effort="none") == off == extra(reasoning_effort="none")


@pytest.mark.parametrize("url, dialect", [
    ("https://api.openai.com/v1", "openai"), ("https://openrouter.ai/api/v1", "openrouter"),
    ("http://localhost:11434/v1", "ollama"), ("http://ollama.lan:80/v1", "ollama"),
    ("http://127.0.0.1:8080/v1", "llamacpp"), ("http://llama-server:9000/v1", "llamacpp"),
    ("http://vllm.internal:8000/v1", "vllm"), ("https://nano-gpt.com/api/v1", "generic"),
    ("http://127.0.0.1:5000/v1", "generic"), (None, "generic"), ("http://[::1:80/v1", "generic")])
def test_the_dialect_is_guessed_from_the_base_url(url, dialect):
    assert dialects.guess(url) == dialect


# --- anthropic thinking -------------------------------------------------------------------------

@pytest.mark.parametrize("model, version, modes", [
    ("claude-opus-4-7", (4, 7), {"adaptive"}), ("claude-sonnet-5", (5, 0), {"adaptive"}),
    ("claude-opus-4-8[1m]", (4, 8), {"adaptive"}), ("anthropic/claude-fable-5.1", (5, 1), {"adaptive"}),
    ("claude-opus-4-6", (4, 6), {"adaptive", "enabled"}), ("claude-sonnet-4-6", (4, 6), {"adaptive", "enabled"}),
    ("claude-sonnet-4-5-20250929", (4, 5), {"enabled"}), ("claude-haiku-4-5@20251001", (4, 5), {"enabled"}),
    ("claude-opus-4-20250514", (4, 0), {"enabled"}), ("claude-3-7-sonnet-20250219", (3, 7), {"enabled"}),
    ("claude-3-5-haiku-latest", (3, 5), set()), ("claude-mythos-preview", None, None), ("my-proxy-model", None, None)])
def test_thinking_modes_by_model_family(model, version, modes):
    assert thinking.version(model) == version
    found = thinking.supported(model)
    assert (None if found is None else set(found)) == modes


def test_the_mode_follows_the_family_the_budget_and_the_setting():
    assert thinking.mode(role(model="claude-opus-4-7", reasoning=True)) == "adaptive"
    assert thinking.mode(role(model="claude-sonnet-4-5", reasoning=True, thinking_budget=2048)) == "enabled"
    assert thinking.mode(role(model="claude-opus-4-6", reasoning=True)) == "adaptive"
    assert thinking.mode(role(model="claude-opus-4-6", reasoning=True, thinking_budget=2048)) == "enabled"
    assert thinking.mode(role(model="x", reasoning=True, thinking="enabled", thinking_budget=2048)) == "enabled"
    assert thinking.mode(role(model="claude-opus-4-7", reasoning=True, reasoning_effort="none")) is None
    assert thinking.mode(role(model="claude-opus-4-7")) is None


@pytest.mark.parametrize("kw, problem", [
    (dict(model="claude-sonnet-4-5"), "roles.parent: claude-sonnet-4-5 thinks only with a fixed budget "
     "(adaptive thinking came with Claude 4.6): set roles.parent.thinking_budget"),
    (dict(model="claude-sonnet-4-5", reasoning_effort="high"), "set roles.parent.thinking_budget instead of "
     "reasoning_effort"),
    (dict(model="claude-opus-4-7", thinking_budget=2048), "roles.parent.thinking_budget: claude-opus-4-7 refuses "
     "a fixed thinking budget"),
    (dict(model="claude-sonnet-4-5", thinking="adaptive"), "roles.parent.thinking: claude-sonnet-4-5 has no "
     "adaptive thinking"),
    (dict(model="claude-opus-4-7", thinking="enabled", thinking_budget=2048), 'roles.parent.thinking: '
     'claude-opus-4-7 refuses "enabled"'),
    (dict(model="claude-opus-4-6", thinking="enabled"), 'roles.parent.thinking: "enabled" needs '
     'roles.parent.thinking_budget'),
    (dict(model="claude-opus-4-6", thinking="adaptive", thinking_budget=2048), 'roles.parent.thinking_budget: '
     'not used with thinking = "adaptive"'),
    (dict(model="claude-3-5-sonnet-latest"), "roles.parent.reasoning: claude-3-5-sonnet-latest has no extended "
     "thinking"),
])
def test_combinations_the_reference_refuses(kw, problem):
    found = thinking.problems("roles.parent", role(reasoning=True, **kw))
    assert len(found) == 1 and problem in found[0], found


@pytest.mark.parametrize("kw", [
    dict(model="claude-sonnet-4-5", thinking_budget=2048), dict(model="claude-opus-4-7"),
    dict(model="claude-opus-4-7", reasoning_effort="low"), dict(model="claude-opus-4-6"),
    dict(model="claude-opus-4-6", thinking_budget=2048), dict(model="claude-mythos-preview", thinking_budget=2048),
    dict(model="proxy-name"), dict(model="claude-sonnet-4-5", reasoning_effort="none")])
def test_combinations_the_reference_takes(kw):
    assert thinking.problems("roles.parent", role(reasoning=True, **kw)) == []


# --- what error answers mean ----------------------------------------------------------------------

def explain(status, doc, **kw):
    import json

    return meanings.explain(status, json.dumps(doc).encode(), None, "p", **kw)


def test_402_is_credits_and_names_the_affordable_limit():
    e = explain(402, {"error": {"code": 402, "message": "This request requires more credits, or fewer "
                                "max_tokens. You requested up to 16384 tokens, but can only afford 3919."}})
    assert isinstance(e, CreditsError) and e.fatal and e.afford == 3919 and e.reason == "credits"
    assert str(e).startswith("credits: provider p: This request requires more credits")
    plain = explain(402, {"error": {"message": "Insufficient credits"}})
    assert isinstance(plain, CreditsError) and plain.afford is None


def test_insufficient_quota_and_a_low_anthropic_balance_are_billing_stops():
    quota = explain(429, {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                                    "code": "insufficient_quota"}})
    assert isinstance(quota, CreditsError) and not quota.retryable
    limited = explain(429, {"error": {"message": "Rate limit reached", "type": "requests"}})
    assert limited.retryable and not limited.fatal
    low = explain(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": "Your credit balance is too low to access"}},
                  protocol="anthropic")
    assert isinstance(low, CreditsError)
    assert not isinstance(explain(400, {"error": {"message": "Your credit balance is too low"}}), CreditsError)


def test_403_is_moderation_on_openrouter_and_a_refused_key_elsewhere():
    doc = {"error": {"code": 403, "message": "flagged", "metadata": {"reasons": ["violence", "hate"]}}}
    flagged = explain(403, doc, dialect="openrouter")
    assert isinstance(flagged, Moderated) and flagged.reasons == "violence, hate" and not flagged.fatal
    for dialect in ("openai", "generic", "vllm"):
        refused = explain(403, doc, dialect=dialect)
        assert not isinstance(refused, Moderated) and refused.fatal
    assert explain(403, {"error": {"code": 403, "message": "flagged for x"}}, dialect="openrouter").reasons == \
        "flagged for x"


def test_an_error_carried_by_a_200_is_that_error():
    assert meanings.in_body({"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}, "p",
                            "openrouter") is None
    assert meanings.in_body({"choices": []}, "p", "generic") is None
    e = meanings.in_body({"error": {"code": 502, "message": "Provider returned error"}}, "p", "openrouter")
    assert isinstance(e, LlmError) and e.retryable and e.status == 502
    assert str(e) == "HTTP 502 (in a 200 answer): Provider returned error"
    bad = meanings.in_body({"error": {"code": 400, "message": "bad"}}, "p", "openrouter")
    assert not bad.retryable and not bad.fatal
    mid = meanings.in_body({"choices": [{"finish_reason": "error", "error": {"code": 429, "message": "slow"}}]},
                           "p", "openrouter")
    assert mid.retryable and mid.status == 429
    unknown = meanings.in_body({"error": "boom"}, "p", "generic")
    assert unknown.retryable and unknown.status == 502


# --- cost ---------------------------------------------------------------------------------------

def test_the_estimate_counts_request_fees_and_reasoning_prices():
    listing = [{"id": "m", "pricing": {"prompt": "0.000001", "completion": "0.000002", "request": "0.001",
                                        "internal_reasoning": "0.000004"}},
               {"id": "z", "pricing": {"prompt": "0.000001", "completion": "0.000002", "internal_reasoning": "0"}}]
    price = price_in(listing, "m")
    assert price == Price(1.0, 2.0, 0.001, 4.0)
    assert price.cost(Usage(1000, 500), reasoning_tokens=200) == pytest.approx((1000 + 300 * 2 + 200 * 4) / 1e6 + 0.001)
    assert price.cost(Usage(10, 5), reasoning_tokens=50) == pytest.approx((10 + 5 * 4) / 1e6 + 0.001)
    plain = price_in(listing, "z")  # "0" lists no separate reasoning price: output tokens' price
    assert plain.reasoning_per_million is None and plain.request == 0
    assert plain.cost(Usage(1000, 500), 200) == pytest.approx(0.002)


def test_a_gap_over_ten_percent_between_bill_and_estimate_is_worded_once():
    assert divergence("answers", 1.0, 1.05) is None and divergence("answers", 1.0, None) is None
    assert divergence("answers", 0.0, 0.5) is None
    assert divergence("answers", 0.0125, 0.01) == ("answers: the provider billed $0.0125; the listed prices give "
                                                   "$0.0100 (20% less); the summary counts what was billed")
    assert "(50% more)" in divergence("answers", 1.0, 1.5)
