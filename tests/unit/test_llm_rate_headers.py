"""Reading the rate limits providers publish (llm/rate_headers.py), from their references'
header names and formats."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from requests.structures import CaseInsensitiveDict

from overbrainer.llm import rate_headers as rh

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("text, seconds", [
    ("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.5s", 0.5), ("500us", 5e-4),
    ("250µs", 2.5e-4), ("10ns", 1e-8), ("0s", 0.0), ("17", 17.0), ("1m", 60.0)])
def test_durations_as_openai_writes_them(text, seconds):
    assert rh.duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "1x", "1s2", "abc", "-1s", "1s 2s"])
def test_unreadable_durations_are_none(text):
    assert rh.duration(text) is None


def test_openai_headers():
    got = rh.read(CaseInsensitiveDict({
        "X-RateLimit-Limit-Requests": "60", "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}), now=NOW)
    assert got.limit == {"requests": 60, "tokens": 150000}
    assert got.remaining == {"requests": 59, "tokens": 149984}
    assert got.reset == {"requests": 1.0, "tokens": 360.0}
    assert got.retry_after is None and bool(got.limit or got.remaining)


def test_anthropic_headers_read_input_and_output_apart():
    got = rh.read({
        "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2026-01-01T12:00:01Z",
        "anthropic-ratelimit-input-tokens-limit": "30000", "anthropic-ratelimit-input-tokens-remaining": "29000",
        "anthropic-ratelimit-input-tokens-reset": "2026-01-01T12:00:02.5+00:00",
        "anthropic-ratelimit-output-tokens-limit": "8000", "anthropic-ratelimit-output-tokens-remaining": "0",
        "anthropic-ratelimit-output-tokens-reset": "2026-01-01T12:01:00Z",
        # the most restrictive of the two: not a third limit when both are given
        "anthropic-ratelimit-tokens-limit": "8000", "anthropic-ratelimit-tokens-remaining": "0",
        "anthropic-ratelimit-tokens-reset": "2026-01-01T12:01:00Z",
        "retry-after": "7"}, now=NOW)
    assert got.limit == {"requests": 50, "input_tokens": 30000, "output_tokens": 8000}
    assert got.remaining == {"requests": 49, "input_tokens": 29000, "output_tokens": 0}
    assert got.reset == {"requests": 1.0, "input_tokens": 2.5, "output_tokens": 60.0}
    assert got.retry_after == 7.0


def test_anthropic_tokens_headers_alone_are_a_tokens_limit():
    got = rh.read({"anthropic-ratelimit-tokens-limit": "40000", "anthropic-ratelimit-tokens-remaining": "39000",
                   "anthropic-ratelimit-tokens-reset": "2025-12-31T00:00:00Z"}, now=NOW)
    assert got.limit == {"tokens": 40000} and got.remaining == {"tokens": 39000}
    assert got.reset == {"tokens": 0.0}  # a reset past is now


def test_openrouter_headers_and_error_metadata():
    reset_ms = int((NOW + 30) * 1000)
    got = rh.read({"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset_ms)}, now=NOW)
    assert got.limit == {"requests": 20} and got.remaining == {"requests": 0}
    assert got.reset["requests"] == pytest.approx(30.0)
    body = json.dumps({"error": {"code": 429, "message": "Rate limit exceeded: free-models-per-min.",
                                 "metadata": {"headers": {"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0",
                                                          "X-RateLimit-Reset": str(reset_ms)}}}}).encode()
    from_body = rh.read({}, body, now=NOW)
    assert from_body.limit == {"requests": 20} and from_body.reset["requests"] == pytest.approx(30.0)


def test_retry_after_forms():
    assert rh.read({"retry-after-ms": "1500"}).retry_after == 1.5
    assert rh.read({"Retry-After": "2"}).retry_after == 2.0
    assert rh.read({"Retry-After": "Thu, 01 Jan 2026 12:00:09 GMT"}, now=NOW).retry_after is not None


def test_nothing_published_and_unreadable_values():
    assert not rh.read({"content-type": "application/json"})
    got = rh.read({"x-ratelimit-limit-requests": "lots", "x-ratelimit-remaining-tokens": "-3",
                   "anthropic-ratelimit-requests-reset": "tomorrow", "x-ratelimit-reset-tokens": "soon"})
    assert not got and not (got.limit or got.remaining)
    assert not rh.read({}, b"not json with metadata")
