"""Review of the LLM client: the total request timeout against a server that trickles its body,
gzip bodies, and the provider-wide cool-down after a request that gives up on a 429."""

from __future__ import annotations

import gzip
import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from overbrainer.config.model import Pipeline, Provider, Role
from overbrainer.llm.client import connect
from overbrainer.llm.errors import LlmError
from overbrainer.llm.prices import PriceBook
from overbrainer.llm.types import ChatRequest
from tests.fixtures.pacers import ready_in
from tests.fixtures.provider import Fault, llm_session, serving

ANSWER = json.dumps({"choices": [{"message": {"content": "late"}, "finish_reason": "stop"}]}).encode()


class _Trickle(BaseHTTPRequestHandler):
    """Answers /chat/completions with keep-alive spaces, one every 20 ms, before the JSON (as
    OpenRouter does while a model thinks), or at once gzip-compressed when the prompt is "gzip"."""

    protocol_version = "HTTP/1.1"
    pad = 500

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if body["messages"][-1]["content"] == "gzip":
            packed = gzip.compress(ANSWER)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(packed)))
            self.end_headers()
            self.wfile.write(packed)
            return
        self.send_header("Content-Length", str(self.pad + len(ANSWER)))
        self.end_headers()
        self.wfile.flush()
        try:
            for _ in range(self.pad):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.02)
            self.wfile.write(ANSWER)
        except OSError:
            pass  # the client gave up


@pytest.fixture
def trickle():
    with serving(_Trickle) as url:
        yield url


def _client(url, *, timeout=10.0, max_retries=0, name="trickle", pacing=True):
    provider = Provider(name, "openai", url)
    role = Role(name, "m", max_tokens=8)
    pipeline = Pipeline(concurrency=2, max_retries=max_retries, request_timeout_secs=timeout)
    return connect(provider, role, pipeline, llm=llm_session(pacing), prices=PriceBook())


def test_a_trickling_body_cannot_stretch_the_total_timeout(trickle):
    # The server needs 10 s for its body, sending a byte every 20 ms: before the fix the client
    # waited for all of it (each byte restarted the socket's read timeout).
    client = _client(trickle, timeout=0.3)
    start = time.monotonic()
    with pytest.raises(LlmError, match=r"^request failed \(timed out\)$") as e:
        client.chat(ChatRequest("q"))
    assert e.value.retryable
    assert time.monotonic() - start < 5


def test_gzip_bodies_are_decoded_and_the_connection_is_reused(trickle):
    client = _client(trickle)
    for _ in range(3):
        assert client.chat(ChatRequest("gzip")).content == "late"


@pytest.mark.parametrize("pacing", [True, False])
def test_a_429_that_ends_the_request_still_pauses_its_senders(fake_provider, pacing):
    fake_provider.script(Fault.rate_limited(120))
    client = _client(fake_provider.url, name="fake", max_retries=0, pacing=pacing)
    with pytest.raises(LlmError) as e:
        client.chat(ChatRequest("q"))
    assert e.value.status == 429
    # Every other thread on this model (its pacer; without pacing: on this provider) now waits out
    # the 120 s the provider asked for.
    if pacing:
        assert ready_in(client.pacer, 1, 1) > 100
    else:
        assert client.channel.not_before - time.monotonic() > 100
