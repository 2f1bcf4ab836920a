"""Where a job's flow publishes: a bus of the front end's for one block of work, and the progress
callback of a transfer, as `Transfer` events on it."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from overbrainer.exec.transfer import Progress
from overbrainer.front.bus import EventBus
from overbrainer.front.events import Transfer
from overbrainer.front.frontend import Frontend


@contextmanager
def events(front: Frontend) -> Iterator[EventBus]:
    """The front end's bus for a block; what was published is still shown (for at most 2 s) when
    the block raises, so the last lines before an error are not lost."""
    guard = front.open_bus()
    try:
        yield guard.bus
    finally:
        guard.close()


def transfer_progress(bus: EventBus, run_id: str, direction: str) -> Progress:
    """The progress callback of a run's uploads or downloads: `Transfer` events on the bus."""
    return lambda done, total: bus.publish(Transfer(run_id, direction, done, total))
