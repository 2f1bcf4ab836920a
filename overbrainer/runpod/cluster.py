"""Provisioning a run's Instant Cluster (`start_cluster`): a runpod target with `nodes` >= 2 rents
several pods made, shown and deleted as one (`POST /clusters`). The rules are the single pod's
(runpod/provision.py), with a cluster's calls (runpod/units.py):

- `pod.json` (runpod/pod_record.py) is written before any API call and every create attempt is
  saved `sent` before its POST; the create is sent once (only a 429 is retried, by the
  transport): an unclear answer is reconciled by listing the account's clusters and adopting the
  one named like the attempt (`overbrainer-<run>-<n>`), others of the run being deleted; nothing
  found after the reconcile waits is one more unclear attempt (at most 2 per GPU type), never a
  blind resend.
- The cluster is followed until every member is RUNNING with its rank and its address on the
  cluster's overlay network (`GET /clusters/{id}/pods`), then each member is reached over SSH with
  the run's key and pinned host key (one host key for all members) and its watchdog's verdict
  read. A member that dies (EXITED, TERMINATED) or a cluster that disappears ends the wait: the
  cluster is deleted and the error names the member, its rank and why.
- Any failure or the provisioning flag (Ctrl-C) deletes the cluster and confirms it gone (a
  cluster has no TERMINATED: gone is Runpod's 404, looked at as for a pod) before returning.
- Money: each member's watchdog gets `max_cost_usd / nodes` (each counts its own rate) and the
  record's rate is the members' summed; the price line before the create is nodes × gpu_count ×
  price per GPU-hour.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from overbrainer.errors import OverbrainerError
from overbrainer.exec.ssh import SshExecutor
from overbrainer.front.events import PodStatus
from overbrainer.runpod import catalog, cost
from overbrainer.runpod import errors as api
from overbrainer.runpod.errors import NotFound, NotReady
from overbrainer.runpod.gone import look_up
from overbrainer.runpod.keys import RunKeys
from overbrainer.runpod.objects import Cluster, Pod
from overbrainer.runpod.pod_record import (
    NOT_READY,
    Attempt,
    Member,
    PodEndpoint,
    PodRecord,
)
from overbrainer.runpod.pod_spec import PodSettings, cluster_body, pod_env
from overbrainer.runpod.provision import (
    PodPlace,
    Stopped,
    Walk,
    executor_for,
    read_verdict,
    start_unit,
    try_type,
    Creates,
)
from overbrainer.runpod.remove import DUPLICATE, delete_confirmed, remove, sweep
from overbrainer.runpod.remove import NOT_READY as NOT_READY_REASON
from overbrainer.runpod.units import CLUSTER
from overbrainer.runpod.waits import Timing, flag_set
from overbrainer.support import fmt
from overbrainer.support.sleep import pause
from overbrainer.support.timescale import scaled

log = logging.getLogger(__name__)


@dataclass
class ClusterUp:
    """A cluster whose every member is up: the record (members by rank), the cluster, one
    connected executor per member (by rank: 0 the primary) and the run's keys."""

    record: PodRecord
    cluster: Cluster
    executors: list[SshExecutor]
    keys: RunKeys

    def close(self) -> None:
        for executor in self.executors:
            executor.close()


class MemberLost(NotReady):
    """A member of the cluster died or vanished: the whole cluster is deleted."""


def start_cluster(client, target, place: PodPlace, *, flag, timing: Timing | None = None,
                  publish: Callable[[PodStatus], None] | None = None, extra_env: dict | None = None) -> ClusterUp:
    """Create the run's cluster and wait until every member is ready (see the module docstring).
    On failure the record shows what may be left; keys and secret are dropped only when no
    cluster of the run may be left."""
    if not getattr(target, "cluster", False):
        raise ValueError("start_cluster needs a runpod target with nodes >= 2")
    return start_unit(client, target, place, flag=flag, timing=timing, publish=publish, extra_env=extra_env,
                      try_type=_try_type, unit=CLUSTER)


def _strays(w: Walk, strays: list[str]) -> None:
    if strays:
        w.record.add_strays(strays)
        w.record.save()


def _body(w: Walk, candidate: catalog.Candidate, attempt: Attempt) -> dict:
    t = w.target
    per_member_cap = None if w.record.max_cost_usd is None else w.record.max_cost_usd / t.nodes
    settings = PodSettings(run_id=w.run_id, authorized_key=w.keys.client_public,
                           max_seconds=None if w.record.keep else int(round(t.max_hours * 3600)),
                           boot_grace_secs=int(t.boot_grace_minutes * 60),
                           retrieve_grace_secs=int(t.retrieve_grace_minutes * 60), keep=w.record.keep,
                           gpu_count=t.gpu_count, max_cost_usd=per_member_cap, api_url=w.api_url,
                           workdir=w.workdir, time_scale=scaled(1.0))
    return cluster_body(t, name=attempt.name, gpu_type=candidate.gpu_type, env={**w.extra_env, **pod_env(settings)},
                        data_center_ids=candidate.data_center_ids, volume_gb=w.volume_gb)


