"""The request and answer of one chat call, independent of the wire protocol."""

from __future__ import annotations

from dataclasses import dataclass, field

from overbrainer.support.usage import Usage

# reasoning_kind values: what the provider let us see of the model's thinking.
RAW = "raw"
SUMMARY = "summary"
REDACTED = "redacted"
NONE = "none"
REASONING_KINDS = (RAW, SUMMARY, REDACTED, NONE)

# finish_reason values, mapped from each protocol's own words.
STOP = "stop"
LENGTH = "length"
CONTENT_FILTER = "content_filter"
REFUSAL = "refusal"
OTHER = "other"
FINISH_REASONS = (STOP, LENGTH, CONTENT_FILTER, REFUSAL, OTHER)


@dataclass(frozen=True)
class ChatRequest:
    """One user message (and an optional system prompt).

    `max_tokens` overrides the role's value (list re-asks raise it); `structured` asks for JSON
    through `response_format` where the protocol has it (openai): of the shape `schema` names,
    `list` (a list of strings) or `verdict` (the compare judge's `{"verdict", "reason"}`).
    """

    user: str
    system: str | None = None
    max_tokens: int | None = None
    structured: bool = False
    schema: str = "list"


@dataclass(frozen=True)
class ChatResponse:
    content: str
    reasoning: str | None
    reasoning_kind: str
    finish_reason: str
    usage: Usage = field(default_factory=Usage)
