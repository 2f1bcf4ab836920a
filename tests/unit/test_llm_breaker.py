"""The circuit breaker's rules, on an injected clock (the time limit is tested without waiting)."""

from __future__ import annotations

from overbrainer.llm.breaker import Breaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_trips_on_3_x_concurrency_failures_of_one_kind_in_a_row():
    b = Breaker(clock=Clock())
    b.configure(concurrency=2, request_timeout=60)
    assert b.limit == 6
    assert not any(b.failure("timed out", "timed out") for _ in range(5))
    assert b.failure("timed out", "timed out") and b.tripped.is_set() and b.reason == "timed out"


def test_a_success_another_kind_or_an_answer_breaks_the_streak():
    b = Breaker(clock=Clock())
    b.configure(concurrency=1, request_timeout=60)
    for breaker_of_streak in (b.success, b.answered, lambda: b.failure("server error", "HTTP 503: x")):
        assert not b.failure("connection refused", "connection refused")
        assert not b.failure("connection refused", "connection refused")
        breaker_of_streak()
    assert not b.tripped.is_set()
    assert not b.failure("connection refused", "connection refused")
    assert not b.failure("connection refused", "connection refused")
    assert b.failure("connection refused", "connection refused")


def test_trips_after_max_10_min_3_x_timeout_without_a_success():
    clock = Clock()
    b = Breaker(clock=clock)
    b.configure(concurrency=100, request_timeout=300)  # streak of 300: never reached here
    assert b.window == 900
    kinds = ["connection refused", "timed out"]
    for i in range(11):  # failures of changing kinds, 89 s apart (the last at 890 s): no trip yet
        assert not b.failure(kinds[i % 2], kinds[i % 2])
        clock.now += 89.0
    b.answered()  # a 429 proves nothing: the clock goes on
    assert b.failure("timed out", "timed out")  # 979 s after the first failure
    assert b.reason == "timed out (no answer for 16 min)"


def test_a_success_restarts_the_clock_and_a_trip_is_final():
    clock = Clock()
    b = Breaker(clock=clock)
    b.configure(concurrency=100, request_timeout=1)
    assert b.window == 600
    assert not b.failure("timed out", "timed out")
    clock.now += 599
    b.success()
    assert not b.failure("server error", "HTTP 500: boom")
    clock.now += 599
    assert not b.failure("timed out", "timed out")
    clock.now += 1
    assert b.failure("timed out", "timed out")
    b.success()  # an answer that was already on its way changes nothing
    assert b.tripped.is_set() and b.failure("x", "x")
