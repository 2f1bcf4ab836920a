"""The rate limits a provider publishes on its answers, read into one shape (`Published`) that
the pacing of requests (llm/pacing.py) follows. docs/llm-requests.md#rate-limits.

- OpenAI (and the servers that copy it): `x-ratelimit-limit-requests`, `-tokens` (a minute's
  requests and tokens), `x-ratelimit-remaining-requests`, `-tokens`, and
  `x-ratelimit-reset-requests`, `-tokens`: the time until the limit is back to its initial
  state, as a duration (`1s`, `6m0s`, `20ms`, `1h2m3.5s`).
- Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
  the reset an RFC 3339 time. Input and output tokens are limited apart (ITPM, OTPM); the
  `tokens` headers show the most restrictive limit in effect, so they are read only when the
  input and output ones are absent.
- OpenRouter, where it sends them (mostly on a 429, as headers or in the error's
  `metadata.headers`): `X-RateLimit-Limit`, `X-RateLimit-Remaining` (requests) and
  `X-RateLimit-Reset`, a Unix time in milliseconds.
- `Retry-After` (seconds or an HTTP-date) and `retry-after-ms`: how long to wait before the next
  request (a 429's, mostly).

Limits are per minute (the providers' RPM, TPM, ITPM, OTPM). A value that cannot be read is
left out, never guessed."""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from overbrainer.support import http

# The kinds of limit, each a bucket of llm/pacing.py: what one request costs in each.
REQUESTS = "requests"  # 1 a request
TOKENS = "tokens"  # input + output tokens
INPUT = "input_tokens"  # input tokens (Anthropic's ITPM)
OUTPUT = "output_tokens"  # output tokens (Anthropic's OTPM)
KINDS = (REQUESTS, TOKENS, INPUT, OUTPUT)

_OPENAI = {REQUESTS: "requests", TOKENS: "tokens"}
_ANTHROPIC = {REQUESTS: "requests", TOKENS: "tokens", INPUT: "input-tokens", OUTPUT: "output-tokens"}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass
class Published:
    """What one answer says of the limits, by kind: `limit` (a minute's), `remaining`, `reset`
    (seconds from the answer until the limit is back to full), and `retry_after` (seconds)."""

    limit: dict[str, float] = field(default_factory=dict)
    remaining: dict[str, float] = field(default_factory=dict)
    reset: dict[str, float] = field(default_factory=dict)
    retry_after: float | None = None

    def __bool__(self) -> bool:
        return bool(self.limit or self.remaining or self.reset) or self.retry_after is not None


def read(headers: Mapping[str, str] | None, body: bytes | None = None, now: float | None = None) -> Published:
    """The limits `headers` (case-insensitive, as requests gives them) publish; `body`: an error
    answer's, where OpenRouter may put them (`error.metadata.headers`). `now`: Unix time (tests)."""
    got = Published()
    for source in (headers or {}, _metadata_headers(body) if body else {}):
        lower = {}
        for key in source:
            k = str(key).lower()
            if "ratelimit" in k or k.startswith("retry-after"):
                lower[k] = str(source[key])
        if not lower:
            continue
        now = time.time() if now is None else now
        _read_openai(lower, got)
        _read_anthropic(lower, got, now)
        _read_openrouter(lower, got, now)
        if got.retry_after is None:
            got.retry_after = _retry_after(lower)
    return got


def _read_openai(h: dict[str, str], got: Published) -> None:
    for kind, word in _OPENAI.items():
        _put(got.limit, kind, _number(h.get(f"x-ratelimit-limit-{word}")))
        _put(got.remaining, kind, _number(h.get(f"x-ratelimit-remaining-{word}")))
        _put(got.reset, kind, duration(h.get(f"x-ratelimit-reset-{word}")))


def _read_anthropic(h: dict[str, str], got: Published, now: float) -> None:
    split = any(f"anthropic-ratelimit-{w}-limit" in h for w in ("input-tokens", "output-tokens"))
    for kind, word in _ANTHROPIC.items():
        if kind == TOKENS and split:  # the most restrictive of the two: input and output are read apart
            continue
        _put(got.limit, kind, _number(h.get(f"anthropic-ratelimit-{word}-limit")))
        _put(got.remaining, kind, _number(h.get(f"anthropic-ratelimit-{word}-remaining")))
        _put(got.reset, kind, _until_rfc3339(h.get(f"anthropic-ratelimit-{word}-reset"), now))


def _read_openrouter(h: dict[str, str], got: Published, now: float) -> None:
    _put(got.limit, REQUESTS, _number(h.get("x-ratelimit-limit")))
    _put(got.remaining, REQUESTS, _number(h.get("x-ratelimit-remaining")))
    reset = _number(h.get("x-ratelimit-reset"))
    if reset is not None:
        at = reset / 1000.0 if reset > 1e11 else reset  # milliseconds (OpenRouter's), else seconds
        _put(got.reset, REQUESTS, max(0.0, at - now))


def _put(into: dict[str, float], kind: str, value: float | None) -> None:
    if value is not None and kind not in into:
        into[kind] = value


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def duration(text: str | None) -> float | None:
    """Seconds of a Go-style duration (`6m0s`, `1s`, `20ms`, `1h2m3.5s`, `0.5s`), or of a plain
    number of seconds; None when unreadable."""
    if text is None:
        return None
    text = text.strip()
    plain = _number(text)
    if plain is not None:
        return plain
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total if pos == len(text) and pos else None


def _until_rfc3339(text: str | None, now: float) -> float | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - now)


def _retry_after(h: dict[str, str]) -> float | None:
    ms = _number(h.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    return http.retry_after(h.get("retry-after"), cap=None)


def _metadata_headers(body: bytes | None) -> Mapping[str, Any]:
    """OpenRouter's `{"error": {"metadata": {"headers": {...}}}}` of an error answer, else {}."""
    if not body or b"metadata" not in body:
        return {}
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    error = doc.get("error") if isinstance(doc, dict) else None
    meta = error.get("metadata") if isinstance(error, dict) else None
    found = meta.get("headers") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}
