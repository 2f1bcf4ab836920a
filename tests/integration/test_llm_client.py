"""The LLM client against the fake provider (a real HTTP server on 127.0.0.1), both protocols."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from overbrainer.config.model import Pipeline, Provider, Role
from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.llm import http
from overbrainer.llm.client import connect
from overbrainer.llm.errors import AUTH_FAILED, PERMISSION_DENIED, LlmCancelled, LlmError
from overbrainer.llm.listparse import string_array
from overbrainer.llm.prices import PriceBook
from overbrainer.llm.types import ChatRequest
from overbrainer.support import redact
from overbrainer.support.usage import Usage
from tests.fixtures.provider import Answer, Fault, Raw, embedding, llm_session


class Key:
    def __init__(self, value):
        self.value = value

    def resolve(self):
        return self.value


def make(fake_or_url, protocol="openai", *, key=None, name="fake", prices=None, stop=None,
         concurrency=4, max_retries=3, timeout=10, llm=None, **role_kw):
    """A client of a session of its own (`llm`: a session to share, e.g. another client's)."""
    url = getattr(fake_or_url, "url", fake_or_url)
    provider = Provider(name, protocol, url, None if key is None else Key(key))
    role = dict(model="m1", reasoning=False, max_tokens=64, temperature=None, reasoning_effort=None,
                thinking_budget=None)
    role.update(role_kw)
    pipeline = Pipeline(concurrency=concurrency, max_retries=max_retries, request_timeout_secs=timeout)
    return connect(provider, Role(name, **role), pipeline, llm=llm or llm_session(), prices=prices, stop=stop)


@pytest.fixture(autouse=True)
def fresh_channels(monkeypatch):
    monkeypatch.setattr(http, "BACKOFF_BASE", 0.01)


# --- requests on the wire -----------------------------------------------------------------------

def test_openai_request_fields_and_auth(fake_provider):
    client = make(fake_provider, key="sk-live-abc123", reasoning=True, temperature=0.7,
                  reasoning_effort="low")
    r = client.chat(ChatRequest("What is a borrow?", system="Be brief.", max_tokens=99))
    assert r.content == "Answer to: What is a borrow?" and r.reasoning_kind == "raw"
    sent = fake_provider.chat_requests()[-1]
    assert sent.path == "/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-live-abc123"
    assert sent.headers["user-agent"].startswith("overbrainer/")
    assert sent.body == {
        "model": "m1",
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "What is a borrow?"}],
        "max_tokens": 99, "temperature": 0.7, "reasoning": {"effort": "low"},
    }
    assert redact.redact("x sk-live-abc123 y") == "x *** y"
    assert (client.model, client.provider_name, client.protocol) == ("m1", "fake", "openai")


def test_anthropic_request_fields(fake_provider):
    client = make(fake_provider, "anthropic", key="ak-0123456", reasoning=True, thinking_budget=2048,
                  max_tokens=4096)
    r = client.chat(ChatRequest("Explain lifetimes", system="sys", structured=True))
    assert r.content == "Answer to: Explain lifetimes" and r.reasoning_kind == "summary"
    sent = fake_provider.chat_requests()[-1]
    assert sent.path == "/messages"
    assert sent.headers["x-api-key"] == "ak-0123456" and sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body == {"model": "m1", "max_tokens": 4096, "system": "sys",
                         "messages": [{"role": "user", "content": "Explain lifetimes"}],
                         "thinking": {"type": "enabled", "budget_tokens": 2048}}


def test_no_key_no_auth_header_and_trailing_slash(fake_provider):
    client = make(fake_provider.url + "/")
    client.chat(ChatRequest("hi"))
    sent = fake_provider.chat_requests()[-1]
    assert sent.path == "/chat/completions" and "authorization" not in sent.headers


@pytest.mark.parametrize(
    "protocol, form, kind, reasoning",
    [
        ("openai", "reasoning", "raw", "R"),
        ("openai", "reasoning_content", "raw", "R"),
        ("openai", "details_text", "raw", "R"),
        ("openai", "details_summary", "summary", "R"),
        ("openai", "details_encrypted", "redacted", None),
        ("openai", "think", "raw", "R"),
        ("anthropic", "thinking", "summary", "R"),
        ("anthropic", "redacted", "redacted", None),
        ("anthropic", "empty_thinking", "redacted", None),
    ],
)
def test_extraction_paths_over_the_wire(fake_provider, protocol, form, kind, reasoning):
    fake_provider.script(Answer(content="C", reasoning="R", form=form, usage=(7, 9)))
    r = make(fake_provider, protocol).chat(ChatRequest("q"))
    assert (r.content, r.reasoning, r.reasoning_kind, r.usage) == ("C", reasoning, kind, Usage(7, 9))


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("finish", ["stop", "length", "refusal", "other"])
def test_finish_reasons(fake_provider, protocol, finish):
    reply = Answer.refused() if finish == "refusal" else Answer(content="x", finish=finish)
    fake_provider.script(reply)
    assert make(fake_provider, protocol).chat(ChatRequest("q")).finish_reason == finish


