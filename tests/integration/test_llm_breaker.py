"""A dead, hung or failing provider against the real client: the circuit breaker stops the sending,
transport failures are named by kind, and the price listing never delays the first request."""

from __future__ import annotations

import threading

import pytest

from overbrainer.llm import http
from overbrainer.llm.errors import LlmError, ProviderUnreachable
from overbrainer.llm.prices import PriceBook
from overbrainer.llm.types import ChatRequest
from overbrainer.support import failure
from overbrainer.support.failure import FailureKind
from overbrainer.support.usage import Usage
from tests.fixtures.provider import Fault, Raw, closed_url, llm_session
from tests.integration.test_llm_client import make


@pytest.fixture(autouse=True)
def fresh_channels(monkeypatch):
    monkeypatch.setattr(http, "BACKOFF_BASE", 0.01)


def test_nothing_listening_stops_after_3_x_concurrency_attempts():
    url = closed_url()
    client = make(url, concurrency=1, max_retries=10, prices=PriceBook(timeout=0.5))
    notes = []
    with pytest.raises(ProviderUnreachable) as e:
        client.chat(ChatRequest("q"), on_retry=notes.append)
    assert str(e.value) == f"provider fake ({url}) is unreachable: connection refused; nothing more was sent"
    assert e.value.fatal and e.value.reason == "provider unreachable (connection refused)"
    assert len(notes) == 2  # 3 attempts, not 11


def test_a_hung_server_costs_3_timeouts_not_12_per_item(hung_server):
    client = make(hung_server, concurrency=1, max_retries=11, timeout=0.2, prices=PriceBook(timeout=0.2))
    notes = []
    with pytest.raises(ProviderUnreachable, match=r"is unreachable: timed out; nothing more was sent$"):
        client.chat(ChatRequest("q"), on_retry=notes.append)
    assert len(notes) == 2


def test_nothing_more_is_sent_once_tripped_and_waiting_retries_end(fake_provider):
    fake_provider.responder = lambda req: Fault(502, {"error": {"message": "bad gateway"}})
    shared = llm_session()
    client = make(fake_provider, concurrency=2, max_retries=10, llm=shared)
    with pytest.raises(ProviderUnreachable, match=r"unreachable: HTTP 502: bad gateway; nothing more"):
        client.chat(ChatRequest("q"))
    assert len(fake_provider.chat_requests()) == 6  # 3 × concurrency
    with pytest.raises(ProviderUnreachable):
        client.chat(ChatRequest("another"))
    assert len(fake_provider.chat_requests()) == 6
    # Every client of the provider in the session stops: they share the provider's breaker.
    with pytest.raises(ProviderUnreachable):
        make(fake_provider, model="m2", llm=shared).chat(ChatRequest("q"))
    assert len(fake_provider.chat_requests()) == 6


def test_answers_in_between_keep_the_breaker_closed(fake_provider):
    replies = iter([Fault.server_error(), Fault.server_error(), Fault.rate_limited(0),
                    Fault.server_error(), Fault.server_error(), None])
    fake_provider.responder = lambda req: next(replies)
    client = make(fake_provider, concurrency=1, max_retries=5)
    assert client.chat(ChatRequest("q")).content.startswith("Answer to: q")


def test_the_time_limit_on_an_injected_clock(fake_provider):
    fake_provider.responder = lambda req: Fault.server_error()
    client = make(fake_provider, concurrency=8, max_retries=3, timeout=300)
    times = iter([0.0, 10.0, 20.0, 920.0])  # the 4th failure comes 15 min 20 s after the first
    client.channel.breaker.clock = lambda: next(times)
    with pytest.raises(ProviderUnreachable) as e:
        client.chat(ChatRequest("q"))
    assert "unreachable: HTTP 500: upstream exploded (no answer for 15 min)" in str(e.value)
    assert len(fake_provider.chat_requests()) == 4  # far below the streak limit of 24


def test_transport_failures_are_named_by_kind(fake_provider):
    with pytest.raises(LlmError) as e:  # TLS spoken to a plain HTTP server
        make(fake_provider.url.replace("http://", "https://"), max_retries=0,
             prices=PriceBook(timeout=0.5)).chat(ChatRequest("q"))
    assert e.value.transport is FailureKind.TLS and str(e.value) == "request failed (TLS handshake failed)"
    with pytest.raises(LlmError) as e:
        make("http://overbrainer-test.invalid", max_retries=0, prices=PriceBook(timeout=0.5)).chat(
            ChatRequest("q"))
    assert e.value.transport is FailureKind.DNS and str(e.value) == "request failed (DNS lookup failed)"


