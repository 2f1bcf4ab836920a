"""How often a job on its target is polled, and how many failed polls in a row a follow survives.
The interval is `scaled()` (support/timescale.py): the tests shrink it."""

from __future__ import annotations

from overbrainer.support.timescale import scaled

POLL_SECS = 2.0
FAILURE_BUDGET = 5           # retried polls; the next consecutive failure ends the follow


def poll_secs() -> float:
    """The poll interval: 2 s, scaled."""
    return scaled(POLL_SECS)
