"""`hides(protocol, model)`: the examples of docs/llm-requests.md#hidden-reasoning."""

import pytest

from overbrainer.llm.hidden import hides


@pytest.mark.parametrize(
    "model",
    ["openai/gpt-6", "gpt-5-mini", "o3", "anthropic/claude-sonnet-5", "google/gemini-3-pro",
     "O4-mini", "openai/anything", "claude-3-opus", "openrouter/o1-preview"],
)
def test_hidden_on_openai(model):
    assert hides("openai", model) is True


@pytest.mark.parametrize(
    "model",
    ["deepseek-r1", "qwen/qwen3-235b-a22b", "google/gemma-3-27b-it", "groq/openai/gpt-oss-20b",
     "openai/gpt-oss-120b", "gpt-oss-20b", "o", "olmo-2", "moonshotai/kimi-k2"],
)
def test_not_hidden_on_openai(model):
    assert hides("openai", model) is False


@pytest.mark.parametrize("model", ["deepseek-r1", "claude-sonnet-4-5", "anything"])
def test_always_hidden_on_anthropic(model):
    assert hides("anthropic", model) is True
