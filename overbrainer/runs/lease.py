"""The target lease: the one place a flow that runs a job on a target gets its executor.

    with lease(session, config, name, target, record, interrupt=..., start=True) as executor:
        ...

Local and SSH leases connect (raced against Ctrl-C: a connection is safe to abandon) and close
the executor on release. A Runpod lease (`runs.pod_lease`) creates the run's pod, or reconnects
to it, yields an SSH executor pinned to the pod's host key, and on release ends the pod: deleted
once the results are verified home, else left to its watchdog with a message saying so.

`start=True` is a new run (saved `preparing`, its ID and local directory already claimed): the
lease claims its directory on the target, so `record.remote_dir` is set inside the block (and
`record.id` may take the next free suffix when another checkout shares an SSH workdir). A local
or SSH lease that fails before that claim removes the new run's directory: nothing is left, as if
the run never started. Otherwise the lease is for a run that has a job (attach, stop, cancel).
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from typing import Any, Iterator

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import Interrupted
from overbrainer.runs import ids
from overbrainer.runs.record import RunRecord
from overbrainer.runs.start import claim_target
from overbrainer.runs.targets import open_executor


# The pod side of the executors Runpod leases gave out (runs.pod_lease.PodContext), by id().
PODS: dict[int, Any] = {}


def pod_of(executor) -> Any:
    """The pod context of an executor a Runpod lease gave out (`.follow`, `.job_started`); None
    for any other executor."""
    return PODS.get(id(executor))


def is_pod(target: Any) -> bool:
    return getattr(target, "kind", "local") == "runpod"


@contextmanager
def lease(session, config, target_name: str, target: Any, record: RunRecord, *, interrupt,
          start: bool = False, keep: bool = False) -> Iterator[Any]:
    """The executor of `target` for the run `record`, for the block (see the module docstring).
    `keep` (Runpod only): the pod is kept when the job ends (`--keep-pod`)."""
    if is_pod(target):
        from overbrainer.runs.pod_lease import pod_lease

        with pod_lease(session, config, target_name, target, record, interrupt=interrupt,
                       start=start, keep=keep) as executor:
            yield executor
        return
    runs_dir = ProjectPaths(session.project_dir).runs
    executor = None
    try:
        executor = interrupt.race(open_executor, config, target_name, target, runs_dir)
        if executor is None:
            raise Interrupted("interrupted before the run started" if start
                              else f"interrupted: run {record.id} was not touched")
        if start:
            claim_target(executor, runs_dir, record)
    except BaseException:
        if executor is not None:
            executor.close()
        if start:
            shutil.rmtree(ids.run_dir(runs_dir, record.id), ignore_errors=True)
        raise
    try:
        yield executor
    finally:
        executor.close()
