"""The Runpod lease (see jobs.lease): a pod created for a new run, or the run's pod again.

Creating runs shielded, never raced (an abandoned create could leave a billing pod). The front
end's provisioning flag (Ctrl-C on the command line, its `abandon` event when embedded), or the
flow's Interrupt catching a signal or a detach, is checked at each step of `start_pod`: the pod
that exists is then deleted and confirmed, and the run fails `interrupted before the job started`. Once the pod is
ready, the cost cap is armed on it (`.pod/cost_cap_in`, `.pod/snapshot_in`: seconds left, which
its watchdog counts on its own clock) before the run's directory is claimed there.

On release, by what the run's files say:
- no job started: the pod is deleted (confirmed) and the run failed;
- the job runs (detached, Ctrl-C, a watch that failed while the pod still exists): the pod is left
  to its watchdog, with a message saying until when;
- the job ended: `end_pod` (deleted once the results are verified home, else kept for them).
"""

from __future__ import annotations

import hashlib
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.runpod import cost, pod_run
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.errors import RunpodError
from overbrainer.runpod.failures import run_message
from overbrainer.runpod.keys import SSH_DIR, ssh_line
from overbrainer.runpod.ledger import warn_orphans
from overbrainer.runpod.owners import PREPARING, RUNNING, Owner, Owners, Retrieved
from overbrainer.runpod.pod_record import PodRecord, PodState
from overbrainer.runpod.pod_scripts import WORKDIR
from overbrainer.runpod.provision import PodPlace, start_pod

if TYPE_CHECKING:  # pragma: no cover
    from overbrainer.front.interrupt import Flag
from overbrainer.runpod.remove import COST_CAP_UNSET, INTERRUPTED, NOT_READY, NotDeleted, forget_run, remove, sweep
from overbrainer.runpod.waits import Timing

log = logging.getLogger(__name__)

NOT_STARTED = "interrupted before the job started"


@dataclass(frozen=True)
class PodOptions:
    """What a Runpod lease needs besides its target (jobs.lease passes it whole).

    `retrieved`: the job kind's rule saying whether an ended run's results are home (the pod is
    deleted only then); `keep`: the pod is kept when the job ends (`--keep-pod`); `home`: the
    pod's owner (default: the run in runs/; a side job's jobs.homes.Home);
    `workdir`: the pod's workdir (the owner's directory there is `<workdir>/<id>`);
    `runs_retrieved`: the training's rule for ending the pods of other runs before a new pod (None:
    only side jobs' left pods are ended; see pod_run.retrieved_but_not_deleted)."""

    retrieved: Retrieved
    keep: bool = False
    home: Owner | None = None
    workdir: str | None = None
    runs_retrieved: Retrieved | None = None


class PodContext:
    """What the pod steps of one lease share: the API client, the pod's owner (`home`: a run, or a
    side job; runpod.owners.Owner), its `pod.json`, the timing. `run_dir` is the owner's folder."""

    def __init__(self, client, owner: Owner, project_dir: Path, timing, publish, retrieved=None):
        self.client = client
        self.home = owner
        self.run_id = owner.key
        self.project_dir = Path(project_dir)
        self.run_dir = owner.dir
        self.pod_path = PodRecord.path_in(self.run_dir)
        self.pod: PodRecord | None = PodRecord.load_if_any(self.pod_path)
        self.timing = timing
        self.publish = publish
        self.retrieved = retrieved  # (run record, run dir) -> whether the results are home
        self.flag: Flag | None = None  # the front end's provisioning flag, while provisioning

    def owner(self, key: str | None = None) -> str:
        """`run R`, or `export X` / `compare X` for a side job: the words of the messages."""
        return f"{self.home.kind} {key or self.run_id}"

    def ssh_line(self, key: str | None = None) -> str:
        """The `ssh -F …` line that reaches the pod from the project folder."""
        return ssh_line(key or self.run_id, None if not self.home.side else self.home.shown(self.project_dir))

    def stopped(self, interrupt) -> bool:
        """Whether the flow was interrupted, or the provisioning abandoned."""
        return interrupt.caught() or (self.flag is not None and self.flag.is_set())

    def job_started(self) -> None:
        """The job was spawned (or may have been): the pod is `running` from now on."""
        self.pod = self.pod.reload()
        if self.pod.state == PodState.READY:
            self.pod.transition(PodState.RUNNING)
            self.pod.save(self.pod_path)

    def forget(self) -> None:
        """No pod of the run is left: drop its private keys and host-key secret (best effort)."""
        if self.pod is None or self.pod.no_pod_left:
            forget_run(self.client, self.run_dir / SSH_DIR, self.run_id)

    def sweep_and_forget(self, sweep) -> None:
        """Delete the run's other marker pods (unconfirmed ones become strays), then forget."""
        try:
            strays = sweep(self.client, self.run_id, self.pod.pod_id, self.timing, publish=self.publish)
        except RunpodError as e:
            log.warning("cannot look for other pods of run %s: %s", self.run_id, e)
            return
        if strays:
            self.pod.add_strays(strays)
            self.pod.save(self.pod_path)
        self.forget()