def test_content_filter_and_missing_usage(fake_provider):
    fake_provider.script(Answer(content="", finish="content_filter", usage=None))
    r = make(fake_provider).chat(ChatRequest("q"))
    assert r.finish_reason == "content_filter" and r.usage == Usage(0, 0)


# --- structured output --------------------------------------------------------------------------

def test_default_list_answers_for_both_protocols(fake_provider):
    prompt = "List subtopics. Reply with a JSON array of 5 strings and nothing else."
    structured = make(fake_provider).chat(ChatRequest(prompt, structured=True))
    assert fake_provider.chat_requests()[-1].body["response_format"]["type"] == "json_schema"
    items = string_array(structured.content)
    assert len(items) == 5 and len(set(items)) == 5
    plain = make(fake_provider, "anthropic").chat(ChatRequest(prompt, structured=True))
    assert "response_format" not in fake_provider.chat_requests()[-1].body
    assert string_array(plain.content) == items


def test_structured_refused_falls_back_and_sticks(fake_provider):
    client = make(fake_provider)
    fake_provider.script(Fault.bad_request("response_format json_schema is not supported"))
    notes = []
    ask = ChatRequest("Reply with a JSON array of 2 strings", structured=True)
    r = client.chat(ask, on_retry=notes.append)
    assert len(string_array(r.content)) == 2
    assert notes == ["HTTP 400: response_format json_schema is not supported; "
                     "retrying without structured output"]
    bodies = [q.body for q in fake_provider.chat_requests()]
    assert "response_format" in bodies[0] and "response_format" not in bodies[1]
    client.chat(ChatRequest("Reply with a JSON array of 2 strings", structured=True))
    assert "response_format" not in fake_provider.chat_requests()[-1].body


def test_structured_output_falls_back_only_on_a_refusal_of_response_format(fake_provider):
    client = make(fake_provider, max_retries=1)
    # Transport errors (here 5xx after the retries) are no refusal: raised, structure kept.
    fake_provider.script(Fault.server_error(), Fault.server_error())
    notes = []
    with pytest.raises(LlmError, match="HTTP 500"):
        client.chat(ChatRequest("Reply with a JSON array of 2 strings", structured=True), on_retry=notes.append)
    assert not any("without structured output" in n for n in notes)
    # A 400 about something else is no refusal either.
    fake_provider.script(Fault.bad_request("max_tokens is too large"))
    with pytest.raises(LlmError, match="max_tokens is too large"):
        client.chat(ChatRequest("again", structured=True))
    assert all("response_format" in r.body for r in fake_provider.chat_requests())
    # A 422 naming response_format is: sent again without it, and never asked for again.
    fake_provider.script(Fault(422, {"error": {"message": "response_format json_schema unsupported"}}))
    client.chat(ChatRequest("Reply with a JSON array of 2 strings", structured=True), on_retry=notes.append)
    assert notes[-1] == "HTTP 422: response_format json_schema unsupported; retrying without structured output"
    client.chat(ChatRequest("again", structured=True))
    assert ["response_format" in r.body for r in fake_provider.chat_requests()[-3:]] == [True, False, False]


def test_fatal_error_is_not_retried_without_structure(fake_provider):
    fake_provider.script(Fault.not_found())
    with pytest.raises(LlmError) as e:
        make(fake_provider).chat(ChatRequest("q", structured=True))
    assert e.value.fatal and str(e.value) == "HTTP 404: model not found"
    assert len(fake_provider.chat_requests()) == 1


# --- embeddings ---------------------------------------------------------------------------------

def test_embeddings_in_chunks(fake_provider):
    client = make(fake_provider, model="emb")
    texts = [f"text {i}" for i in range(600)]
    vectors = client.embed(texts)
    assert vectors == [embedding(t) for t in texts]
    sizes = [len(r.body["input"]) for r in fake_provider.embedding_requests()]
    assert sizes == [256, 256, 88]
    assert fake_provider.embedding_requests()[0].body["encoding_format"] == "float"
    assert client.embed([]) == [] and len(fake_provider.embedding_requests()) == 3


