"""One job on several nodes (the members of a Runpod Instant Cluster): the same run directory
sent to every node, the same job started on each with the node's own rank and the primary's
rendezvous address in its environment, followed as one.

The environment of node `rank` (rank 0 is the primary, where the results are written):
`OVERBRAINER_NODE_RANK` (exec/runtime.py: a step marked `primary_only` runs there only), and
torchrun's own variables for `--node_rank` and `--rdzv_endpoint` (`PET_NODE_RANK`,
`PET_RDZV_ENDPOINT`: torchrun reads any of its options from `PET_<OPTION>`), the endpoint being
the primary's address on the cluster's private network at RDZV_PORT; and the interface of that
network for the collectives (`NCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`: `ens1`, which Runpod's
Instant Cluster configuration page says carries PRIMARY_ADDR). Nothing here reads the
node's own environment: an SSH session does not see the container's variables (Runpod's
NODE_RANK, PRIMARY_ADDR), so the client says it from pod.json.

The job as a whole (`states`, `verdict`): running while every node runs; the first node that
ends with an error, is cancelled or lost ends it (the caller stops the others, `cancel_all`);
it succeeded when every node exited 0.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import Executor, JobId, JobSpec, JobState
from overbrainer.exec.runtime import NODE_RANK
from overbrainer.exec.transfer import Progress, Written

log = logging.getLogger(__name__)

RDZV_PORT = 29500  # torchrun's static rendezvous on the primary (Runpod's PRIMARY_PORT)
CLUSTER_IFACE = "ens1"  # a member's interface on the cluster's private network


@dataclass(frozen=True)
class Node:
    """One node of the job: its rank (0: the primary), its address on the private network, and
    the executor that reaches it."""

    rank: int
    ip: str
    executor: Executor


def node_env(rank: int, primary_ip: str) -> dict[str, str]:
    """The environment of node `rank` (see the module docstring)."""
    return {NODE_RANK: str(rank), "PET_NODE_RANK": str(rank), "PET_RDZV_ENDPOINT": f"{primary_ip}:{RDZV_PORT}",
            "NCCL_SOCKET_IFNAME": CLUSTER_IFACE, "GLOO_SOCKET_IFNAME": CLUSTER_IFACE}


def _primary(nodes: Sequence[Node]) -> Node:
    ranks = sorted(n.rank for n in nodes)
    if ranks != list(range(len(nodes))):
        raise OverbrainerError(f"the nodes' ranks are {ranks}, not 0 to {len(nodes) - 1}")
    return next(n for n in nodes if n.rank == 0)


def spawn_all(nodes: Sequence[Node], spec: JobSpec) -> list[JobId]:
    """Start `spec` on every node (by rank) with the node's environment; if one cannot be
    started, those already started are cancelled and the error raised."""
    primary = _primary(nodes)
    jobs: list[JobId] = []
    try:
        for node in sorted(nodes, key=lambda n: n.rank):
            env = {**spec.env, **node_env(node.rank, primary.ip)}
            jobs.append(node.executor.spawn(replace(spec, env=env)))
    except BaseException:
        cancel_all(nodes[: len(jobs)], jobs)
        raise
    return jobs


def states(nodes: Sequence[Node], jobs: Sequence[JobId]) -> list[JobState]:
    """Each node's job state, by rank."""
    return [node.executor.status(job) for node, job in zip(sorted(nodes, key=lambda n: n.rank), jobs)]


def verdict(found: Sequence[JobState]) -> tuple[str, int | None]:
    """(`running` | `succeeded` | `failed`, the rank at fault when failed)."""
    for rank, state in enumerate(found):
        if state.ended and not (state.kind == "exited" and state.code == 0):
            return "failed", rank
    if all(s.ended for s in found):
        return "succeeded", None
    return "running", None


def cancel_all(nodes: Sequence[Node], jobs: Sequence[JobId]) -> None:
    """Stop the job on every node that can still be reached (a lost node is skipped: its
    cluster is deleted by the caller)."""
    for node, job in zip(sorted(nodes, key=lambda n: n.rank), jobs):
        try:
            node.executor.cancel(job)
        except OverbrainerError as e:
            log.warning("cannot stop the job on node %d (%s): %s", node.rank, node.ip, e)


class NodeLost(OverbrainerError):
    """A node of the job is gone (its machine failed, it was deleted): the job cannot go on."""