def price_line(target, candidate: catalog.Candidate, keep: bool) -> str:
    """The line logged before a cluster's create: nodes × gpu_count × price, at most max_hours."""
    what = cost.price_line(candidate.gpu_type, target.gpu_count * target.nodes, candidate.price_per_gpu,
                           None if keep else target.max_hours, None if keep else target.max_cost_usd)
    return f"{target.nodes} pods of {target.gpu_count} GPU(s): {what}"


def _announce(w: Walk, candidate: catalog.Candidate, attempt: Attempt) -> None:
    t = w.target
    w.event("creating", gpu=candidate.gpu_type, rate=_list_rate(t, candidate), message=attempt.name)
    log.info("creating cluster %s: %s", attempt.name, price_line(t, candidate, w.record.keep))


def _list_rate(target, candidate: catalog.Candidate) -> float | None:
    """What the whole cluster costs an hour by the list (None unknown)."""
    return candidate.price_per_gpu * target.gpu_count * target.nodes if candidate.price_per_gpu else None


def _try_type(w: Walk, candidate: catalog.Candidate) -> ClusterUp | None:
    """Up to 2 unclear creates of one GPU type (provision.try_type): the cluster, or None."""
    return try_type(w, candidate, Creates(
        _announce, lambda w, c, a: w.client.create_cluster(_body(w, c, a)), _reconcile,
        lambda w, a, cluster, adopted: _created(w, a, cluster, adopted, _list_rate(w.target, candidate))))


def _reconcile(w: Walk, attempt: Attempt) -> Cluster | None:
    """After an unclear create: wait, list the account's clusters, adopt the one named like
    `attempt`, delete the run's others. Ctrl-C cuts the waits short; the list is still read once."""
    for wait in w.timing.reconcile_waits:
        stopped = pause(wait, w.flag)
        try:
            mine = CLUSTER.of_run(w.client, w.run_id)
        except api.RunpodError as e:
            log.warning("cannot list clusters to find the cluster of %s: %s", attempt.name, e)
            mine = []
        adopt = next((c for c in mine if c.name == attempt.name), None)
        for other in (c for c in mine if adopt is None or c.id != adopt.id):
            w.event("deleting", other.id, message=DUPLICATE)
            if not delete_confirmed(w.client, other.id, w.timing, unit=CLUSTER)[0]:
                _strays(w, [other.id])
        if adopt is not None or stopped:
            return adopt
    return None


def _created(w: Walk, attempt: Attempt, cluster: Cluster, adopted: bool, rate: float | None) -> ClusterUp | None:
    record = w.record
    record.pod_created(attempt, cluster.id, gpu_type=cluster.gpu_id, gpu_count=cluster.gpu_count,
                       data_center_id=cluster.data_center_id, rate=None, adopted=adopted)
    try:
        record.save()
    except Exception:
        remove(w.client, record, None, NOT_READY_REASON, "client", w.timing, publish=w.publish)
        raise
    w.event("adopted" if adopted else "created", cluster.id, record.gpu_type, rate,
            message=f"cluster of {w.target.nodes} pods")
    try:
        members = wait_members(w.client, cluster.id, w.target.nodes, w.timing, w.flag)
        record.note_rate(sum(p.cost_per_hour for p in members) or None)
        record.save()
        executors = _reach_all(w, members)
    except NotReady as e:
        record.settle(attempt, NOT_READY, detail=str(e))
        w.event("not_ready", cluster.id, record.gpu_type, message=str(e))
        remove(w.client, record, None, NOT_READY_REASON, "client", w.timing, publish=w.publish)
        record.save()
        raise
    shown = [Member(p.id, p.cluster.rank, p.cluster.ip, _endpoint(p))  # type: ignore[union-attr,arg-type]
             for p in members]
    record.mark_ready(shown[0].ssh, members=shown)
    record.save()
    w.event("ready", cluster.id, record.gpu_type, record.cost_per_hour)
    try:
        _strays(w, sweep(w.client, w.run_id, cluster.id, w.timing, publish=w.publish, unit=CLUSTER))
    except api.RunpodError as e:
        log.warning("cannot look for other clusters of run %s (%s): check `overbrainer pod ls`", w.run_id, e)
    return ClusterUp(record, w.client.get_cluster(cluster.id), executors, w.keys)


def _endpoint(pod: Pod) -> PodEndpoint:
    assert pod.ssh is not None
    try:
        return PodEndpoint(pod.ssh.host, pod.ssh.port, pod.ssh.username)
    except ValueError as e:
        raise NotReady(f"Runpod gave member {pod.id} an unusable SSH endpoint ({e})") from None