def test_embedding_count_mismatch_and_anthropic(fake_provider):
    fake_provider.script_embeddings({"data": [{"index": 0, "embedding": [1.0]}]})
    with pytest.raises(LlmError, match="invalid response: 1 embeddings for 2 inputs"):
        make(fake_provider).embed(["a", "b"])
    with pytest.raises(LlmError, match="embeddings are not supported by this protocol") as e:
        make(fake_provider, "anthropic").embed(["a"])
    assert e.value.fatal


# --- errors and retries -------------------------------------------------------------------------

def test_429_retry_after_is_honoured(fake_provider):
    fake_provider.script(Fault.rate_limited(0.05), Fault.rate_limited(0.05))
    notes = []
    start = time.monotonic()
    r = make(fake_provider).chat(ChatRequest("q"), on_retry=notes.append)
    assert r.content == "Answer to: q"
    assert time.monotonic() - start >= 0.1
    assert notes == ["HTTP 429: rate limit exceeded; retrying in 0.05s"] * 2


def test_server_error_storm_gives_up_after_max_retries(fake_provider):
    fake_provider.script(*[Fault.server_error(503)] * 10)
    notes = []
    with pytest.raises(LlmError) as e:
        make(fake_provider, max_retries=2).chat(ChatRequest("q"), on_retry=notes.append)
    assert str(e.value) == "HTTP 503: upstream exploded" and e.value.retryable and not e.value.fatal
    assert len(fake_provider.chat_requests()) == 3 and len(notes) == 2
    assert all(n.startswith("HTTP 503: upstream exploded; retrying in ") for n in notes)


def test_connection_refused_is_retried_then_fails(monkeypatch):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    # Two attempts: a third refused one would trip the breaker (a provider never reached).
    client = make(url, max_retries=1)  # the price listing fails quietly
    notes = []
    with pytest.raises(LlmError) as e:
        client.chat(ChatRequest("q"), on_retry=notes.append)
    assert str(e.value) == "request failed (connection refused)" and e.value.retryable
    assert len(notes) == 1 and url not in str(e.value)


def test_total_timeout_and_cut_off_body(fake_provider):
    fake_provider.script(Answer(content="late", delay=0.6))
    with pytest.raises(LlmError, match=r"^request failed \(timed out\)$"):
        make(fake_provider, max_retries=0, timeout=0.2).chat(ChatRequest("q"))
    fake_provider.script(Raw.cut_off(), Answer(content="whole"))
    notes = []
    assert make(fake_provider, max_retries=1).chat(ChatRequest("q"), on_retry=notes.append).content == "whole"
    assert notes and notes[0].startswith("request failed")


def test_malformed_json_fails_the_item_without_retry(fake_provider):
    fake_provider.script(Raw.malformed())
    with pytest.raises(LlmError) as e:
        make(fake_provider).chat(ChatRequest("q"))
    assert str(e.value) == "invalid response: not JSON" and not e.value.retryable and not e.value.fatal
    assert len(fake_provider.chat_requests()) == 1


def test_401_is_fatal_and_never_echoes_the_key(fake_provider, caplog):
    caplog.set_level(logging.DEBUG)
    fake_provider.api_key = "sk-the-right-one"
    client = make(fake_provider, key="sk-wrong-SECRET-42")
    with pytest.raises(LlmError) as e:
        client.chat(ChatRequest("q"))
    assert e.value.fatal and e.value.status == 401 and e.value.reason == AUTH_FAILED
    assert str(e.value) == ("provider fake: authentication failed; check its API key "
                            "(OVERBRAINER_PROVIDERS__FAKE__API_KEY)")
    assert len(fake_provider.chat_requests()) == 1
    assert "sk-wrong-SECRET-42" not in caplog.text


