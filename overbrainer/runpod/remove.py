"""Deleting pods (and clusters: runpod/units.py; the same rules, their own calls), believed only
when Runpod stops showing them.

`remove` deletes the run's recorded pod: `deleting` is saved first (the DELETE goes out even if
that save fails), the DELETE is always sent (a lone 404 proves nothing), then the pod is looked at
until Runpod shows it gone, at most `delete_timeout`: its 404, its status `TERMINATED`, or its
absence from the pod list, whichever comes first; the looks back off
(`delete_poll`, then 2×, 4×, …). Only then is it recorded `deleted`. Else `NotDeleted`: the
record stays `deleting` and nothing may create another pod meanwhile.
`sweep` deletes the other pods carrying the run marker; `forget_run` drops the run's private
keys and its host-key account secret once no pod of the run may need them.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from overbrainer.errors import OverbrainerError
from overbrainer.front.events import PodStatus
from overbrainer.runpod.errors import NotFound, RunpodError
from overbrainer.runpod.keys import SSH_DIR, RunKeys, forget_keys
from overbrainer.runpod.pod_record import PodRecord, PodState
from overbrainer.runpod.pod_spec import host_key_secret_name
from overbrainer.runpod.units import POD, Unit, unit_of
from overbrainer.runpod.waits import Timing

log = logging.getLogger(__name__)

# Why a pod is deleted (events and logs).
RETRIEVED, NOT_READY, REFUSED, BOOTSTRAP_FAILED, INTERRUPTED = (
    "retrieved", "not ready", "refused", "bootstrap failed", "interrupted")
DEADLINE, COST_CAP_UNSET, REQUESTED, DUPLICATE, MEMBER_LOST = (
    "deadline", "cost cap unset", "requested", "duplicate", "member lost")

Publish = Callable[[PodStatus], None]


class NotDeleted(OverbrainerError):
    """A delete Runpod did not confirm: the pod (or cluster) may still bill."""

    def __init__(self, pod_id: str, why: str | None = None, word: str = "pod"):
        text = f"{word} {pod_id} could not be confirmed deleted: check `overbrainer pod ls`"
        super().__init__(text + (f" ({why})" if why else ""))
        self.pod_id = pod_id


def _publish(publish: Publish | None, event: PodStatus) -> None:
    if publish is not None:
        publish(event)


def _gone_after_delete(client, pod_id: str, unit: Unit = POD) -> bool:
    """One look at a pod (or cluster) we asked Runpod to delete: gone on its 404, on
    `TERMINATED`, or on its absence from the list (read when it does not say it is gone)."""
    try:
        if unit.get(client, pod_id).terminated:
            return True
    except NotFound:
        return True
    except RunpodError as e:
        log.debug("looking at %s %s after its DELETE: %s", unit.word, pod_id, e)
    try:
        return all(p.id != pod_id for p in unit.listing(client))
    except RunpodError as e:
        log.debug("listing %ss after the DELETE of %s: %s", unit.word, pod_id, e)
        return False


def delete_confirmed(client, pod_id: str, timing: Timing, *, unit: Unit = POD,
                     sleep: Callable[[float], None] = time.sleep) -> tuple[bool, bool]:
    """Send DELETE, then look until Runpod shows the pod (or cluster) gone (≤ delete_timeout; the
    waits back off: delete_poll, 2×, 4×, …). Returns (confirmed, unknown twice): the second is
    True when the DELETE and the first look both said it was gone (it was gone before we asked).
    A failed DELETE is still followed by the looks."""
    try:
        known = unit.delete(client, pod_id)
    except RunpodError as e:
        log.warning("DELETE of %s %s failed: %s", unit.word, pod_id, e)
        known = True
    end = time.monotonic() + timing.delete_timeout
    first = True
    pause = timing.delete_poll
    while True:
        if _gone_after_delete(client, pod_id, unit):
            return True, first and not known
        first = False
        left = end - time.monotonic()
        if left <= 0:
            return False, False
        sleep(min(pause, left))
        pause *= 2


def remove(client, record: PodRecord, path: Path | None, reason: str, by: str, timing: Timing, *,
           publish: Publish | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
    """Delete the record's pod (or cluster) and confirm it (see the module docstring); `by` is who
    deleted it (`client`, `pod_rm`). Raises NotDeleted when Runpod keeps showing it."""
    pod_id, unit = record.unit_id, unit_of(record)
    if pod_id is None or record.state == PodState.DELETED:
        return
    record.transition(PodState.DELETING)
    try:
        record.save(path)
    except OverbrainerError as e:  # the DELETE matters more than the record of it
        log.warning("%s", e)
    _publish(publish, PodStatus(record.run_id, "deleting", pod_id, record.gpu_type, record.cost_per_hour,
                                message=reason))
    confirmed, unknown = delete_confirmed(client, pod_id, timing, unit=unit, sleep=sleep)
    if not confirmed:
        _publish(publish, PodStatus(record.run_id, "not_deleted", pod_id, message=reason))
        raise NotDeleted(pod_id, word=unit.word)
    record.mark_deleted("watchdog" if unknown and by == "client" else by)
    record.save(path)
    _publish(publish, PodStatus(record.run_id, "deleted", pod_id, record.gpu_type, record.cost_per_hour,
                                record.estimated_spend, message=reason))


def sweep(client, run_id: str, keep_pod_id: str | None, timing: Timing, *, publish: Publish | None = None,
          sleep: Callable[[float], None] = time.sleep, unit: Unit = POD) -> list[str]:
    """Delete every pod (or cluster) of this run except `keep_pod_id` (late duplicates of unclear
    creates); returns those whose delete was not confirmed (strays, for `pod.json`). Raises the
    API's error when the list cannot be read."""
    others = [p for p in unit.of_run(client, run_id) if p.id != keep_pod_id]
    strays = []
    for pod in others:
        rate = getattr(pod, "cost_per_hour", None) or None
        _publish(publish, PodStatus(run_id, "deleting", pod.id, pod.gpu_id, rate, message=DUPLICATE))
        confirmed, _ = delete_confirmed(client, pod.id, timing, unit=unit, sleep=sleep)
        if confirmed:
            _publish(publish, PodStatus(run_id, "deleted", pod.id, pod.gpu_id, message=DUPLICATE))
        else:
            strays.append(pod.id)
            _publish(publish, PodStatus(run_id, "stray", pod.id, pod.gpu_id, message="not confirmed deleted"))
    return strays


def forget_run(client, keys: RunKeys | Path, run_id: str, *, secret: bool = True) -> None:
    """Once no pod of the run may be left: remove its private keys and delete its host-key
    account secret (unless `secret` is False: none was stored), best effort (a failure is a
    warning; `overbrainer pod rm <run>` retries)."""
    ssh_dir = keys.ssh_dir if isinstance(keys, RunKeys) else Path(keys)
    if ssh_dir.name != SSH_DIR:
        ssh_dir = ssh_dir / SSH_DIR
    try:
        forget_keys(ssh_dir)
    except OverbrainerError as e:
        log.warning("%s", e)
    if not secret:
        return
    name = host_key_secret_name(run_id)
    try:
        for found in client.secrets(name):
            client.delete_secret(found.id)
    except RunpodError as e:
        log.warning("cannot delete the Runpod account secret %s of run %s (%s): `overbrainer pod rm %s` "
                    "retries", name, run_id, e, run_id)
