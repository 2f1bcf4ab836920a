"""Channels and circuit breakers live as long as the command or task that opened them (an
LlmSession, llm/http.py): in one long-lived process (the TUI), an outage met by one stage does not
stop the stages and runs that come after it."""

from __future__ import annotations

import pytest

from overbrainer.llm import http
from overbrainer.llm.errors import ProviderUnreachable
from overbrainer.llm.http import LlmSession
from tests.fixtures.provider import Fault


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(http, "BACKOFF_BASE", 0.01)


def test_a_stage_after_an_outage_starts_with_a_closed_breaker(project, fake_provider):
    project.write(topics=1, subtopics=2, pipeline={"concurrency": 1, "max_retries": 5})
    fake_provider.responder = lambda req: Fault.server_error(502)
    texts, _, err = project.stage("subtopics")
    assert isinstance(err, ProviderUnreachable), err
    assert "provider unreachable (HTTP 502: upstream exploded)" in texts[0]
    assert len(fake_provider.chat_requests()) == 3  # 3 × concurrency: the breaker tripped
    # The provider is back: the next stage in the same process asks it and gets its answers.
    fake_provider.responder = None
    fake_provider.clear()
    texts, _, err = project.stage("subtopics")
    assert err is None, err
    assert texts[0].startswith("subtopics: 1 topic, 2 subtopics written;")
    assert len(fake_provider.chat_requests()) == 1


def test_a_session_shares_a_channel_per_provider_and_closes_them(fake_provider):
    with LlmSession() as one:
        a = one.channel("fake", fake_provider.url, 4)
        assert one.channel("fake", fake_provider.url + "/", 24) is a and a.pool_size >= 24
        assert one.channel("other", fake_provider.url, 4) is not a
        a.breaker.failure(http.REFUSED, "connection refused")
        a.cool_down(60)
        with LlmSession() as two:  # another command's: nothing of the first one's state
            b = two.channel("fake", fake_provider.url, 4)
            assert b is not a and b.not_before == 0.0 and not b.breaker.tripped.is_set()
    # Closed: the session holds no channel any more; a new channel is a fresh one.
    fresh = one.channel("fake", fake_provider.url, 4)
    assert fresh is not a
    one.close()