class NodesExecutor(Executor):
    """Several nodes seen as one executor, so that a run's flow drives a cluster as it drives one
    pod: `upload`, `claim`, `put_file`, `spawn` (`spawn_all`) and `cancel` (`cancel_all`) act on
    every node; `status` is the job's as a whole (`verdict`: running while every node runs, the
    failing node's state once one fails, the primary's once all exited 0); everything that reads
    (the log, the metrics, the results) reads the primary, where rank 0 writes. `lost()` (optional: the cluster
    seen through the API, runpod.cluster.members_lost) is asked at a `status` at most once every
    `lost_every` seconds, and at once when a node cannot be reached: a member lost raises
    NodeLost with its reason.

    After a reconnect the other nodes' jobs are found again from the `job.pid` each wrote in the
    job's directory."""

    def __init__(self, nodes: Sequence[Node], lost: Callable[[], str | None] | None = None,
                 lost_every: float = 60.0):
        self.nodes = sorted(nodes, key=lambda n: n.rank)
        self.primary = _primary(self.nodes).executor
        self.workdir = self.primary.workdir
        self.lost = lost
        self.lost_every = lost_every
        self._lost_at = -math.inf
        self._jobs: list[JobId] = []

    def close(self) -> None:
        for node in self.nodes:
            closer = getattr(node.executor, "close", None)
            if closer is not None:
                closer()

    def claim(self, dir: str, owner: str) -> bool:
        return all([node.executor.claim(dir, owner) for node in self.nodes])

    def _upload(self, entries: list[tuple[Path, str]], folder: str | None, progress: Progress | None) -> None:
        for node in self.nodes:
            node.executor._upload(entries, folder, progress if node.rank == 0 else None)

    def spawn(self, job: JobSpec) -> JobId:
        self._jobs = spawn_all(self.nodes, job)
        return self._jobs[0]

    def _jobs_of(self, job: JobId) -> list[JobId]:
        if self._jobs and self._jobs[0] == job:
            return self._jobs
        jobs = [job]
        for node in self.nodes[1:]:
            text = node.executor.read_from(f"{job.dir.rstrip('/')}/job.pid", 0, 32).decode("ascii", "replace").strip()
            if not text.isdigit():
                raise OverbrainerError(f"node {node.rank} ({node.ip}) shows no job in {job.dir}")
            jobs.append(JobId(job.dir, int(text), job.container))
        self._jobs = jobs
        return jobs

    def _look_for_lost(self, now: bool = False) -> None:
        if self.lost is None or not now and time.monotonic() - self._lost_at < self.lost_every:
            return
        self._lost_at = time.monotonic()
        why = self.lost()
        if why:
            raise NodeLost(why)

    def status(self, job: JobId) -> JobState:
        self._look_for_lost()
        try:
            found = states(self.nodes, self._jobs_of(job))
        except OverbrainerError:
            self._look_for_lost(now=True)  # a node that cannot be reached: lost, or only unreachable?
            raise
        kind, rank = verdict(found)
        if kind == "running":
            return JobState("running")
        if kind == "failed" and rank is not None:
            if rank != 0:
                log.warning("the job failed on node %d (%s): %s", rank, self.nodes[rank].ip, found[rank])
            return found[rank]
        return found[0]

    def cancel(self, job: JobId) -> None:
        cancel_all(self.nodes, self._jobs_of(job))

    def read_from(self, path: str, offset: int, limit: int) -> bytes:
        return self.primary.read_from(path, offset, limit)

    def download(self, remote: str, local: str, entries: Iterable[str], exclude: Iterable[str] = (),
                 progress: Progress | None = None) -> Written | None:
        return self.primary.download(remote, local, entries, exclude, progress)

    def manifest(self, remote: str, entries: Iterable[str], exclude: Iterable[str] = ()) -> list[tuple[str, str]]:
        return self.primary.manifest(remote, entries, exclude)

    def probe(self, script: str, timeout: float = 60) -> str:
        return self.primary.probe(script, timeout)

    def put_file(self, path: str, content: bytes | str) -> None:
        """On every node, the primary first: a run's requests (`train stop`'s snapshot.request,
        the cost cap's files, the retrieved marker) are each node's job's and watchdog's to see."""
        for node in self.nodes:
            node.executor.put_file(path, content)