class PodLease:
    """What a Runpod lease holds for its block: the pod's executor, None once the pod no longer
    exists, and the pod's side of the job (jobs.lease.Lease calls it)."""

    def __init__(self, executor, ctx: PodContext):
        self.executor = executor
        self.ctx = ctx

    def watch(self, watch: Callable[[Any], Any], run_id: str, interrupt):
        """`watch(interrupt)` (the job layer's follow) under the client's deadline, settled
        (shielded) on the pod's side."""
        return pod_run.follow_on_pod(self.ctx, watch, run_id, interrupt)

    def job_started(self) -> None:
        self.ctx.job_started()


@contextmanager
def pod_lease(session, config, target: Any, record, *, owners: Owners, interrupt, start: bool,
              options: PodOptions) -> Iterator[PodLease]:
    """The pod of `record` on the Runpod `target` for the block (see the module docstring and
    PodOptions); `owners`: the project's runs and side jobs."""
    guard = session.front.open_bus()
    client = None
    executor = None
    try:
        client = RunpodClient.from_config(config)
        owner = options.home or owners.run(record.id)
        ctx = PodContext(client, owner, owners.project_dir, Timing.default(), guard.bus.publish, options.retrieved)
        if start:
            _end_retrieved(ctx, owners, None, interrupt,
                           rule=options.retrieved if not owner.side else options.runs_retrieved)
            warn_orphans(client, owners, record.id, stale=True)
            executor = _provision(ctx, session.front, target, record, interrupt, options)
        else:
            executor = interrupt.shield(pod_run.reconnect, ctx, record,
                                        note=f"reconnecting to the pod of run {record.id}")
    except BaseException:
        guard.close()
        if client is not None:
            client.close()
        raise
    guard.close()
    try:
        yield PodLease(executor, ctx)
    finally:
        guard = session.front.open_bus()
        ctx.publish = guard.bus.publish
        try:
            if executor is not None:
                interrupt.shield(_release, ctx, executor, interrupt,
                                 note=f"ending the pod of {ctx.owner()}")
        finally:
            guard.close()
            if executor is not None:
                executor.close()
            client.close()


def _end_retrieved(ctx: PodContext, owners: Owners, run_id: str | None, interrupt, rule=None) -> None:
    """End the pods of ended runs (and side jobs) whose results are home but whose delete never
    happened (a client killed in between), shielded: deletes are never cut short. `rule`: the
    training's (default the lease's own)."""
    found = pod_run.retrieved_but_not_deleted(owners, rule or ctx.retrieved, run_id)
    if found:
        interrupt.shield(pod_run.end_retrieved_pods, ctx.client, found, ctx.timing, publish=ctx.publish,
                         note="deleting the pods of runs that ended")


def end_left_pod(session, config, owners: Owners, run_id: str, retrieved: Retrieved) -> None:
    """`train attach` of a run that ended with its results home (`retrieved(record, run_dir)`):
    delete its pod if pod.json shows one left (nothing to do, and no API key needed, otherwise)."""
    if not pod_run.retrieved_but_not_deleted(owners, retrieved, run_id):
        return
    interrupt = session.front.interrupt()
    try:
        with RunpodClient.from_config(config) as client, session.front.open_bus() as guard:
            ctx = PodContext(client, owners.run(run_id), owners.project_dir, Timing.default(), guard.bus.publish,
                             retrieved)
            _end_retrieved(ctx, owners, run_id, interrupt)
    finally:
        interrupt.restore()


# --- provisioning ---------------------------------------------------------------------------------

def _provision(ctx: PodContext, front, target, record, interrupt, options: PodOptions):
    """Create the pod (shielded, flag-checked), arm its cost cap, claim the run's directory."""
    keep = options.keep
    ctx.flag = front.provisioning_flag()
    try:
        provisioned = interrupt.shield(
            start_pod, ctx.client, target,
            PodPlace(record.id, ctx.run_dir, options.workdir or WORKDIR, ctx.client.base_url, keep=keep),
            flag=_Stop(ctx, interrupt), timing=ctx.timing, publish=ctx.publish,
            note=f"creating the pod of {ctx.owner()}")
    except BaseException as e:
        _provisioning_failed(ctx, record, e, interrupt)
        raise
    finally:
        ctx.flag.close()  # stop watching for Ctrl-C itself (a flag already set stays set)
    ctx.pod = provisioned.record
    executor = provisioned.executor
    try:
        if ctx.stopped(interrupt):
            raise Interrupted(NOT_STARTED)
        _arm_cost_cap(ctx, executor, record, keep)
        ctx.home.claim(executor, record, _claim_owner(ctx.pod.host_key))
        if keep:
            log.warning("%s: pod %s is kept with no time limit at %s: only `overbrainer pod rm %s` "
                        "deletes it", ctx.owner(), ctx.pod.pod_id, cost.format_rate(ctx.pod.cost_per_hour),
                        record.id)
    except BaseException as e:
        try:
            interrupt.shield(_release, ctx, executor, interrupt, error=e,
                             note=f"deleting the pod of {ctx.owner()}")
        finally:
            executor.close()
        raise
    return executor


