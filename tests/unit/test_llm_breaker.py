"""The circuit breaker's rules, on an injected clock (the time limit is tested without waiting)."""

from __future__ import annotations

from overbrainer.llm.breaker import Breaker
from overbrainer.support.failure import FailureKind

REFUSED, DNS, TLS, CONNECT = FailureKind.REFUSED, FailureKind.DNS, FailureKind.TLS, FailureKind.CONNECT
TIMEOUT, CUT_OFF, SERVER = FailureKind.TIMEOUT, FailureKind.CUT_OFF, FailureKind.SERVER


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_trips_on_3_x_concurrency_failures_of_one_kind_in_a_row():
    b = Breaker(clock=Clock())
    b.configure(concurrency=2, request_timeout=60)
    assert b.limit == 6
    assert not any(b.failure(TIMEOUT, "timed out") for _ in range(5))
    assert b.failure(TIMEOUT, "timed out") and b.tripped.is_set() and b.reason == "timed out"


def test_a_success_another_kind_or_an_answer_breaks_the_streak():
    b = Breaker(clock=Clock())
    b.configure(concurrency=1, request_timeout=60)
    for breaker_of_streak in (b.success, b.answered, lambda: b.failure(SERVER, "HTTP 503: x")):
        assert not b.failure(REFUSED, "connection refused")
        assert not b.failure(REFUSED, "connection refused")
        breaker_of_streak()
    assert not b.tripped.is_set()
    assert not b.failure(REFUSED, "connection refused")
    assert not b.failure(REFUSED, "connection refused")
    assert b.failure(REFUSED, "connection refused")


def test_trips_after_max_10_min_3_x_timeout_without_a_success():
    clock = Clock()
    b = Breaker(clock=clock)
    b.configure(concurrency=100, request_timeout=300)  # streak of 300: never reached here
    assert b.window == 900
    kinds = [REFUSED, TIMEOUT]
    for i in range(11):  # failures of changing kinds, 89 s apart (the last at 890 s): no trip yet
        assert not b.failure(kinds[i % 2], kinds[i % 2].text)
        clock.now += 89.0
    b.answered()  # a 429 proves nothing: the clock goes on
    assert b.failure(TIMEOUT, "timed out")  # 979 s after the first failure
    assert b.reason == "timed out (no answer for 16 min)"


def test_a_success_restarts_the_clock_and_a_trip_is_final():
    clock = Clock()
    b = Breaker(clock=clock)
    b.configure(concurrency=100, request_timeout=1)
    assert b.window == 600
    assert not b.failure(TIMEOUT, "timed out")
    clock.now += 599
    b.success()
    assert not b.failure(SERVER, "HTTP 500: boom")
    clock.now += 599
    assert not b.failure(TIMEOUT, "timed out")
    clock.now += 1
    assert b.failure(TIMEOUT, "timed out")
    b.success()  # an answer that was already on its way changes nothing
    assert b.tripped.is_set() and b.failure(CUT_OFF, "x")


def test_a_provider_never_reached_trips_after_3_failures_to_connect_at_any_concurrency():
    for kind in (REFUSED, DNS, TLS, CONNECT):
        b = Breaker(clock=Clock())
        b.configure(concurrency=64, request_timeout=60)  # the streak rule would wait for 192
        assert not b.failure(kind, kind.text) and not b.failure(kind, kind.text)
        assert b.failure(kind, kind.text) and b.reason == kind.text


def test_the_3_failure_rule_needs_a_provider_that_never_answered_and_a_failure_to_connect():
    b = Breaker(clock=Clock())
    b.configure(concurrency=8, request_timeout=60)
    b.answered()  # it was there once: only the streak of 24 (or the time limit) trips it
    assert not any(b.failure(REFUSED, "connection refused") for _ in range(23))
    assert b.failure(REFUSED, "connection refused")
    for kind in (TIMEOUT, SERVER, CUT_OFF):  # a server loading its model
        b = Breaker(clock=Clock())
        b.configure(concurrency=8, request_timeout=60)
        assert not any(b.failure(kind, kind.text) for _ in range(23))
    b = Breaker(clock=Clock())
    b.configure(concurrency=8, request_timeout=60)
    assert not b.failure(REFUSED, "connection refused")
    assert not b.failure(DNS, "DNS lookup failed")  # not the same way
    assert not b.failure(REFUSED, "connection refused")


def test_the_failures_to_connect_are_kinds_not_words(monkeypatch):
    from overbrainer.support import failure

    assert {k for k in FailureKind if k.connecting} == {REFUSED, DNS, TLS, CONNECT}
    # Another wording changes the messages, never which failures count as no connection.
    for kind in FailureKind:
        monkeypatch.setitem(failure.WORDS, kind, f"worded anew: {kind.name}")
    b = Breaker(clock=Clock())
    b.configure(concurrency=64, request_timeout=60)
    assert not b.failure(REFUSED, REFUSED.text) and not b.failure(REFUSED, REFUSED.text)
    assert b.failure(REFUSED, REFUSED.text) and b.reason == "worded anew: REFUSED"
