"""Pacing at the provider's rate limits (llm/pacing.py) against the fake provider enforcing them
as the providers' references describe (tests/fixtures/provider_limits.py): limits of a few
requests a second, so that each test takes a few seconds. The targets at real sizes are
scripts/bench_ratelimit.py's."""

from __future__ import annotations

import threading
import time

import pytest

from overbrainer.config.model import Pipeline, Provider, Role
from overbrainer.llm import http
from overbrainer.llm.client import connect
from overbrainer.llm.http import LlmSession
from overbrainer.llm.prices import PriceBook
from overbrainer.llm.types import ChatRequest
from tests.fixtures.provider import Fault, RateLimits


def client(fake, *, protocol="openai", dialect=None, concurrency=8, max_tokens=100, pacing=True,
           model="m1", max_retries=5, **provider_kw):
    provider = Provider("fake", protocol, fake.url, dialect=dialect, **provider_kw)
    session = LlmSession(pacing=pacing)
    role = Role("fake", model, max_tokens=max_tokens)
    pipeline = Pipeline(concurrency=concurrency, max_retries=max_retries, request_timeout_secs=30)
    return connect(provider, role, pipeline, llm=session, prices=PriceBook()), session


def ask_all(c, n, text="question {i} about the bounded cache and the lazy allocator"):
    """`n` chats on `n` threads at once; the errors they raised."""
    errors: list[BaseException] = []

    def ask(i):
        try:
            c.chat(ChatRequest(text.format(i=i)))
        except Exception as e:  # noqa: BLE001 - counted
            errors.append(e)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


@pytest.fixture
def session_closer():
    sessions = []
    yield sessions
    for s in sessions:
        s.close()


def test_openai_limits_are_paced_from_the_headers_without_a_429(fake_provider, session_closer):
    # 180 requests a minute enforced over each second (3 a second), as OpenAI may enforce them.
    fake_provider.dialect = "openai"
    fake_provider.latency = 0.05
    fake_provider.rate_limits = RateLimits(requests=180, tokens=1_000_000, window=1.0)
    c, s = client(fake_provider, dialect="openai", concurrency=16)
    session_closer.append(s)
    start = time.monotonic()
    assert ask_all(c, 15) == []
    took = time.monotonic() - start
    stats = fake_provider.rate_limits.stats()
    assert stats == {**stats, "admitted": 15, "refused": 0}
    # The first alone (its answer says the limits), then a second's burst, then 3 a second at most.
    assert took >= (15 - 1 - 3) / 3
    assert c.pacer.limits()["requests"] == pytest.approx(180)


def test_without_pacing_the_same_load_meets_429s(fake_provider, session_closer, monkeypatch):
    monkeypatch.setattr(http, "BACKOFF_BASE", 0.05)
    fake_provider.dialect = "openai"
    fake_provider.latency = 0.05
    fake_provider.rate_limits = RateLimits(requests=180, tokens=1_000_000, window=1.0)
    c, s = client(fake_provider, dialect="openai", concurrency=16, pacing=False, max_retries=3)
    session_closer.append(s)
    failed = ask_all(c, 15)
    assert fake_provider.rate_limits.stats()["refused"] >= 10 and failed


def test_tokens_are_paced_at_max_tokens_and_corrected_by_the_usage(fake_provider, session_closer):
    # 6,000 tokens a minute (100 a second), a request reserving ~1,000 at max_tokens and using ~30:
    # without the correction by the usage, 15 requests would need 2.5 minutes.
    fake_provider.dialect = "openai"
    fake_provider.rate_limits = RateLimits(requests=6_000, tokens=6_000, window=1.0)
    c, s = client(fake_provider, dialect="openai", concurrency=8, max_tokens=1_000)
    session_closer.append(s)
    start = time.monotonic()
    assert ask_all(c, 15) == []
    assert time.monotonic() - start < 20
    assert fake_provider.rate_limits.stats()["refused"] == 0


def test_anthropic_output_tokens_are_paced_apart(fake_provider, session_closer):
    fake_provider.latency = 0.05
    # 2,400 output tokens a minute, enforced over each second: two requests' max_tokens a second.
    fake_provider.rate_limits = RateLimits(requests=600, input_tokens=100_000, output_tokens=2_400, window=1.0,
                                           token_window=1.0)
    c, s = client(fake_provider, protocol="anthropic", model="claude-sonnet-4-5", concurrency=8, max_tokens=20)
    session_closer.append(s)
    start = time.monotonic()
    assert ask_all(c, 10) == []
    assert time.monotonic() - start >= (10 - 1 - 2) / 2
    assert fake_provider.rate_limits.stats()["refused"] == 0
    assert set(c.pacer.limits()) == {"requests", "input_tokens", "output_tokens"}