def test_other_statuses(fake_provider):
    fake_provider.script(Fault(403, {"error": {"message": "key sk-zzz-9999 lacks access"}}))
    with pytest.raises(LlmError) as e:
        make(fake_provider).chat(ChatRequest("q"))
    assert e.value.reason == PERMISSION_DENIED and e.value.fatal and e.value.exit_code == 77
    # This client has no key: the line says to set one.
    assert str(e.value) == "provider fake: permission denied; it has no API key: set OVERBRAINER_PROVIDERS__FAKE__API_KEY"
    fake_provider.script(Fault(402, b"pay up " + b"x" * 400))
    with pytest.raises(LlmError) as e:
        make(fake_provider).chat(ChatRequest("q"))
    assert e.value.fatal and str(e.value) == "credits: provider fake: pay up " + "x" * 293  # 402 is money
    assert e.value.exit_code == 77
    fake_provider.script(Fault(422, {"error": "bad field"}))
    with pytest.raises(LlmError) as e:
        make(fake_provider).chat(ChatRequest("q"))
    assert str(e.value) == "HTTP 422: bad field" and not e.value.fatal and not e.value.retryable
    fake_provider.script(Fault(408, {}), Fault(529, {"error": {"message": "overloaded"}}))
    notes = []
    make(fake_provider).chat(ChatRequest("q"), on_retry=notes.append)
    assert notes[0].startswith("HTTP 408: {}") and notes[1].startswith("HTTP 529: overloaded")


def test_retry_after_parsing():
    assert http.parse_retry_after("1.5") == 1.5
    assert http.parse_retry_after("0") == 0.0
    for bad in (None, "", "-1", "nan", "inf", "soon"):
        assert http.parse_retry_after(bad) is None
    assert http.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # an HTTP-date past: at once
    assert http.parse_retry_after("3600") == 3600.0  # uncapped here: the wait caps it (below)


def test_retry_after_is_capped(fake_provider, monkeypatch):
    monkeypatch.setattr(http, "RETRY_AFTER_CAP", 0.05)
    fake_provider.script(Fault.rate_limited(3600))
    notes = []
    make(fake_provider).chat(ChatRequest("q"), on_retry=notes.append)
    assert notes == ["HTTP 429: rate limit exceeded; retrying in 0.05s"]


def test_backoff_range(monkeypatch):
    monkeypatch.setattr(http, "BACKOFF_BASE", 1.0)
    for attempt, cap in ((1, 1), (3, 4), (7, 60), (10, 60)):
        waits = [http.backoff(attempt) for _ in range(50)]
        assert all(0.5 * cap <= w <= cap for w in waits)


def test_stop_event_cancels_a_retry_wait(fake_provider):
    stop = threading.Event()
    fake_provider.script(Fault.rate_limited(30))
    client = make(fake_provider, stop=stop)
    start = time.monotonic()
    with pytest.raises(LlmCancelled) as e:
        client.chat(ChatRequest("q"), on_retry=lambda _msg: stop.set())
    assert isinstance(e.value, Interrupted) and time.monotonic() - start < 5
    with pytest.raises(LlmCancelled):
        client.chat(ChatRequest("q"))  # already set: nothing is sent
    assert len(fake_provider.chat_requests()) == 1


