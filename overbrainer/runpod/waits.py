"""How long the Runpod target waits for what, in seconds. Every value goes through `scaled()`
(support/timescale.py, which the tests shrink), so tests run the real flows in milliseconds; the
user's own limits (`max_hours`, boot and retrieve graces) are not here and never scaled.

Provisioning waits with `support.sleep.pause(seconds, flag)`: it ends early once the
provisioning flag (Ctrl-C) is set, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from overbrainer.support.timescale import scaled


@dataclass(frozen=True)
class Timing:
    poll: float = 5.0                # between two looks at a pod that is starting
    ready_timeout: float = 900.0     # from the create answer to an SSH connection (8.5 GB image ≈ 3.5 min)
    verdict_timeout: float = 180.0   # from the SSH connection to the watchdog's verdict
    reconcile_waits: tuple[float, ...] = (5.0, 15.0)  # before each list after an unclear create
    delete_timeout: float = 60.0     # from DELETE to Runpod's 404
    delete_poll: float = 1.0         # between two looks at a pod being deleted
    gone_interval: float = 10.0      # between the looks of the "gone" rule
    deadline_margin: float = 300.0   # the client's guard after the watchdog's deadline
    watchdog_interval: float = 60.0  # the watchdog's tick on the pod

    @classmethod
    def default(cls) -> "Timing":
        """The values above, each `scaled()` (the factor read now)."""
        base = cls()
        return cls(poll=scaled(base.poll), ready_timeout=scaled(base.ready_timeout),
                   verdict_timeout=scaled(base.verdict_timeout),
                   reconcile_waits=tuple(scaled(w) for w in base.reconcile_waits),
                   delete_timeout=scaled(base.delete_timeout), delete_poll=scaled(base.delete_poll),
                   gone_interval=scaled(base.gone_interval), deadline_margin=scaled(base.deadline_margin),
                   watchdog_interval=scaled(base.watchdog_interval))


def flag_set(flag: Any) -> bool:
    """Whether the provisioning flag (anything with `is_set()`, or None) is set."""
    return flag is not None and flag.is_set()