def test_configured_limits_pace_a_server_that_publishes_none(project, fake_provider):
    # A gateway enforcing 240 requests a minute over each second, and saying nothing of it.
    project.write(topics=1, subtopics=1, questions=10, pipeline={"concurrency": 8, "max_retries": 1})
    assert project.stage("questions")[2] is None
    fake_provider.rate_limits = RateLimits(requests=240, window=1.0, publish=False)
    project.env["OVERBRAINER_PROVIDERS__FAKE__MAX_REQUESTS_PER_MINUTE"] = "240"
    texts, _, err = project.stage("answers")
    assert err is None and texts[0].startswith("answers: 10 questions, 10 answers written;"), texts
    assert fake_provider.rate_limits.stats()["refused"] == 0


def test_unconfigured_the_same_gateway_fails_questions(project, fake_provider):
    project.write(topics=1, subtopics=1, questions=10, pipeline={"concurrency": 8, "max_retries": 1})
    assert project.stage("questions")[2] is None
    fake_provider.rate_limits = RateLimits(requests=240, window=1.0, publish=False)
    texts, _, err = project.stage("answers")
    assert fake_provider.rate_limits.stats()["refused"] > 0
    assert err is not None and "failed" in texts[0]


def test_openrouter_limits_learned_from_its_first_429(fake_provider, session_closer):
    # OpenRouter says its limits on a 429 only (headers and error metadata), with no Retry-After.
    fake_provider.dialect = "openrouter"
    fake_provider.latency = 0.05
    fake_provider.rate_limits = RateLimits(requests=180, window=1.0)
    c, s = client(fake_provider, dialect="openrouter", concurrency=8)
    session_closer.append(s)
    assert ask_all(c, 12) == []
    stats = fake_provider.rate_limits.stats()
    assert stats["admitted"] == 12 and stats["refused"] <= 8  # the first burst only
    assert c.pacer.limits()["requests"] == pytest.approx(180)


def test_a_concurrency_limit_the_provider_does_not_say_shrinks_what_is_in_flight(fake_provider, session_closer):
    fake_provider.latency = 0.1
    refused = []

    def crowded(req):
        if fake_provider.max_in_flight > 3 and fake_provider._in_flight > 3:
            refused.append(1)
            return Fault.rate_limited(None)
        return None

    fake_provider.responder = crowded
    c, s = client(fake_provider, concurrency=12, max_retries=8)
    session_closer.append(s)
    assert ask_all(c, 40) == []
    assert c.pacer.stats()["allowed"] < 12
    assert len(refused) < 40


CONFIG = """
[project]
name = "demo"
[[topics]]
name = "t"
subtopics = 1
questions_per_subtopic = 1
[providers.fake]
protocol = "openai"
{keys}
[roles]
generator = {{ provider = "fake", model = "m" }}
parent = {{ provider = "fake", model = "m" }}
"""


def test_provider_limit_keys_are_checked(tmp_path, cli):
    (tmp_path / "overbrainer.toml").write_text(CONFIG.format(keys="""max_requests_per_minute = 0
max_tokens_per_minute = "lots"
batch_queue_tokens = 90000"""))
    r = cli(["-C", str(tmp_path), "config", "check"])
    assert r.returncode == 2
    assert "providers.fake.max_requests_per_minute: must be at least 1" in r.stderr
    assert "providers.fake.max_tokens_per_minute: expected an integer" in r.stderr
    # The queue limit is that of OpenAI's batch API: a generic server has none.
    assert "providers.fake.batch_queue_tokens: only for a provider with OpenAI's batch API (dialect openai)" \
        in r.stderr


def test_provider_limit_keys_are_shown(tmp_path, cli):
    (tmp_path / "overbrainer.toml").write_text(CONFIG.format(keys="""dialect = "openai"
max_requests_per_minute = 500
max_tokens_per_minute = 200000
batch_queue_tokens = 90000"""))
    r = cli(["-C", str(tmp_path), "config", "check"], env={"OVERBRAINER_PROVIDERS__FAKE__BASE_URL": "http://127.0.0.1:9"})

    assert r.returncode == 0, r.stderr
    for line in ("providers.fake.max_requests_per_minute = 500", "providers.fake.max_tokens_per_minute = 200000",
                 "providers.fake.batch_queue_tokens = 90000"):
        assert line in r.stdout


def test_a_429_s_retry_after_holds_its_model_only(fake_provider, session_closer):
    # Limits are per model: a 429 on one model says nothing of another's room on the same provider.
    refused = threading.Event()

    def busy_once(req):
        if req.body.get("model") == "busy" and not refused.is_set():
            refused.set()
            return Fault.rate_limited(3)
        return None

    fake_provider.responder = busy_once
    busy, s = client(fake_provider, model="busy")
    session_closer.append(s)
    free = connect(Provider("fake", "openai", fake_provider.url), Role("fake", "free", max_tokens=100),
                   Pipeline(concurrency=8, max_retries=5, request_timeout_secs=30), llm=s, prices=PriceBook())
    first = threading.Thread(target=busy.chat, args=(ChatRequest("first"),))
    first.start()
    assert refused.wait(10)
    time.sleep(0.3)  # the 429 read by the client
    start = time.monotonic()
    free.chat(ChatRequest("second"))
    assert time.monotonic() - start < 1.5
    first.join(10)
    assert not first.is_alive() and busy.pacer.stats()["throttled"] == 1
