"""The `anthropic` protocol: the Messages API. No embeddings, no response_format; thinking is
`adaptive` or `enabled` + budget by model family (llm/thinking.py)."""

from __future__ import annotations

from typing import Any

from overbrainer.llm import reasoning, thinking
from overbrainer.llm.errors import invalid
from overbrainer.llm.settings import RoleSettings
from overbrainer.llm.types import LENGTH, OTHER, REFUSAL, STOP, ChatRequest, ChatResponse
from overbrainer.support.usage import Usage


CHAT_PATH = "/messages"
API_VERSION = "2023-06-01"

_FINISH: dict[Any, str] = {"end_turn": STOP, "stop_sequence": STOP, "max_tokens": LENGTH, "refusal": REFUSAL}


def headers(api_key: str | None) -> dict[str, str]:
    out = {"anthropic-version": API_VERSION}
    if api_key:
        out["x-api-key"] = api_key
    return out


def chat_body(role: RoleSettings, req: ChatRequest, max_tokens: int, structured: bool) -> dict:
    body: dict[str, Any] = {"model": role.model, "max_tokens": max_tokens}
    if req.system is not None:
        body["system"] = req.system
    body["messages"] = [{"role": "user", "content": req.user}]
    temperature = role.temperature
    if temperature is not None:
        body["temperature"] = temperature
    chosen = thinking.mode(role)
    if chosen == thinking.ENABLED:
        body["thinking"] = {"type": "enabled", "budget_tokens": role.thinking_budget}
    elif chosen == thinking.ADAPTIVE:
        body["thinking"] = {"type": "adaptive"}
        effort = role.reasoning_effort
        if effort:
            body["output_config"] = {"effort": effort}
    return body


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_usage(doc: Any) -> Usage:
    usage = doc.get("usage") if isinstance(doc, dict) else None
    if not isinstance(usage, dict):
        return Usage()
    # input_tokens leaves out what the prompt cache served or stored: counted as input here
    cached = _int(usage.get("cache_read_input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    return Usage(_int(usage.get("input_tokens")) + cached + written, _int(usage.get("output_tokens")))


def parse_chat(doc: Any) -> ChatResponse:
    if not isinstance(doc, dict):
        raise invalid("not a JSON object")
    blocks = doc.get("content")
    if not isinstance(blocks, list):
        raise invalid("no content blocks")
    content, thought, kind = reasoning.from_anthropic_blocks(blocks)
    finish = _FINISH.get(doc.get("stop_reason"), OTHER)
    usage = doc.get("usage")
    cached = _int(usage.get("cache_read_input_tokens")) if isinstance(usage, dict) else 0
    return ChatResponse(content, thought, kind, finish, parse_usage(doc), cached_tokens=cached)
