"""What a provider's error answer means, by protocol and dialect (docs/llm-requests.md#errors).

Beyond the statuses every provider shares (401 a refused key, 408/429/5xx passing trouble, other
4xx a refused request):

- 402 is money: out of credits, or (OpenRouter) not enough for the asked `max_tokens`, the
  message saying how many tokens the balance still covers (`CreditsError.afford`);
- a 429 whose error type or code is `insufficient_quota` (OpenAI) is a spent quota, not a rate
  limit; Anthropic's 400 `credit balance is too low` (or `reached your specified API usage
  limits`) likewise: they stop the stage (`credits: …`, exit 77: a person must act);
- a refused key (401, 403) stops the stage too (exit 77);
- a 403 from OpenRouter is its moderation flagging this input (`Moderated`), not a refused key;
- an OpenAI-compatible 200 whose body is an error (`{"error": {"code", "message"}}`, or a choice
  with `finish_reason: "error"`: OpenRouter reports errors met after the model started this way)
  means what its code means, and is retried when that is transient.
"""

from __future__ import annotations

import json
import re
from typing import Any

from overbrainer.llm import dialects
from overbrainer.llm.errors import CreditsError, LlmError, Moderated, auth_error
from overbrainer.support.failure import FailureKind
from overbrainer.support.redact import redact, words

SERVER = FailureKind.SERVER  # the transport kind the circuit breaker counts for a 5xx
_AFFORD = re.compile(r"can only afford (\d+)", re.I)
# Anthropic's 400s for money: no credit left, or the spend limit set on the organization or a
# workspace reached ("You have reached your specified API usage limits…").
_LOW_BALANCE = re.compile(r"credit balance is too low|reached your specified (?:workspace )?API usage limits", re.I)
_QUOTA = "insufficient_quota"


def _doc(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _error(doc: Any) -> Any:
    return doc.get("error") if isinstance(doc, dict) else None


def error_text(doc: Any, body: bytes) -> str:
    """The body's `error.message` (or `error` when it is a string), else the body itself, as
    `support.redact.words` puts a server's words in a message (one line, 300 characters)."""
    err = _error(doc)
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        text = err["message"]
    elif isinstance(err, str):
        text = err
    else:
        text = body.decode("utf-8", "replace")
    return words(text) or "(empty body)"


def _quota_spent(doc: Any) -> bool:
    err = _error(doc)
    return isinstance(err, dict) and _QUOTA in (err.get("type"), err.get("code"))


def _flag_reasons(doc: Any, text: str) -> str:
    err = _error(doc)
    meta = err.get("metadata") if isinstance(err, dict) else None
    reasons = meta.get("reasons") if isinstance(meta, dict) else None
    if isinstance(reasons, list) and reasons and all(isinstance(r, str) for r in reasons):
        return redact(", ".join(reasons))
    return text


def explain(status: int, body: bytes, retry_after: float | None = None, provider: str = "?", *,
            dialect: str = dialects.GENERIC, protocol: str = "openai", prefix: str = "") -> LlmError:
    """The error an answer with this status and body means."""
    doc = _doc(body)
    text = error_text(doc, body)
    if status in (401, 403):
        if status == 403 and protocol == "openai" and dialects.get(dialect).moderation_403:
            return Moderated(provider, _flag_reasons(doc, text), status)
        return auth_error(provider, status)
    if status == 402:
        found = _AFFORD.search(text)
        return CreditsError(provider, text, status=status, afford=int(found.group(1)) if found else None)
    if (status == 429 and _quota_spent(doc)) or (status == 400 and protocol == "anthropic"
                                                 and _LOW_BALANCE.search(text)):
        return CreditsError(provider, text, status=status)
    retryable = status in (408, 429) or status >= 500
    return LlmError(f"HTTP {status}{prefix}: {text}", fatal=status == 404, retryable=retryable,
                    status=status, retry_after=retry_after, transport=SERVER if status >= 500 else None)


def in_body(doc: Any, provider: str, dialect: str) -> LlmError | None:
    """The error a 2xx OpenAI-compatible answer carries in its body, if it carries one."""
    if not isinstance(doc, dict):
        return None
    choices = doc.get("choices")
    err = _error(doc)
    if not (isinstance(choices, list) and choices):
        if err is None:
            return None
    else:
        first = choices[0]
        if not (isinstance(first, dict) and first.get("finish_reason") == "error"):
            return None
        err = first.get("error") if isinstance(first.get("error"), dict) else {"message": "error"}
    code = err.get("code") if isinstance(err, dict) else None
    status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else 502
    body = json.dumps({"error": err}).encode()
    return explain(status, body, None, provider, dialect=dialect, prefix=" (in a 200 answer)")
