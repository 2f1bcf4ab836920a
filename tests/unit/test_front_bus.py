import threading
import time

import pytest

from overbrainer.front.bus import CAPACITY, EventBus
from overbrainer.front.events import Lagged, StageStarted
from tests.fixtures.buses import closed, receivers


def ev(i):
    return StageStarted("answers", i)


def test_publish_without_subscribers_or_after_close_never_fails():
    bus = EventBus(4)
    bus.publish(ev(1))
    bus.close()
    bus.publish(ev(2))
    assert closed(bus) and receivers(bus) == 0
    assert EventBus().capacity == CAPACITY == 1024
    with pytest.raises(ValueError):
        EventBus(0)


def test_publish_never_blocks_and_a_lagging_subscriber_is_told_what_it_lost():
    bus = EventBus(4)
    sub = bus.subscribe()
    t0 = time.monotonic()
    for i in range(10_000):
        bus.publish(ev(i))
    assert time.monotonic() - t0 < 2
    assert sub.pending() == 4
    assert sub.get(0) == Lagged(9_996)
    assert [sub.get(0).total for _ in range(4)] == [9_996, 9_997, 9_998, 9_999]
    assert sub.get(0) is None


def test_each_subscriber_has_its_own_queue():
    bus = EventBus(2)
    slow, fast = bus.subscribe(), bus.subscribe()
    bus.publish(ev(1))
    assert fast.get(0) == ev(1)
    bus.publish(ev(2))
    bus.publish(ev(3))
    assert fast.get(0) == ev(2) and fast.get(0) == ev(3)
    assert slow.get(0) == Lagged(1)
    assert slow.get(0) == ev(2)


def test_get_waits_for_a_publisher_in_another_thread():
    bus = EventBus()
    sub = bus.subscribe()
    threading.Thread(target=bus.publish, args=(ev(7),)).start()
    assert sub.get(timeout=10) == ev(7)
    assert sub.get(timeout=0.01) is None  # a timeout, not the end
    assert not sub.ended


def test_close_lets_subscribers_drain_then_ends_them():
    bus = EventBus()
    sub = bus.subscribe()
    for i in range(3):
        bus.publish(ev(i))
    got = []
    reader = threading.Thread(target=lambda: got.extend(sub))
    reader.start()
    bus.close()
    reader.join(10)
    assert not reader.is_alive()
    assert got == [ev(0), ev(1), ev(2)]
    assert sub.ended and sub.get() is None
    late = bus.subscribe()
    assert late.ended and late.get() is None


def test_a_subscription_closes_on_its_own():
    bus = EventBus()
    kept, drained, dropped = bus.subscribe(), bus.subscribe(), bus.subscribe()
    bus.publish(ev(1))
    drained.close(drain=True)
    dropped.close()
    bus.publish(ev(2))
    assert receivers(bus) == 1
    assert list(drained) == [ev(1)]
    assert list(dropped) == []
    assert kept.get(0) == ev(1) and kept.get(0) == ev(2)


def test_the_observer_sees_every_event_even_when_it_fails():
    seen = []

    def observer(e):
        seen.append(e)
        raise RuntimeError("observer bug")

    bus = EventBus(1, observer=observer)
    sub = bus.subscribe()
    for i in range(5):
        bus.publish(ev(i))
    assert seen == [ev(i) for i in range(5)]
    assert sub.get(0) == Lagged(4)


def test_lagged_is_an_event_with_a_json_form():
    assert Lagged(3).to_dict() == {"event": "lagged", "dropped": 3}
