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
from dataclasses import dataclass, replace
from typing import Sequence

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import Executor, JobId, JobSpec, JobState
from overbrainer.exec.runtime import NODE_RANK

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


def upload_all(nodes: Sequence[Node], local: str, remote: str) -> None:
    """The run directory `local` to `remote` on every node."""
    for node in nodes:
        node.executor.upload(local, remote)


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
