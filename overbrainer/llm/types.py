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
