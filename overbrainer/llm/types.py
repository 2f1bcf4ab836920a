"""The request and answer of one chat call, independent of the wire protocol."""

from __future__ import annotations

from dataclasses import dataclass, field

# The values of `reasoning_kind` and `finish_reason` are the records' vocabulary (dataset/records.py):
# each protocol maps its own words onto them.
from overbrainer.dataset.records import (  # noqa: F401
    CONTENT_FILTER as CONTENT_FILTER,
    FINISH_REASONS as FINISH_REASONS,
    LENGTH as LENGTH,
    NONE as NONE,
    OTHER as OTHER,
    RAW as RAW,
    REASONING_KINDS as REASONING_KINDS,
    REDACTED as REDACTED,
    REFUSAL as REFUSAL,
    STOP as STOP,
    SUMMARY as SUMMARY,
)
from overbrainer.support.usage import Usage


@dataclass(frozen=True)
class ChatRequest:
    """One user message (and an optional system prompt).

    `max_tokens` overrides the role's value (list re-asks raise it); `structured` asks for JSON
    through `response_format` where the protocol has it (openai): of the shape `schema` names,
    `list` (a list of strings) or `verdict` (the compare judge's `{"verdict", "reason"}`).
    `min_tokens` is the smallest limit the caller can still use: when the provider can afford
    fewer tokens than asked (OpenRouter's 402), the request is sent once more with what it can
    afford if that is at least `min_tokens` (None: the whole limit is needed).
    """

    user: str
    system: str | None = None
    max_tokens: int | None = None
    structured: bool = False
    schema: str = "list"
    min_tokens: int | None = None


@dataclass(frozen=True)
class ChatResponse:
    """`billed`: what the provider says this answer cost (USD, OpenRouter's `usage.cost`), None
    when it does not say; `reasoning_tokens`: the part of the output tokens spent on reasoning;
    `cached_tokens`: the part of the input tokens the provider read from its prompt cache;
    `flagged`: the provider's moderation refused the input (its reasons), an answer with no
    content and finish reason `content_filter` that was never generated."""

    content: str
    reasoning: str | None
    reasoning_kind: str
    finish_reason: str
    usage: Usage = field(default_factory=Usage)
    billed: float | None = None
    reasoning_tokens: int = 0
    flagged: str | None = None
    cached_tokens: int = 0