class _Stop:
    """What `start_pod` checks: the front end's provisioning flag, or the flow's Interrupt (noted
    in the signal handler already, before its watcher thread sets the event): a pod that the lease
    would delete anyway once ready is not waited for."""

    def __init__(self, ctx: PodContext, interrupt):
        self.ctx, self.interrupt = ctx, interrupt

    def is_set(self) -> bool:
        return self.ctx.stopped(self.interrupt)


def _claim_owner(host_key: str | None) -> str:
    """The claim value of a run's directory on its pod: from the pod's public host key."""
    return hashlib.sha256((host_key or "").encode()).hexdigest()[:32]


def _arm_cost_cap(ctx: PodContext, executor, record, keep: bool) -> None:
    pod = ctx.pod
    try:
        cap = cost.arm_cost_cap(pod.max_cost_usd, pod.cost_per_hour, pod.created_unix or 0, keep)
    except ValueError as e:
        raise pod_run.CostCapUnset(f"max_cost_usd cannot be applied ({e}): the pod was deleted and training "
                                   "refused") from e
    if cap is None:
        return
    remote = f"{executor.workdir.rstrip('/')}/{record.id}"
    try:
        for name, text in cap.files(time.time()).items():
            executor.put_file(f"{remote}/{name}", text)
    except OverbrainerError as e:
        raise pod_run.CostCapUnset(f"max_cost_usd cannot be applied ({e}): the pod was deleted and training "
                                   "refused") from e
    warning = cost.cap_warning(pod.max_cost_usd, pod.cost_per_hour)
    if warning:
        log.warning("%s", warning)


def _provisioning_failed(ctx: PodContext, record, error: BaseException, interrupt) -> None:
    """start_pod failed (it deleted what it created, or recorded what it could not): fail the run."""
    pod = PodRecord.load_if_any(ctx.pod_path)
    ctx.pod = pod
    left = pod is not None and not pod.no_pod_left
    if isinstance(error, Interrupted) or ctx.stopped(interrupt):
        message = NOT_STARTED + (": a pod of it may be left: check `overbrainer pod ls`" if left
                                 else ": it has no pod left")
    else:
        message = run_message(error) if isinstance(error, Exception) else type(error).__name__
    ctx.home.fail(record, message)


# --- release -----------------------------------------------------------------------------------------

def _release(ctx: PodContext, executor, interrupt, error: BaseException | None = None) -> None:
    """End the lease by what the run's files say (see the module docstring)."""
    pod = ctx.pod = ctx.pod.reload() if ctx.pod is not None else None
    if pod is None or pod.pod_id is None or pod.state == PodState.DELETED:
        return
    run = ctx.home.load()
    stopped = ctx.stopped(interrupt)
    if run.job is None and run.state != RUNNING:  # no job, nor one whose start was not confirmed
        reason = (COST_CAP_UNSET if isinstance(error, pod_run.CostCapUnset)
                  else INTERRUPTED if stopped else NOT_READY)
        try:
            remove(ctx.client, pod, ctx.pod_path, reason, "client", ctx.timing, publish=ctx.publish)
        except NotDeleted as e:
            ctx.home.fail(run, f"{NOT_STARTED if stopped else run.message or 'failed'}; {e}")
            raise
        if run.state == PREPARING or stopped:
            why = NOT_STARTED if stopped or error is None else (str(error) or type(error).__name__)
            ctx.home.fail(run, why + (": it has no pod left" if why == NOT_STARTED else ""))
        ctx.sweep_and_forget(sweep)
        return
    if not run.ended and ctx.home.side:  # its watch failed: nobody will follow it again
        log.warning("%s: its pod %s is out of reach (%s); its watchdog deletes it at the latest %s; "
                    "remove it now with `overbrainer pod rm %s`", ctx.owner(), pod.pod_id,
                    cost.format_rate(pod.cost_per_hour),
                    f"at {pod.deadline}" if pod.deadline else "when its retrieve grace ends", run.id)
        return
    if not run.ended:
        log.warning("%s", pod_run.detach_message(pod, run.id))
        return
    pod_run.end_pod(ctx, executor, run, ctx.run_dir, ctx.retrieved(run, ctx.run_dir))
