"""The in-process event bus: flows publish, renderers subscribe.

`publish` never blocks on a subscriber: each subscription has a bounded queue, and a subscriber
that falls behind loses its oldest events; its next `get` returns `Lagged(dropped)` first.
An optional observer sees every event synchronously (the metrics exporter subscribes instead).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Callable, Iterator

from overbrainer.front.events import Event, Lagged

log = logging.getLogger(__name__)

CAPACITY = 1024


class Subscription:
    """One subscriber's queue. `get` returns the next event, `Lagged(n)` after a loss, or None
    on timeout or once the subscription is closed and drained."""

    def __init__(self, bus: "EventBus", capacity: int):
        self._bus = bus
        self._capacity = capacity
        self._queue: collections.deque[Event] = collections.deque()
        self._dropped = 0
        self._closed = False
        self._cond = threading.Condition(threading.Lock())

    # --- producer side (the bus) --------------------------------------------------------------

    def _put(self, ev: Event) -> None:
        with self._cond:
            if self._closed:
                return
            if len(self._queue) >= self._capacity:
                self._queue.popleft()
                self._dropped += 1
            self._queue.append(ev)
            self._cond.notify()

    def _end(self, drain: bool) -> None:
        with self._cond:
            self._closed = True
            if not drain:
                self._queue.clear()
                self._dropped = 0
            self._cond.notify_all()

    # --- consumer side ------------------------------------------------------------------------

    def _pop(self) -> Event | None:
        if self._dropped:
            n, self._dropped = self._dropped, 0
            return Lagged(n)
        if self._queue:
            return self._queue.popleft()
        return None

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event; waits up to `timeout` seconds (None: until an event or the end)."""
        with self._cond:
            ev = self._pop()
            if ev is not None or self._closed:
                return ev
            self._cond.wait_for(lambda: self._queue or self._dropped or self._closed, timeout)
            return self._pop()

    @property
    def ended(self) -> bool:
        """Closed (by the bus or by `close`) and nothing left to read."""
        with self._cond:
            return self._closed and not self._queue and not self._dropped

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def close(self, *, drain: bool = False) -> None:
        """Stop receiving. drain=True keeps what is queued for `get`; False discards it."""
        self._bus._unsubscribe(self)
        self._end(drain)

    def __iter__(self) -> Iterator[Event]:
        """Events until the subscription ends (blocks between events)."""
        while True:
            ev = self.get()
            if ev is None:
                if self.ended:
                    return
                continue
            yield ev


class EventBus:
    """Broadcast bus. `publish` never blocks; `close` ends every subscription (after it drains)."""

    def __init__(self, capacity: int = CAPACITY, observer: Callable[[Event], None] | None = None):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._observer = observer
        self._lock = threading.Lock()
        self._subs: list[Subscription] = []
        self._closed = False

    def subscribe(self) -> Subscription:
        sub = Subscription(self, self.capacity)
        with self._lock:
            if self._closed:
                sub._end(drain=True)
            else:
                self._subs.append(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            try:
                self._subs.remove(sub)
            except ValueError:
                pass

    def publish(self, ev: Event) -> None:
        if self._observer is not None:
            try:
                self._observer(ev)
            except Exception:  # noqa: BLE001 - an observer must never break a flow
                log.debug("event observer failed", exc_info=True)
        with self._lock:
            if self._closed:
                return
            subs = tuple(self._subs)
        for sub in subs:
            sub._put(ev)

    def close(self) -> None:
        """No more events: each subscriber reads what is queued, then its `get` returns None."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subs, self._subs = self._subs, []
        for sub in subs:
            sub._end(drain=True)

    def __enter__(self) -> "EventBus":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
