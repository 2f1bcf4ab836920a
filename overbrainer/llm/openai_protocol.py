"""The `openai` protocol: OpenAI-compatible chat completions and embeddings."""

from __future__ import annotations

import math
from typing import Any

from overbrainer.llm import dialects, reasoning
from overbrainer.llm.dialects import Dialect
from overbrainer.llm.errors import invalid
from overbrainer.llm.settings import RoleSettings
from overbrainer.llm.types import (
    CONTENT_FILTER,
    LENGTH,
    OTHER,
    REFUSAL,
    STOP,
    ChatRequest,
    ChatResponse,
)
from overbrainer.support.usage import Usage


CHAT_PATH = "/chat/completions"
EMBED_PATH = "/embeddings"

RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "string_list",
        "strict": False,
        "schema": {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "string"}}},
            "required": ["items"],
            "additionalProperties": False,
        },
    },
}

# The compare judge's answer: a small local judge (llama.cpp, Ollama) holds to it far better when
# the server constrains its output than when only the prompt asks.
VERDICT_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "strict": False,
        "schema": {
            "type": "object",
            "properties": {"verdict": {"type": "string", "enum": ["A", "B", "tie"]},
                           "reason": {"type": "string"}},
            "required": ["verdict", "reason"],
            "additionalProperties": False,
        },
    },
}
FORMATS = {"list": RESPONSE_FORMAT, "verdict": VERDICT_FORMAT}

_FINISH: dict[Any, str] = {"stop": STOP, "length": LENGTH, "content_filter": CONTENT_FILTER}


def headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def chat_body(role: RoleSettings, req: ChatRequest, max_tokens: int, structured: bool,
              dialect: Dialect | None = None) -> dict:
    """The body of one chat in `dialect` (generic when None): the dialect's token-limit field
    and its way of asking for reasoning (llm/dialects.py)."""
    d = dialect or dialects.get(dialects.GENERIC)
    messages = []
    if req.system is not None:
        messages.append({"role": "system", "content": req.system})
    messages.append({"role": "user", "content": req.user})
    body: dict[str, Any] = {"model": role.model, "messages": messages, d.token_field: max_tokens}
    temperature = role.temperature
    if temperature is not None:
        body["temperature"] = temperature
    body.update(dialects.reasoning_fields(d, role))
    if structured:
        body["response_format"] = FORMATS[req.schema]
    return body


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_usage(doc: Any) -> Usage:
    usage = doc.get("usage") if isinstance(doc, dict) else None
    if not isinstance(usage, dict):
        return Usage()
    return Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))


def _billed(usage: Any) -> float | None:
    cost = usage.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0:
        return float(cost)
    return None


def _reasoning_tokens(usage: Any) -> int:
    details = usage.get("completion_tokens_details")
    return _int(details.get("reasoning_tokens")) if isinstance(details, dict) else 0


def _cached_tokens(usage: Any) -> int:
    details = usage.get("prompt_tokens_details")
    return _int(details.get("cached_tokens")) if isinstance(details, dict) else 0


def parse_chat(doc: Any) -> ChatResponse:
    if not isinstance(doc, dict):
        raise invalid("not a JSON object")
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices:
        raise invalid("no choices")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise invalid("choices[0] is not an object")
    message = choice.get("message")
    if message is None:
        message = {}
    if not isinstance(message, dict):
        raise invalid("choices[0].message is not an object")
    content = message.get("content")
    if content is None:
        content = ""
    elif not isinstance(content, str):
        raise invalid("choices[0].message.content is not a string")
    content, thought, kind = reasoning.from_openai_message(message, content)
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        finish = REFUSAL
    else:
        finish = _FINISH.get(choice.get("finish_reason"), OTHER)
    usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
    return ChatResponse(content, thought, kind, finish, parse_usage(doc), billed=_billed(usage),
                        reasoning_tokens=_reasoning_tokens(usage), cached_tokens=_cached_tokens(usage))


def embed_body(model: str, texts: list[str]) -> dict:
    return {"model": model, "input": list(texts), "encoding_format": "float"}


def parse_embeddings(doc: Any, count: int) -> list[list[float]]:
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise invalid("no data in the embeddings answer")
    if len(data) != count:
        raise invalid(f"{len(data)} embeddings for {count} inputs")
    rows = []
    for position, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("embedding"), list):
            raise invalid("an embedding is not a list of numbers")
        index = entry.get("index", position)
        if not isinstance(index, int):
            raise invalid("an embedding index is not a number")
        rows.append((index, entry["embedding"]))
    rows.sort(key=lambda r: r[0])
    out = []
    for _, vector in rows:
        try:
            out.append([float(x) for x in vector])
        except (TypeError, ValueError):
            raise invalid("an embedding is not a list of numbers") from None
    return out