def test_the_price_listing_never_delays_the_first_request(fake_provider):
    # The listing answers only once the first chat has reached the server: looked up before
    # that request, it would hold it back (and time out, leaving the cost unknown).
    fake_provider.models = {"m1": (1.0, 2.0)}
    fake_provider.models_gate = gate = threading.Event()

    def responder(req):
        gate.set()
        return None

    fake_provider.responder = responder
    client = make(fake_provider, prices=PriceBook(timeout=5))
    response = client.chat(ChatRequest("q"))
    assert client.cost(Usage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    assert response.content.startswith("Answer to")


@pytest.mark.parametrize("wording", ["as worded", "worded anew"])
def test_each_failure_kind_is_classified_from_a_real_failure_whatever_its_words(
        wording, fake_provider, hung_server, monkeypatch, caplog):
    """Refused, a timeout (the hung server), a 5xx and a 429, each met for real: the kind on the
    error, what the breaker counts and what the price lookup says do not depend on the words."""
    if wording == "worded anew":
        for kind in FailureKind:
            monkeypatch.setitem(failure.WORDS, kind, f"reworded {kind.name.lower()}")
    with pytest.raises(LlmError) as e:
        make(closed_url(), max_retries=0, prices=PriceBook(timeout=0.5)).chat(ChatRequest("q"))
    assert e.value.transport is FailureKind.REFUSED and e.value.retryable
    assert str(e.value) == f"request failed ({FailureKind.REFUSED.text})"
    caplog.set_level("WARNING", logger="overbrainer.llm.prices")
    client = make(hung_server, max_retries=0, timeout=0.2, prices=PriceBook(timeout=0.2))
    with pytest.raises(LlmError) as e:
        client.chat(ChatRequest("q"))
    assert e.value.transport is FailureKind.TIMEOUT
    assert client.price is None  # the listing was read beside the chat: it timed out too
    assert "model prices not received within 0.2s" in caplog.text  # the listing's timeout, by kind
    fake_provider.responder = lambda req: Fault.server_error(503)
    with pytest.raises(LlmError) as e:
        make(fake_provider, max_retries=0).chat(ChatRequest("q"))
    assert e.value.transport is FailureKind.SERVER and e.value.status == 503
    fake_provider.responder = lambda req: Fault.rate_limited(0)
    with pytest.raises(LlmError) as e:
        make(fake_provider, name="other", max_retries=0).chat(ChatRequest("q"))
    assert e.value.transport is None and e.value.status == 429 and e.value.retryable  # an answer
    # The breaker still tells a provider never reached: 3 refusals trip it at any concurrency.
    with pytest.raises(ProviderUnreachable) as e:
        make(closed_url(), name="dead", concurrency=64, max_retries=10,
             prices=PriceBook(timeout=0.5)).chat(ChatRequest("q"))
    assert e.value.reason == f"provider unreachable ({FailureKind.REFUSED.text})"


def test_a_connection_closed_after_the_request_was_sent_is_no_answer_not_cannot_connect(fake_provider):
    """The request was written and the server (or a proxy) closed the connection without a word:
    it may have taken effect. Said so (`no answer`), and told from a connection never made."""
    fake_provider.responder = lambda req: Raw.dropped()
    with pytest.raises(LlmError) as e:
        make(fake_provider, max_retries=0).chat(ChatRequest("q"))
    assert e.value.transport is FailureKind.NO_ANSWER and e.value.transport.sent and e.value.retryable
    assert str(e.value) == "request failed (no answer (the connection closed after the request was sent))"
    assert len(fake_provider.chat_requests()) == 1  # it did arrive
    fake_provider.responder = lambda req: Raw.cut_off()
    with pytest.raises(LlmError) as e:
        make(fake_provider, max_retries=0).chat(ChatRequest("q"))
    assert e.value.transport is FailureKind.CUT_OFF and e.value.transport.sent
    with pytest.raises(LlmError) as e:
        make(closed_url(), max_retries=0, prices=PriceBook(timeout=0.5)).chat(ChatRequest("q"))
    assert e.value.transport is FailureKind.REFUSED and not e.value.transport.sent
