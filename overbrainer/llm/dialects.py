"""The dialects of the `openai` protocol: what each OpenAI-compatible server takes and means.

Every server speaks `POST /chat/completions`, but they differ in the field that limits the answer,
in how reasoning is asked for, in where it comes back, in what some error statuses mean and in
whether the answer says what it cost. A provider's dialect is `[providers.<name>] dialect`, or,
when unset, guessed from its base URL (`guess`). The table is docs/llm-requests.md#dialects.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit


# The protocols serve annotations only: `config check` imports this module (start-up time).
if TYPE_CHECKING:  # pragma: no cover
    from overbrainer.llm.settings import RoleSettings


OPENAI = "openai"
OPENROUTER = "openrouter"
LLAMACPP = "llamacpp"
OLLAMA = "ollama"
VLLM = "vllm"
GENERIC = "generic"
DIALECTS = (OPENAI, OPENROUTER, LLAMACPP, OLLAMA, VLLM, GENERIC)

MAX_TOKENS = "max_tokens"
MAX_COMPLETION_TOKENS = "max_completion_tokens"


@dataclass(frozen=True)
class Dialect:
    """What one OpenAI-protocol server family accepts: how it limits, and asks for, reasoning."""

    name: str
    token_field: str  # the field that limits the answer's tokens
    effort_object: bool  # reasoning asked as OpenRouter's {"reasoning": {"effort": …}}
    template_switch: bool  # reasoning also switched in the chat template (chat_template_kwargs)
    effort_default: bool  # reasoning = true without an effort sends "medium"
    moderation_403: bool  # a 403 is a moderation flag on the input, not a refused key
    billed_cost: bool  # answers carry `usage.cost`, what the provider billed


@functools.cache
def _table() -> dict[str, Dialect]:
    """The dialects by name, made when a client first asks (`config check` only guesses a name)."""
    return {
        OPENAI: Dialect(OPENAI, MAX_COMPLETION_TOKENS, False, False, True, False, False),
        OPENROUTER: Dialect(OPENROUTER, MAX_TOKENS, True, False, True, True, True),
        LLAMACPP: Dialect(LLAMACPP, MAX_TOKENS, False, True, False, False, False),
        OLLAMA: Dialect(OLLAMA, MAX_TOKENS, False, False, True, False, False),
        VLLM: Dialect(VLLM, MAX_COMPLETION_TOKENS, False, True, False, False, False),
        GENERIC: Dialect(GENERIC, MAX_TOKENS, True, False, True, False, True),
    }


def get(name: str | None) -> Dialect:
    return _table()[name or GENERIC]


def reasoning_fields(dialect: Dialect, role: RoleSettings) -> dict:
    """The body fields that ask for (or turn off) reasoning, for `role` on this dialect."""
    effort = role.reasoning_effort
    if effort == "none":
        off: dict[str, Any] = ({"reasoning": {"effort": "none"}} if dialect.name == OPENROUTER
                               else {"reasoning_effort": "none"})
        if dialect.name == VLLM:  # Qwen-style templates switch on enable_thinking, not the effort
            off["chat_template_kwargs"] = {"enable_thinking": False}
        return off
    if not role.reasoning:
        return {}
    out: dict[str, Any] = {}
    if dialect.template_switch:
        out["chat_template_kwargs"] = {"enable_thinking": True}
    if effort is None and dialect.effort_default:
        effort = "medium"
    if effort is not None:
        if dialect.effort_object:
            out["reasoning"] = {"effort": effort}
        else:
            out["reasoning_effort"] = effort
    return out


def guess(base_url: str | None) -> str:
    """The dialect a base URL suggests: OpenAI's and OpenRouter's hosts, Ollama's port 11434,
    a host named after llama.cpp (or port 8080, llama-server's default) or vLLM; else generic."""
    if not base_url:
        return GENERIC
    try:
        parts = urlsplit(base_url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return GENERIC
    if host == "api.openai.com":
        return OPENAI
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return OPENROUTER
    if port == 11434 or "ollama" in host:
        return OLLAMA
    if "vllm" in host:
        return VLLM
    if port == 8080 or "llama" in host:
        return LLAMACPP
    return GENERIC


def publishes_limits(protocol: str, dialect: str | None) -> bool:
    """Whether every answer of the provider says its rate limits (OpenAI's API, Anthropic's):
    llm/pacing.py then sends the first request alone and paces the others by its answer."""
    return str(protocol) == "anthropic" or (str(protocol) == "openai" and dialect == OPENAI)


OPENAI_BATCH, ANTHROPIC_BATCH = "openai", "anthropic"  # the batch APIs (llm/batch_types.py)
# The servers whose model listing can carry prices (OpenRouter's, NanoGPT's, a reseller's): OpenAI's
# and Anthropic's list ids only, and a self-hosted server (llama.cpp, Ollama, vLLM) none.
LISTS_PRICES = frozenset({OPENROUTER, GENERIC})
SELF_HOSTED = frozenset({LLAMACPP, OLLAMA, VLLM})


def lists_prices(protocol: str, dialect: str | None) -> bool:
    """Whether the provider's model listing may give prices (llm/prices.py reads it then)."""
    return str(protocol) == "openai" and (dialect or GENERIC) in LISTS_PRICES


def batch_api(protocol: str, dialect: str | None) -> str | None:
    """The batch API a provider has (OPENAI, ANTHROPIC), None when it has none (OpenRouter,
    llama.cpp, Ollama, vLLM, a generic server)."""
    if str(protocol) == "anthropic":
        return ANTHROPIC_BATCH
    if str(protocol) == "openai" and dialect == "openai":
        return OPENAI_BATCH
    return None
