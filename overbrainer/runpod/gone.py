"""Whether a pod (or a cluster: runpod/units.py) is gone, decided by looks only: nothing here ever
deletes anything.

A pod is gone when Runpod shows it `TERMINATED` (its word for deleted), or after 3 Runpod-shaped
404s in a row, `gone_interval` apart, and its absence from one pod list. Any other sighting (a
GET or the list) means it exists; any other failure (a 5xx after retries, an HTML 404 of a wrong
base URL, a transport error) leaves it undetermined and is raised. One 404 proves nothing:
Runpod answers 404 storms for pods that still run and bill, even for a pod it just created. The
rule holds in every phase: reaching a new pod, waiting for its verdict, following, settling,
attaching.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from overbrainer.runpod.errors import NotFound, RunpodError
from overbrainer.runpod.objects import Pod
from overbrainer.runpod.pod_record import PodRecord
from overbrainer.runpod.units import POD, Unit
from overbrainer.runpod.waits import Timing

GONE_LOOKS = 3


def look_up(client, pod_id: str, timing: Timing, *, wait: Callable[[float], object] = time.sleep,
            seen_404: int = 0, unit: Unit = POD) -> Pod | None:
    """The pod (or cluster) as Runpod shows it, or None when it is gone (the rule above).
    `seen_404`: Runpod 404s the caller got just now (they count among the 3). Raises the API's
    error when a look fails: it is then undetermined."""
    for n in range(seen_404, GONE_LOOKS):
        if n:
            wait(timing.gone_interval)
        try:
            pod = unit.get(client, pod_id)
        except NotFound:
            continue
        return None if pod.terminated else pod
    return next((p for p in unit.listing(client) if p.id == pod_id), None)  # the list leaves TERMINATED out


@dataclass(frozen=True)
class Found:
    pod: Pod


@dataclass(frozen=True)
class Gone:
    pass


@dataclass(frozen=True)
class Failed:
    """A look failed: the pod is undetermined (never gone)."""
    message: str


Look = Found | Gone | Failed


def look_up_all(client, pod_ids: list[str], timing: Timing, *,
                wait: Callable[[float], None] = time.sleep, unit: Unit = POD) -> list[Look]:
    """`look_up` for several pods with one wait per round for all: every pod is looked at once,
    those answering 404 again (GONE_LOOKS looks in all, `gone_interval` apart), then one list
    decides for those that 404ed every time. No wait at all when every pod answers. The result
    is in the order of `pod_ids`."""
    looks: dict[int, Look] = {}
    pending = list(range(len(pod_ids)))
    for n in range(GONE_LOOKS):
        if not pending:
            break
        if n:
            wait(timing.gone_interval)
        missing = []
        for i in pending:
            try:
                pod = unit.get(client, pod_ids[i])
                looks[i] = Gone() if pod.terminated else Found(pod)
            except NotFound:
                missing.append(i)
            except RunpodError as e:
                looks[i] = Failed(str(e))
        pending = missing
    if pending:
        try:
            listed = {p.id: p for p in unit.listing(client)}
        except RunpodError as e:
            listed = None
            for i in pending:
                looks[i] = Failed(str(e))
        if listed is not None:
            for i in pending:
                pod = listed.get(pod_ids[i])
                looks[i] = Found(pod) if pod is not None else Gone()
    return [looks.get(i, Failed("the pod was not looked at")) for i in range(len(pod_ids))]


def past_deadline(record: PodRecord, now: float | None = None) -> bool:
    """Whether the pod's watchdog deadline (`max_hours`) has passed: a pod found gone then was
    deleted by its watchdog. A kept pod has none."""
    return (record.deadline_unix is not None and not record.keep
            and (time.time() if now is None else now) >= record.deadline_unix)


def mark_gone(record: PodRecord, by: str | None = None, path: Path | None = None) -> str:
    """Record the run's pod as deleted by `by` (default: `watchdog` when its deadline had passed,
    else `unknown`) and save; returns who. Call it only after a look found the pod gone."""
    by = by or ("watchdog" if past_deadline(record) else "unknown")
    record.mark_deleted(by)
    record.save(path)
    return by