def test_a_429_pauses_every_thread_of_the_provider(fake_provider):
    arrivals = []
    fake_provider.responder = lambda req: arrivals.append((req.prompt, time.monotonic())) or None
    fake_provider.script(Fault.rate_limited(0.4))
    shared = llm_session()  # the command's
    first = make(fake_provider, llm=shared)
    second = make(fake_provider, llm=shared)  # another role on the same provider
    got_429 = threading.Event()
    results = {}

    def slow_one():
        results["first"] = first.chat(ChatRequest("first"), on_retry=lambda _m: got_429.set())

    t = threading.Thread(target=slow_one)
    t.start()
    assert got_429.wait(5)
    cooled_at = time.monotonic()
    threads = [threading.Thread(target=lambda i=i: second.chat(ChatRequest(f"other {i}"))) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads + [t]:
        th.join(10)
    others = [at for prompt, at in arrivals if prompt.startswith("other")]
    assert len(others) == 4 and results["first"].content == "Answer to: first"
    assert min(others) >= cooled_at + 0.3


# --- connect, pool, prices ----------------------------------------------------------------------

def test_missing_base_url_and_bad_protocol():
    provider = Provider("openrouter", "openai")
    with pytest.raises(OverbrainerError) as e:
        connect(provider, Role("x", "m"), Pipeline(concurrency=1, max_retries=0, request_timeout_secs=1),
                llm=llm_session())
    assert str(e.value) == ("providers.openrouter.base_url is not set "
                            "(set OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL)")
    provider = Provider("x", "grpc", "http://127.0.0.1:9")
    with pytest.raises(OverbrainerError, match="providers.x.protocol"):
        connect(provider, Role("x", "m"), Pipeline(concurrency=1, max_retries=0, request_timeout_secs=1),
                llm=llm_session())


def test_bad_key_header_is_fatal_without_the_value(fake_provider):
    with pytest.raises(LlmError) as e:
        make(fake_provider, key="sk-abc\nInjected: 1")
    assert e.value.fatal and "Injected" not in str(e.value)


def test_pool_holds_the_concurrency(fake_provider, caplog):
    caplog.set_level(logging.DEBUG, logger="urllib3")
    fake_provider.hold_until = 24  # every request waits until all 24 are in flight at once
    client = make(fake_provider, concurrency=24)
    assert client.channel.pool_size >= 24
    for _round in range(2):
        threads = [threading.Thread(target=client.chat, args=(ChatRequest(f"q{i}"),)) for i in range(24)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(10)
    assert fake_provider.max_in_flight == 24
    assert "Connection pool is full" not in caplog.text
    assert caplog.text.count("Starting new HTTP connection") <= 24


@pytest.mark.parametrize("shape", ["openrouter", "nanogpt", "bare"])
def test_prices_from_the_listing(fake_provider, shape):
    fake_provider.models = {"m1": (2.0, 8.0), "m2": (1.0, 1.0)}
    fake_provider.models_shape = shape
    book = PriceBook()
    gen = make(fake_provider, prices=book)
    parent = make(fake_provider, prices=book, model="m2")
    assert gen.cost(Usage(1000, 500)) == pytest.approx(0.006)
    assert parent.cost(Usage(1_000_000, 0)) == pytest.approx(1.0)
    assert [r.path for r in fake_provider.requests].count("/models") == 1


def test_unknown_prices_never_fail(fake_provider, caplog):
    caplog.set_level(logging.INFO, logger="overbrainer.llm")
    book = PriceBook()
    for _ in range(2):  # a client rebuilt (the next stage of `run`) says it once
        assert make(fake_provider, model="unlisted", prices=book).cost(Usage(10, 10)) is None
    assert caplog.text.count("no price known for model unlisted; showing tokens only") == 1
    fake_provider.script_models(Fault.server_error())
    assert make(fake_provider).cost(Usage(1, 1)) is None
    assert "cannot read model prices (HTTP 500: upstream exploded); showing tokens only" in caplog.text
    fake_provider.script_models(Raw(b"[]", delay=0.6))
    assert make(fake_provider, prices=PriceBook(timeout=0.2)).cost(Usage(1, 1)) is None
    assert "model prices not received within 0.2s; showing tokens only" in caplog.text


def test_default_answers_suit_the_pipeline(fake_provider):
    client = make(fake_provider)
    ask = "Write questions. Reply with a JSON array of 4 strings."
    a = string_array(client.chat(ChatRequest(ask)).content)
    b = string_array(client.chat(ChatRequest("Other prompt. Reply with a JSON array of 4 strings.")).content)
    assert len(a) == 4 and len(b) == 4 and not set(a) & set(b)
    words = [set(x.lower().split()) for x in a + b]
    assert all(len(w1 & w2) <= 3 for i, w1 in enumerate(words) for w2 in words[i + 1:])
    again = string_array(client.chat(ChatRequest(ask)).content)
    assert again == a  # deterministic
    vectors = client.embed(a + [a[0]])
    assert vectors[0] == vectors[-1] and vectors[0] != vectors[1]


def test_the_clients_settings_and_their_defaults_are_the_configurations(fake_provider):
    """llm/ keeps no default of its own: a role and pipeline that set nothing give the client
    config/model's defaults (before, LlmClient repeated them, and the plan another copy)."""
    from overbrainer.config import model
    from overbrainer.llm import client as client_module

    c = connect(Provider("fake", "openai", fake_provider.url), Role("fake", "m1"), Pipeline(), llm=llm_session(), prices=PriceBook())
    assert c.max_tokens(ChatRequest("q")) == model.Role("fake", "m1").max_tokens == model.DEFAULT_MAX_TOKENS
    assert (c._timeout, c._max_retries) == (Pipeline().request_timeout_secs, Pipeline().max_retries)
    assert not hasattr(client_module, "DEFAULT_MAX_TOKENS")
    c = connect(Provider("fake", "openai", fake_provider.url), Role("fake", "m1", max_tokens=7),
                Pipeline(max_retries=0, request_timeout_secs=3), llm=llm_session(), prices=PriceBook())
    assert (c.max_tokens(ChatRequest("q")), c._timeout, c._max_retries) == (7, 3.0, 0)