def _member_up(pod: Pod) -> bool:
    m = pod.cluster
    return pod.status == "RUNNING" and m is not None and m.rank is not None and m.ip is not None and pod.ssh is not None


def lost_member(pods: list[Pod]) -> Pod | None:
    """The first member that died (EXITED, TERMINATED), by rank."""
    return next((p for p in sorted(pods, key=_rank) if p.dead or p.terminated), None)


def _rank(pod: Pod) -> int:
    return pod.cluster.rank if pod.cluster is not None and pod.cluster.rank is not None else 1 << 30


def member_text(pod: Pod) -> str:
    rank = pod.cluster.rank if pod.cluster is not None else None
    return f"member {pod.id}" + (f" (rank {rank})" if rank is not None else "")


def wait_members(client, cluster_id: str, nodes: int, timing: Timing, flag=None) -> list[Pod]:
    """Poll until every one of the `nodes` members is RUNNING with its rank, overlay address and
    SSH endpoint (≤ ready_timeout): the members by rank. Raises MemberLost (a member died, the
    cluster vanished), NotReady (not up in time) or Stopped."""
    end = time.monotonic() + timing.ready_timeout
    last = "no member yet"
    while True:
        if flag_set(flag):
            raise Stopped()
        try:
            pods = client.cluster_pods(cluster_id)
        except NotFound:
            if look_up(client, cluster_id, timing, wait=lambda s: pause(s, flag), seen_404=1, unit=CLUSTER) is None:
                raise MemberLost(f"cluster {cluster_id} disappeared") from None
            pods = []
        except api.RunpodError as e:
            pods, last = [], str(e)
        lost = lost_member(pods)
        if lost is not None:
            raise MemberLost(f"{member_text(lost)} of cluster {cluster_id} is {lost.status}")
        up = [p for p in pods if _member_up(p)]
        if pods:
            last = f"{len(up)} of {nodes} members up"
        if len(up) == nodes and len(pods) == nodes and not flag_set(flag):
            return sorted(up, key=_rank)
        if time.monotonic() >= end:
            raise NotReady(f"cluster {cluster_id} not up after {fmt.duration(timing.ready_timeout)}: {last}")
        if pause(timing.poll, flag):
            raise Stopped()


def _reach_all(w: Walk, members: list[Pod]) -> list[SshExecutor]:
    """One SSH connection per member (the run's keys), each member's watchdog verdict `ready`."""
    executors: list[SshExecutor] = []
    endpoints = [_endpoint(p) for p in members]
    try:
        for rank, pod in enumerate(members):
            if flag_set(w.flag):
                raise Stopped()
            executor = _connect(w, pod, endpoints, rank)
            executors.append(executor)
            _member_verdict(w, pod, executor)
        if flag_set(w.flag):
            raise Stopped()
    except BaseException:
        for executor in executors:
            executor.close()
        raise
    return executors


def _connect(w: Walk, pod: Pod, endpoints: list[PodEndpoint], rank: int) -> SshExecutor:
    end = time.monotonic() + w.timing.ready_timeout
    while True:
        try:
            return executor_for(w.keys, endpoints[0], w.workdir, pod_id=pod.id, members=endpoints, rank=rank,
                                timeout=max(1.0, min(30.0, end - time.monotonic())))
        except OverbrainerError as e:
            if time.monotonic() >= end:
                raise NotReady(f"{member_text(pod)} not reachable over SSH: {e}") from None
        if pause(w.timing.poll, w.flag):
            raise Stopped()


def _member_verdict(w: Walk, pod: Pod, executor: SshExecutor) -> None:
    end = time.monotonic() + w.timing.verdict_timeout
    while True:
        try:
            line = read_verdict(executor, w.run_dir_on_pod)
        except OverbrainerError as e:
            log.debug("reading the verdict of %s: %s", member_text(pod), e)
            line = None
        if line == "ready":
            return
        if line is not None and line.startswith("failed"):
            raise NotReady(f"the watchdog of {member_text(pod)} refused: {line}")
        if time.monotonic() >= end:
            raise NotReady(f"no verdict from the watchdog of {member_text(pod)} within "
                           f"{fmt.duration(w.timing.verdict_timeout)}")
        if pause(w.timing.poll, w.flag):
            raise Stopped()


def members_lost(client, record: PodRecord) -> str | None:
    """During a run: why the cluster can no longer train (a member died or vanished, the cluster is
    gone), or None while every recorded member still runs. Raises the API's error when it cannot
    tell."""
    cluster_id = record.cluster_id
    if cluster_id is None:
        return None
    try:
        pods = {p.id: p for p in client.cluster_pods(cluster_id)}
    except NotFound:
        return f"cluster {cluster_id} disappeared"
    for member in record.members:
        pod = pods.get(member.pod_id)
        if pod is None:
            return f"member {member.pod_id} (rank {member.rank}) disappeared"
        if pod.dead or pod.terminated:
            return f"{member_text(pod)} is {pod.status}"
    return None
