"""The `runpod` target kind: what the job layer calls for a target of kind `runpod`.

jobs/kinds.py holds the target interface (`TargetKind`) and jobs/lease.py picks a kind by
`Target.kind`; this module (with its read-only side, runpod/records.py) is all of Runpod that
jobs/ imports. A `runpod` target is made for each job: a training run or a side job gets a pod
of its own, created by its lease and deleted once its results are home (runpod/lease.py), so
there is no executor before the lease, and what the kind leaves is recorded in its owner's
folder (`pod.json`, `ssh/`). Its owner and the project's runs come from the job layer through
the protocols of runpod/owners.py.

Another kind of Runpod target (an Instant Cluster: several pods for one job) would be another
object here beside `RUNPOD`, with a lease module of its own.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.front.session import Session
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.commands import cancel_stopped
from overbrainer.runpod.lease import PodLease, end_left_pod, pod_lease
from overbrainer.runpod.owners import Options, Owner, Owners, Retrieved
from overbrainer.runpod.pod_record import PodRecord
from overbrainer.runpod.pod_spec import VOLUME_PATH, WORKDIR


class RunpodKind:
    """The `runpod` target kind (jobs.targets.TargetKind)."""

    made_for_job = True  # a pod per job: nothing to connect to before its lease

    def lease(self, session: Session, name: str, target: Any, record: Any, *, owners: Owners,
              start: bool, options: Options) -> AbstractContextManager[PodLease]:
        """The pod of `record`: created (`start`) or found again (runpod.lease.pod_lease)."""
        return pod_lease(session, target, record, owners=owners, start=start, options=options)

    def check(self, config: Any) -> None:
        """Before a side job claims anything: the API key resolves (ConfigError otherwise)."""
        RunpodClient.from_config(config).close()

    def side_place(self, target: Any, run_id: str) -> tuple[str, str]:
        """(the run's directory, the cache folder) on a side job's pod."""
        root = f"{WORKDIR}/{run_id}"
        cache = f"{VOLUME_PATH}/overbrainer/.cache" if target.network_volume_id else f"{WORKDIR}/.cache"
        return root, cache

    def left(self, owner: Owner) -> str:
        """What an interrupted side job may have left: `; it has no pod left`, or where to look."""
        try:
            pod = PodRecord.load_if_any(PodRecord.path_in(owner.dir))
        except OverbrainerError:
            pod = None
        if pod is None or pod.no_pod_left:
            return "; it has no pod left"
        return (f"; a pod of it may be left: check `overbrainer pod ls` (`overbrainer pod rm {owner.key}` "
                "removes it)")

    def end_left(self, session: Session, owners: Owners, run_id: str, retrieved: Retrieved) -> None:
        """An ended run with its results home: delete the pod it may have left."""
        end_left_pod(session, owners, run_id, retrieved)

    def cancel_stopped(self, session: Session, record: Any, owner: Owner) -> str:
        """A run still `preparing` whose process is gone (`train cancel`): its pods deleted, the run
        failed; the line reported."""
        return cancel_stopped(session, record, owner)


RUNPOD = RunpodKind()
