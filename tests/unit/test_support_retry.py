"""The one retry loop (overbrainer/support/retry.py): attempts, which errors are retried, the
waits said and slept (interruptible), `Again` for a result that calls for another try, one
controller per call whatever the threads."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from overbrainer.errors import Interrupted
from overbrainer.support.retry import Again, Policy, retrying


class _Flaky(Exception):
    pass


class _Counting:
    """An attempt failing its first `fail` tries, and what the loop said, asked and slept."""

    def __init__(self, fail: int):
        self.fail = fail
        self.tries, self.said, self.slept, self.asked = 0, [], [], []

    def attempt(self) -> str:
        self.tries += 1
        if self.tries <= self.fail:
            raise _Flaky(f"try {self.tries}")
        return f"answered on try {self.tries}"

    def delay(self, error, attempt):
        self.asked.append(attempt)
        return attempt / 1000

    def policy(self, attempts: int) -> Policy:
        return Policy(attempts, lambda e: isinstance(e, _Flaky), self.delay)

    def run(self, attempts: int) -> str:
        return retrying(self.policy(attempts), lambda e, s: self.said.append((str(e), s)),
                        sleep=self.slept.append)(self.attempt)


def test_retries_wait_say_so_and_give_up_after_the_attempts():
    r = _Counting(fail=2)
    assert r.run(3) == "answered on try 3"
    assert r.asked == [1, 2] and r.slept == [0.001, 0.002]
    assert r.said == [("try 1", 0.001), ("try 2", 0.002)]
    r = _Counting(fail=5)
    with pytest.raises(_Flaky, match="try 3"):  # the last error itself
        r.run(3)
    assert r.tries == 3 and len(r.slept) == 2


def test_what_is_not_retryable_is_raised_at_once():
    r = _Counting(fail=0)

    def broken():
        r.tries += 1
        raise KeyError("no")

    with pytest.raises(KeyError):
        retrying(r.policy(5), sleep=r.slept.append)(broken)
    assert r.tries == 1 and r.slept == []


def test_again_retries_a_result_and_says_why():
    answers = iter(["garbage", "still garbage", "[1, 2]"])
    said = []

    def ask():
        text = next(answers)
        if not text.startswith("["):
            raise Again(f"not a list: {text}")
        return text

    assert retrying(Policy(3), lambda e, s: said.append((str(e), s)))(ask) == "[1, 2]"
    assert said == [("not a list: garbage", 0.0), ("not a list: still garbage", 0.0)]
    with pytest.raises(Again, match="not a list: x"):
        retrying(Policy(1))(lambda: (_ for _ in ()).throw(Again("not a list: x")))


def test_one_controller_per_call_whatever_the_threads():
    def one(i: int) -> tuple[int, str]:
        r = _Counting(fail=i % 4)
        answer = retrying(r.policy(4), sleep=time.sleep)(r.attempt)
        return r.tries, answer

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(64)))
    assert results == [(i % 4 + 1, f"answered on try {i % 4 + 1}") for i in range(64)]


def test_the_wait_is_interruptible_and_a_wake_ends_it_early():
    r = _Counting(fail=1)
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    start = time.monotonic()
    with pytest.raises(Interrupted):
        retrying(Policy(2, lambda e: True, lambda e, n: 30.0), stop_event=stop)(r.attempt)
    assert time.monotonic() - start < 5 and r.tries == 1
    r, wake = _Counting(fail=1), threading.Event()
    wake.set()  # e.g. a tripped breaker: the next attempt comes at once, and decides
    start = time.monotonic()
    assert retrying(Policy(2, lambda e: True, lambda e, n: 30.0), wake=wake)(r.attempt) == "answered on try 2"
    assert time.monotonic() - start < 5
    r = _Counting(fail=1)
    start = time.monotonic()
    assert retrying(Policy(2, lambda e: True, lambda e, n: 0.05))(r.attempt) == "answered on try 2"
    assert time.monotonic() - start >= 0.05  # the default wait is the interruptible sleep
