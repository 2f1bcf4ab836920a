"""The pacer at a provider's rate limits (llm/pacing.py), on a fake clock: what it lets through
when, how answers correct it, how a 429 shrinks what is in flight. Its waits in real time,
against the fake provider, are tests/integration/test_llm_pacing.py's."""

from __future__ import annotations

import math

import pytest

from overbrainer.llm.pacing import SAFETY, Configured, Pacer, prompt_tokens
from overbrainer.llm.rate_headers import Published
from overbrainer.support.usage import Usage
from tests.fixtures.pacers import ready_in


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pacer(concurrency=8, requests=None, tokens=None, probe=False):
    clock = Clock()
    return Pacer("p/m", concurrency, Configured(requests, tokens), probe=probe, clock=clock), clock


def take(p, inp=10, out=100):
    assert ready_in(p, inp, out) == 0
    return p.acquire(inp, out)


def test_nothing_known_nothing_paced():
    p, _ = pacer(concurrency=4)
    tickets = [take(p) for _ in range(4)]
    assert ready_in(p, 10, 100) == math.inf  # only `concurrency` in flight
    p.settle(tickets[0], Usage(10, 50))
    assert ready_in(p, 10, 100) == 0 and p.limits() == {}


def test_requests_leave_one_by_one_at_the_limit_from_the_first():
    # No opening burst (not even the second the bucket holds): the provider's bucket, full too,
    # keeps that second of room for requests that reach it bunched (network, scheduling).
    p, clock = pacer(concurrency=64, requests=600)
    take(p)
    assert ready_in(p, 10, 100) == pytest.approx(1 / (10 * SAFETY))
    for _ in range(20):
        clock.now += 1 / (10 * SAFETY)
        take(p)
    assert ready_in(p, 10, 100) == pytest.approx(1 / (10 * SAFETY))
    # A pause refills the bucket up to a second of the limit, never more.
    clock.now += 60
    burst = 0
    while ready_in(p, 10, 100) == 0:
        p.acquire(10, 100)
        burst += 1
    assert burst == 9  # a second of 600 a minute at SAFETY, never `concurrency` at once


def test_tokens_count_the_prompt_and_max_tokens_corrected_by_the_usage():
    p, clock = pacer(concurrency=64, tokens=60_000)
    rate = 1000 * SAFETY
    first = take(p, 1000, 50_000)  # the bucket holds a minute: 58,200
    assert ready_in(p, 1000, 50_000) == pytest.approx((51_000 - (58_200 - 51_000)) / rate)
    p.settle(first, Usage(900, 2_100))  # used 3,000 of the 51,000 taken
    assert ready_in(p, 1000, 50_000) == 0
    assert p.limits() == {"tokens": pytest.approx(60_000)}


def test_an_empty_usage_keeps_the_estimate():
    p, _ = pacer(concurrency=64, tokens=60_000)
    t = take(p, 1000, 50_000)
    p.settle(t, Usage())
    assert ready_in(p, 1000, 50_000) > 0


def test_published_limits_are_lowered_by_the_configured_ones_and_followed_down():
    p, clock = pacer(concurrency=64, requests=300)
    p.observe(Published(limit={"requests": 600, "tokens": 150_000}, remaining={"requests": 599, "tokens": 149_000}))
    assert p.limits() == {"requests": pytest.approx(300), "tokens": pytest.approx(150_000)}
    p.observe(Published(remaining={"tokens": 500}))  # another client spends the same key
    assert ready_in(p, 10, 1_000) == pytest.approx(510 / (2500 * SAFETY))
    p.observe(Published(limit={"tokens": 300_000}))  # a tier upgrade
    assert p.limits()["tokens"] == pytest.approx(300_000)
    assert p.published() == {"requests": 600, "tokens": 300_000}


def test_anthropic_input_and_output_are_paced_apart():
    p, _ = pacer(concurrency=64)
    p.observe(Published(limit={"requests": 50, "input_tokens": 30_000, "output_tokens": 8_000},
                        remaining={"requests": 50, "input_tokens": 30_000, "output_tokens": 8_000}))
    take(p, 100, 4_000)
    # The output bucket is what waits: 8,000 a minute, 4,000 reserved at max_tokens.
    assert ready_in(p, 100, 4_000) == pytest.approx((4_000 - (8_000 * SAFETY - 4_000)) / (8_000 * SAFETY / 60))
    assert ready_in(p, 100, 10) == pytest.approx(1 / (50 * SAFETY / 60))  # a bucket of one request


