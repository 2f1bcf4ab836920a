"""The request processor (support/processor.py): what a stop keeps, what a failure counts, what is
raised. Workers are plain functions here; the stages' and the judge's use is tested through the CLI."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from overbrainer.errors import Interrupted
from overbrainer.support.processor import FATAL, ITEM, RAISE, Processor, Work


class Fatal(Exception):
    pass


class ItemError(Exception):
    pass


def classify(e: BaseException) -> str:
    return FATAL if isinstance(e, Fatal) else ITEM if isinstance(e, ItemError) else RAISE


class Tally:
    def __init__(self):
        self.failed: list[tuple[str, str]] = []
        self.stopped: list[tuple[str, BaseException]] = []

    def item_failed(self, item_id, message):
        self.failed.append((item_id, message))

    def item_stopped(self, item_id, error):
        self.stopped.append((item_id, error))


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.002)


def processor(tally=None, concurrency=4, interrupt=None) -> Processor:
    return Processor(tally or Tally(), concurrency=concurrency, interrupt=interrupt, classify=classify, name="t")


def test_every_result_is_kept_and_item_failures_are_counted():
    tally = Tally()
    proc = processor(tally, concurrency=3)
    kept = []

    def send(item):
        proc.admit()
        if item % 4 == 0:
            raise ItemError(f"no answer for {item}")
        return item * 10

    ending = proc.run(Work(list(range(1, 13)), send, lambda item, value: kept.append((item, value)),
                           ident=lambda item: f"q{item}"))
    assert not ending.stopped and ending.error is None
    assert sorted(kept) == [(i, i * 10) for i in range(1, 13) if i % 4]
    assert sorted(tally.failed) == sorted((f"q{i}", f"no answer for {i}") for i in (4, 8, 12))
    assert tally.stopped == []


def stopping(proc: Processor) -> bool:
    try:
        proc.admit()
    except Interrupted:
        return True
    return False


def staged(proc: Processor, items: list, fail: dict):
    """One worker per item. items[0] comes back at once, and the processing thread holds it
    until everything came back; items[1] fails (`fail`) once every item was sent; the others
    were in flight then, and come back after its error (behind it in the queue)."""
    sent, kept = [], []
    later = len(items) - 2

    def send(item):
        sent.append(item)
        if item == items[1]:
            wait_until(lambda: len(sent) == len(items))
        elif item != items[0]:
            wait_until(lambda: stopping(proc) and proc.in_flight <= later)
        if item in fail:
            raise fail[item]
        return item

    def keep(item, value):
        if item == items[0]:
            wait_until(lambda: len(sent) == len(items) and proc.in_flight == 0)
        kept.append(value)

    return Work(items, send, keep), kept


def test_a_fatal_error_keeps_the_results_that_arrived_behind_it():
    """The fatal error is taken while two paid-for results are queued behind it: they are kept,
    and nothing new is sent."""
    tally = Tally()
    proc = processor(tally, concurrency=4)
    work, kept = staged(proc, ["first", "fatal", "ok1", "ok2"], {"fatal": Fatal("authentication failed")})
    ending = proc.run(work)
    assert isinstance(ending.error, Fatal) and not ending.interrupted and ending.stopped
    assert sorted(kept) == ["first", "ok1", "ok2"]
    assert [i for i, _ in tally.stopped] == ["fatal"] and tally.failed == []


def test_a_fatal_error_stops_the_sending_before_it_is_taken():
    """One request in flight: the worker that met the fatal error takes no other item, even
    before the processing thread has seen the error."""
    tally = Tally()
    proc = processor(tally, concurrency=1)
    sent = []

    def send(item):
        proc.admit()
        sent.append(item)
        if item == 1:
            raise Fatal("model not found")
        return item

    def keep(item, value):
        if item == 0:
            wait_until(lambda: len(sent) == 2 and proc.in_flight == 0)

    ending = proc.run(Work(list(range(20)), send, keep))
    assert str(ending.error) == "model not found" and sent == [0, 1]
    with pytest.raises(Interrupted):
        proc.admit()


def test_an_interrupt_keeps_the_results_that_arrived_and_sends_nothing_new():
    interrupt = threading.Event()
    proc = processor(concurrency=1, interrupt=interrupt)
    kept, sent = [], []

    def send(item):
        proc.admit()
        sent.append(item)
        if item == 2:
            wait_until(interrupt.is_set)  # in flight when Ctrl-C comes
        return item

    def keep(item, value):
        if item == 0:
            wait_until(lambda: len(sent) == 3)  # item 1 came back, item 2 is in flight
            interrupt.set()
        kept.append(value)

    ending = proc.run(Work(list(range(50)), send, keep))
    assert ending.interrupted and ending.error is None
    assert sent == [0, 1, 2]  # nothing after the interrupt
    assert kept[:2] == [0, 1] and set(kept) <= {0, 1, 2}


def test_an_interrupt_seen_by_a_worker_ends_the_work_as_interrupted():
    interrupt = threading.Event()
    proc = processor(concurrency=1, interrupt=interrupt)

    def send(item):
        if item == 3:
            interrupt.set()
        proc.admit()
        return item

    kept = []
    ending = proc.run(Work(list(range(10)), send, lambda item, value: kept.append(item)))
    assert ending.interrupted and kept == [0, 1, 2]


def test_failures_that_arrive_during_the_stop_are_counted_and_a_second_fatal_does_not_replace_the_first():
    tally = Tally()
    proc = processor(tally, concurrency=5)
    work, kept = staged(proc, ["first", "fatal", "fatal2", "bad1", "bad2"],
                        {"fatal": Fatal("first"), "fatal2": Fatal("second"),
                         "bad1": ItemError("bad1"), "bad2": ItemError("bad2")})
    ending = proc.run(work)
    assert str(ending.error) == "first" and kept == ["first"]
    assert [i for i, _ in tally.stopped] == ["fatal", "fatal2"]  # each item that met one is counted
    assert sorted(tally.failed) == [("bad1", "bad1"), ("bad2", "bad2")]


def test_an_unexpected_error_is_raised_after_the_results_that_arrived_are_kept():
    proc = processor(concurrency=3)
    work, kept = staged(proc, ["first", "bug", "ok"], {"bug": KeyError("bug")})
    with pytest.raises(KeyError):
        proc.run(work)
    assert kept == ["first", "ok"]


def test_a_keep_that_fails_during_the_stop_is_raised_and_the_stop_reason_logged(caplog):
    proc = processor(concurrency=3)
    work, kept = staged(proc, ["first", "fatal", "late"], {"fatal": Fatal("provider fake: authentication failed")})
    keep = work.keep

    def failing_keep(item, value):
        if item == "late":
            raise OSError(28, "No space left on device")
        keep(item, value)

    work.keep = failing_keep
    with caplog.at_level(logging.ERROR), pytest.raises(OSError, match="No space left"):
        proc.run(work)
    assert kept == ["first"]
    assert "t: stopped: provider fake: authentication failed" in caplog.text


def test_nothing_to_do_ends_at_once():
    proc = processor()
    ending = proc.run(Work([], lambda item: item, lambda item, value: None))
    assert not ending.stopped and proc.in_flight == 0


def blocked(proc: Processor, interrupt: threading.Event, release: threading.Event, workers: int):
    """Work of 20 items on `workers` workers: item 0 comes back at once and its keep sets the
    interrupt once every worker holds a request in flight (items 1 to `workers`), which stay in
    flight until `release`."""
    sent, kept = [], []

    def send(item):
        proc.admit()
        sent.append(item)
        if item:
            release.wait(30)
        return item

    def keep(item, value):
        if item == 0:
            wait_until(lambda: proc.in_flight == workers)
            interrupt.set()
        kept.append(value)

    return Work(list(range(20)), send, keep), sent, kept


def test_a_stop_waits_for_the_requests_in_flight_and_keeps_their_results():
    """Ctrl-C: nothing new is sent, and the two requests in flight (paid for) come back within
    the grace and are kept."""
    interrupt, release = threading.Event(), threading.Event()
    proc = Processor(Tally(), concurrency=3, interrupt=interrupt, classify=classify, name="t", grace=30)
    work, sent, kept = blocked(proc, interrupt, release, 3)
    threading.Thread(target=lambda: (wait_until(lambda: stopping(proc)), release.set()), daemon=True).start()
    ending = proc.run(work)
    assert ending.interrupted and ending.abandoned == 0
    assert sorted(sent) == [0, 1, 2, 3] and sorted(kept) == [0, 1, 2, 3]


def test_a_second_interrupt_abandons_the_requests_in_flight_at_once():
    interrupt, release, abandon = threading.Event(), threading.Event(), threading.Event()
    proc = Processor(Tally(), concurrency=3, interrupt=interrupt, classify=classify, name="t", grace=60,
                     abandon=abandon)
    work, sent, kept = blocked(proc, interrupt, release, 3)
    threading.Thread(target=lambda: (wait_until(interrupt.is_set), abandon.set()), daemon=True).start()
    started = time.monotonic()
    try:
        ending = proc.run(work)
    finally:
        release.set()
    assert time.monotonic() - started < 30  # not the grace
    assert ending.interrupted and ending.abandoned == 3 and kept == [0]


def test_the_grace_is_bounded():
    interrupt, release = threading.Event(), threading.Event()
    proc = Processor(Tally(), concurrency=2, interrupt=interrupt, classify=classify, name="t", grace=0.2)
    work, sent, kept = blocked(proc, interrupt, release, 2)
    try:
        ending = proc.run(work)
    finally:
        release.set()
    assert ending.interrupted and ending.abandoned == 2 and kept == [0]


def test_a_fatal_error_waits_for_the_requests_in_flight_too():
    tally = Tally()
    proc = Processor(tally, concurrency=4, interrupt=None, classify=classify, name="t", grace=30)
    release = threading.Event()
    sent, kept = [], []

    def send(item):
        proc.admit()
        sent.append(item)
        if item == 0:
            wait_until(lambda: len(sent) == 4)
            raise Fatal("authentication failed")
        release.wait(30)  # in flight when the fatal error comes, back after it
        return item

    threading.Thread(target=lambda: (wait_until(lambda: stopping(proc)), release.set()), daemon=True).start()
    ending = proc.run(Work(list(range(10)), send, lambda item, value: kept.append(value)))
    assert str(ending.error) == "authentication failed" and ending.abandoned == 0
    assert sorted(kept) == [1, 2, 3] and sorted(sent) == [0, 1, 2, 3]
    assert [i for i, _ in tally.stopped] == ["0"]


def test_the_spend_cap_refuses_the_request_that_would_not_fit():
    from overbrainer.support.budget import Budget, SpendCapReached

    budget = Budget(1.0)
    proc = Processor(Tally(), concurrency=1, interrupt=None, classify=classify, name="t", budget=budget)
    kept = []

    def send(item):
        held = proc.admit(lambda: 0.3)  # the request's upper bound
        proc.settle(held, 0.25)  # what it cost
        return item

    ending = proc.run(Work(list(range(10)), send, lambda item, value: kept.append(value)))
    assert kept == [0, 1, 2]  # a 4th would make 0.75 + 0.3 > 1.0
    assert isinstance(ending.error, SpendCapReached) and ending.error.reason == "spend cap reached"
    assert str(ending.error) == ("spend cap reached: $0.7500 of max_cost_usd $1.0000; the next request could cost "
                                 "up to $0.3000")


def test_the_spend_cap_counts_the_requests_in_flight():
    """Four workers at once: the bounds of the requests in flight count (a request that does not
    fit beside them waits for them to settle), so the spend recorded never passes the cap, and
    the work stops at the first request that does not fit with none in flight."""
    from overbrainer.support.budget import Budget

    budget = Budget(1.0)
    proc = Processor(Tally(), concurrency=4, interrupt=None, classify=classify, name="t", grace=30,
                     budget=budget)
    sent = []

    def send(item):
        held = proc.admit(lambda: 0.25)
        sent.append(item)
        proc.settle(held, 0.125)
        return item

    ending = proc.run(Work(list(range(20)), send, lambda item, value: None))
    # The 8th would need 0.875 + 0.25 > 1 with nothing in flight.
    assert len(sent) == 7 and budget.spent == 0.875 and ending.error is not None
    assert str(ending.error).startswith("spend cap reached: $0.8750 of max_cost_usd $1.0000;")


def test_free_requests_stop_once_a_spend_no_request_held_passes_the_cap():
    """A free request (a bound of 0: a served provider's, whose pods' time is charged apart) holds
    nothing; once the charges pass the cap, the next one is refused at once (it used to wait
    forever for the free requests it counted as still in flight)."""
    from overbrainer.support.budget import Budget, SpendCapReached

    budget = Budget(1.0)
    proc = Processor(Tally(), concurrency=1, interrupt=None, classify=classify, name="t", budget=budget)
    sent = []

    def send(item):
        held = proc.admit(lambda: 0.0)
        sent.append(item)
        proc.settle(held, None)
        budget.charge(0.4)  # the pods' time while it was answered
        return item

    started = time.monotonic()
    ending = proc.run(Work(list(range(10)), send, lambda item, value: None))
    assert sent == [0, 1, 2] and budget.spent == pytest.approx(1.2) and isinstance(ending.error, SpendCapReached)
    assert time.monotonic() - started < 5


def test_handed_writes_run_on_the_processing_thread_before_the_items_result_and_none_after_the_end():
    order = []
    proc = Processor(Tally(), concurrency=3, interrupt=None, classify=classify)

    def send(i):
        for batch in range(2):
            proc.hand(lambda batch=batch: order.append(("write", i, batch, threading.current_thread().name)))
        return i

    def keep(i, value):
        order.append(("keep", i, None, threading.current_thread().name))

    proc.run(Work(list(range(6)), send, keep))
    main = threading.current_thread().name
    assert len(order) == 18 and {entry[3] for entry in order} == {main}
    for i in range(6):
        assert order.index(("write", i, 0, main)) < order.index(("write", i, 1, main)) < order.index(
            ("keep", i, None, main))
    with pytest.raises(Interrupted):  # a worker still running after the end writes nothing
        proc.hand(lambda: order.append("late"))
    assert "late" not in order