def test_the_first_request_goes_alone_when_the_provider_publishes_its_limits():
    p, clock = pacer(concurrency=64, probe=True)
    first = take(p)
    assert ready_in(p, 10, 100) == pytest.approx(30.0)  # waits for its answer (PROBE_WAIT at most)
    p.observe(Published(limit={"requests": 60}, remaining={"requests": 59}))
    p.settle(first, Usage(10, 20))
    assert ready_in(p, 10, 100) == 0
    take(p)
    assert ready_in(p, 10, 100) > 0  # paced from then on


def test_a_probe_answered_without_limits_opens_the_gates():
    p, clock = pacer(concurrency=3, probe=True)
    first = take(p)
    assert ready_in(p, 10, 100) > 0
    p.observe(Published())
    p.settle(first, Usage(10, 20))
    for _ in range(3):
        take(p)
    assert ready_in(p, 10, 100) == math.inf


def test_a_probe_unanswered_stops_holding_the_others_after_a_while():
    p, clock = pacer(concurrency=8, probe=True)
    take(p)
    clock.now += 31
    assert ready_in(p, 10, 100) == 0


def test_known_limits_need_no_probe():
    p, _ = pacer(concurrency=8, probe=True)
    p.learn({"requests": 600, "tokens": 150_000})
    take(p)
    # The second waits for the pace only, not for the first one's answer.
    assert ready_in(p, 10, 100) == pytest.approx(1 / (10 * SAFETY)) and p.limits()["requests"] == pytest.approx(600)


def test_a_429_halves_what_is_in_flight_once_a_round_and_regrows_while_there_is_room():
    p, clock = pacer(concurrency=8)
    tickets = [take(p) for _ in range(8)]
    p.failed(tickets[0], answered=True, limited=True)
    p.failed(tickets[1], answered=True, limited=True)  # sent before the cut: the same round
    assert p.stats()["allowed"] == 4 and p.stats()["throttled"] == 2
    assert ready_in(p, 10, 100) == math.inf  # 6 in flight, 4 allowed
    p.settle(tickets[2], Usage(1, 1))
    p.settle(tickets[3], Usage(1, 1))  # each success with room grows it by 1/allowed
    assert p.stats()["allowed"] == pytest.approx(4 + 1 / 4 + 1 / 4.25)
    assert ready_in(p, 10, 100) == math.inf  # 4 in flight
    p.settle(tickets[4], Usage(1, 1))
    assert ready_in(p, 10, 100) == 0
    clock.now += 1
    again = take(p)
    p.failed(again, answered=True, limited=True)  # sent after the cut: halves again, from what is in flight
    assert p.stats()["allowed"] == 2


def test_retry_after_holds_everyone():
    p, clock = pacer(concurrency=8)
    t = take(p)
    assert p.failed(t, answered=True, limited=True, retry_after=5.0) is None
    assert ready_in(p, 10, 100) == pytest.approx(5.0)
    clock.now += 5
    assert ready_in(p, 10, 100) == 0


def test_a_429_without_retry_after_says_when_the_buckets_have_room():
    p, clock = pacer(concurrency=8, requests=60)
    t = take(p)
    p.observe(Published(remaining={"requests": 0}))
    wait = p.failed(t, answered=True, limited=True)
    # The request bucket (one request) was emptied, and a second more taken: the provider counts
    # refused requests, its own bucket may be in debt.
    assert wait == pytest.approx(2 / SAFETY)


@pytest.mark.parametrize("how, back", [
    (dict(answered=False, sent=False), 51_000),  # never sent: everything
    (dict(answered=True, limited=True), 51_000),  # refused: its tokens (the request still counts)
    (dict(answered=True), 50_000),  # another error answer: its output
    (dict(answered=False), 0),  # no answer says: it may have been processed
])
def test_what_a_failed_request_gives_back(how, back):
    p, _ = pacer(concurrency=64, tokens=60_000)
    before = ready_in(p, 0, 58_200)
    t = take(p, 1000, 50_000)
    p.failed(t, **how)
    assert ready_in(p, 0, 58_200) == pytest.approx(before + (51_000 - back) / (1000 * SAFETY))


def test_prompt_tokens_over_count_text():
    text = "How does the bounded cache interact with the lazy allocator under heavy load?" * 10
    assert prompt_tokens(text) > len(text) / 4
    assert prompt_tokens(None, "") == prompt_tokens()
