"""The Runpod lease (what jobs.lease calls for a runpod target): a pod created for a new run, or
the run's pod again, and the steps of its job around the generic ones: following it under the
client's deadline, settling what the watch found, ending the pod, reconnecting to it.

Creating runs shielded, never raced (an abandoned create could leave a billing pod). The front
end's provisioning flag (Ctrl-C on the command line, its `abandon` event when embedded), or the
flow's Interrupt catching a signal or a detach, is checked at each step of `start_pod`: the pod
that exists is then deleted and confirmed, and the run fails `interrupted before the job
started`. Once the pod is ready, the cost cap is armed on it (`.pod/cost_cap_in`,
`.pod/snapshot_in`: seconds left, which its watchdog counts on its own clock) before the run's
directory is claimed there.

On release, by what the run's files say:
- no job started: the pod is deleted (confirmed) and the run failed;
- the job runs (detached, Ctrl-C, a watch that failed while the pod still exists): the pod is left
  to its watchdog, with a message saying until when;
- the job ended: `end_pod` (deleted once the results are verified home, else kept for them).

Rules kept while the job runs and ends:
- The watch (job polls, metrics) never deletes, and calls the Runpod API only for a cluster (its
  members looked at once a minute, and when one cannot be reached: runpod/cluster.py): dropping
  it on Ctrl-C loses nothing. Its deadline is the watchdog's plus `Timing.deadline_margin` (none for a
  kept pod): past it, the client deletes the pod itself (shielded) and fails the run
  `max_hours reached: the pod was deleted before the job ended`.
- A failed watch looks the pod up by the gone rule (3 Runpod 404s and absence from the list;
  nothing is deleted on a look): gone → `pod.json` records it deleted and the run fails
  `pod <id> no longer exists`; otherwise the run stays `running` and `train attach` follows it.
- `end_pod` writes the pod's `.pod/retrieved` marker only after the results were verified home
  (the watchdog then deletes it even when our delete fails), deletes and confirms unless kept,
  sweeps the run's other marker pods and forgets its keys; unretrieved results keep the pod.
- A client killed between the retrieval and `end_pod` leaves a run that ended with its results
  home and a pod.json that does not say deleted: `train attach` and every `train` / `run` on a
  runpod target end such pods first (`retrieved_but_not_deleted`, `end_retrieved_pods`). Whether
  a run's results are home is the job kind's rule, given as `retrieved(record, run_dir)`.

The pod's owner (a run, or a side job) and the project's runs come from the job layer as the
protocols of runpod/owners.py.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.exec.nodes import Node, NodeLost, NodesExecutor
from overbrainer.front.interrupt import Flag, Interrupt
from overbrainer.front.session import Session
from overbrainer.runpod import cost
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.errors import RunpodError, run_message
from overbrainer.runpod.gone import look_up, mark_gone, past_deadline
from overbrainer.runpod.keys import SSH_DIR, RunKeys, ssh_line
from overbrainer.runpod.ledger import pod_owners, warn_orphans
from overbrainer.runpod.owners import PREPARING, RUNNING, Options, Owner, Owners, Retrieved
from overbrainer.runpod.pod_record import PodEndpoint, PodRecord, PodState
from overbrainer.runpod.cluster import members_lost, start_cluster
from overbrainer.runpod.pod_spec import WORKDIR
from overbrainer.runpod.provision import PodPlace, executor_for, start_pod, workdir_of
from overbrainer.runpod.remove import (
    COST_CAP_UNSET,
    DEADLINE,
    INTERRUPTED,
    MEMBER_LOST,
    NOT_READY,
    RETRIEVED,
    NotDeleted,
    forget_run,
    remove,
    sweep,
)
from overbrainer.runpod.waits import Timing
from overbrainer.support import fmt
from overbrainer.support.sleep import sleep_until

log = logging.getLogger(__name__)

NOT_STARTED = "interrupted before the job started"
RETRIEVED_MARKER = ".pod/retrieved"
POD_LOGS = (".pod/watchdog.log", ".pod/bootstrap.log")
DEADLINE_MESSAGE = "max_hours reached: the pod was deleted before the job ended"
LINK_LOOK = 0.05  # how often the watch's own interrupt looks at Ctrl-C and the deadline (real seconds)


class PodGone(OverbrainerError):
    """The run's pod no longer exists (found by the gone rule)."""


class DeadlineReached(OverbrainerError):
    """The client's deadline passed: the pod was deleted before the job ended."""


class CostCapUnset(OverbrainerError):
    """max_cost_usd could not be armed on the pod: the pod was deleted and training refused."""


class PodStopped(OverbrainerError):
    """The pod is stopped (EXITED) and will not run again by itself."""


class NoEndpoint(OverbrainerError):
    """The pod has no SSH endpoint yet."""


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
        return follow_on_pod(self.ctx, watch, run_id, interrupt)

    def job_started(self) -> None:
        self.ctx.job_started()


@contextmanager
def pod_lease(session: Session, target: Any, record, *, owners: Owners, start: bool,
              options: Options) -> Iterator[PodLease]:
    """The pod of `record` on the Runpod `target` for the block (see the module docstring and
    runpod.owners.Options), under the session's configuration and its flow's Interrupt; `owners`:
    the project's runs and side jobs."""
    if options.retrieved is None:
        raise ValueError("a Runpod lease needs the rule saying whether a run's results are home")
    interrupt = session.interrupt
    guard = session.front.open_bus()
    client = None
    executor = None
    try:
        client = RunpodClient.from_config(session.config)
        owner = options.home or owners.run(record.id)
        ctx = PodContext(client, owner, owners.project_dir, Timing.default(), guard.bus.publish, options.retrieved)
        if start:
            _end_retrieved(ctx, owners, None, interrupt,
                           rule=options.retrieved if not owner.side else options.runs_retrieved)
            warn_orphans(client, owners, record.id, stale=True)
            executor = _provision(ctx, session.front, target, record, interrupt, options)
        else:
            executor = interrupt.shield(reconnect, ctx, record,
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
    found = retrieved_but_not_deleted(owners, rule or ctx.retrieved, run_id)
    if found:
        interrupt.shield(end_retrieved_pods, ctx.client, found, ctx.timing, publish=ctx.publish,
                         note="deleting the pods of runs that ended")


def end_left_pod(session: Session, owners: Owners, run_id: str, retrieved: Retrieved) -> None:
    """`train attach` of a run that ended with its results home (`retrieved(record, run_dir)`):
    delete its pod if pod.json shows one left (nothing to do, and no API key needed, otherwise)."""
    if not retrieved_but_not_deleted(owners, retrieved, run_id):
        return
    with (session.interruptible() as interrupt, RunpodClient.from_config(session.config) as client,
          session.front.open_bus() as guard):
        ctx = PodContext(client, owners.run(run_id), owners.project_dir, Timing.default(), guard.bus.publish,
                         retrieved)
        _end_retrieved(ctx, owners, run_id, interrupt)


# --- provisioning ---------------------------------------------------------------------------------

def _provision(ctx: PodContext, front, target, record, interrupt, options: Options):
    """Create the pod (shielded, flag-checked), arm its cost cap, claim the run's directory."""
    keep = options.keep
    ctx.flag = front.provisioning_flag()
    cluster = bool(getattr(target, "cluster", False))  # an Instant Cluster: runpod/cluster.py
    try:
        provisioned = interrupt.shield(
            start_cluster if cluster else start_pod, ctx.client, target,
            PodPlace(record.id, ctx.run_dir, options.workdir or WORKDIR, ctx.client.base_url, keep=keep),
            flag=_Stop(ctx, interrupt), timing=ctx.timing, publish=ctx.publish,
            note=f"creating the {'cluster' if cluster else 'pod'} of {ctx.owner()}")
    except BaseException as e:
        _provisioning_failed(ctx, record, e, interrupt)
        raise
    finally:
        ctx.flag.close()  # stop watching for Ctrl-C itself (a flag already set stays set)
    ctx.pod = provisioned.record
    executor = nodes_executor(ctx, provisioned.executors) if cluster else provisioned.executor
    try:
        if ctx.stopped(interrupt):
            raise Interrupted(NOT_STARTED)
        _arm_cost_cap(ctx, executor, record, keep)
        ctx.home.claim(executor, record, _claim_owner(ctx.pod.host_key))
        if keep:
            log.warning("%s: pod %s is kept with no time limit at %s: only `overbrainer pod rm %s` "
                        "deletes it", ctx.owner(), ctx.pod.pod_id, fmt.usd_per_hour(ctx.pod.cost_per_hour),
                        record.id)
    except BaseException as e:
        try:
            interrupt.shield(_release, ctx, executor, interrupt, error=e,
                             note=f"deleting the pod of {ctx.owner()}")
        finally:
            executor.close()
        raise
    return executor


def nodes_executor(ctx: PodContext, executors) -> NodesExecutor:
    """A cluster's members as one executor (exec/nodes.py), the API telling when one is lost."""
    assert ctx.pod is not None
    nodes = [Node(m.rank, m.ip, ex) for m, ex in zip(ctx.pod.members, executors)]
    return NodesExecutor(nodes, lost=lambda: _members_lost(ctx), lost_every=ctx.timing.watchdog_interval)


def _members_lost(ctx: PodContext) -> str | None:
    if ctx.pod is None:
        return None
    try:
        return members_lost(ctx.client, ctx.pod)
    except RunpodError as e:  # cannot tell: the next status asks again
        log.debug("cannot look at the members of run %s: %s", ctx.run_id, e)
        return None


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
        raise CostCapUnset(f"max_cost_usd cannot be applied ({e}): the pod was deleted and training "
                                   "refused") from e
    if cap is None:
        return
    remote = f"{executor.workdir.rstrip('/')}/{record.id}"
    try:
        for name, text in cap.files(time.time()).items():
            executor.put_file(f"{remote}/{name}", text)
    except OverbrainerError as e:
        raise CostCapUnset(f"max_cost_usd cannot be applied ({e}): the pod was deleted and training "
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
        reason = (COST_CAP_UNSET if isinstance(error, CostCapUnset)
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
                    fmt.usd_per_hour(pod.cost_per_hour),
                    f"at {pod.deadline}" if pod.deadline else "when its retrieve grace ends", run.id)
        return
    if not run.ended:
        log.warning("%s", detach_message(pod, run.id))
        return
    end_pod(ctx, executor, run, ctx.run_dir, ctx.retrieved(run, ctx.run_dir))


def gone_message(pod: PodRecord) -> str:
    if past_deadline(pod):
        return DEADLINE_MESSAGE
    return f"pod {pod.pod_id} no longer exists"


# --- following -----------------------------------------------------------------------------------

def client_deadline(pod: PodRecord, margin: float) -> float | None:
    """Unix time at which the client deletes the pod itself; None for a kept pod."""
    if pod.keep or pod.deadline_unix is None:
        return None
    return pod.deadline_unix + margin


def follow_on_pod(ctx, watch, run_id: str, interrupt):
    """`watch(interrupt)` (the job layer's follow of the job) under the client's deadline, then
    settled (shielded): None after Ctrl-C (the job keeps running, the watchdog owns the pod);
    raises DeadlineReached / PodGone (the run is then failed) or the watch's own error (the run
    stays running)."""
    deadline = client_deadline(ctx.pod, ctx.timing.deadline_margin)
    tripped = threading.Event()
    done = threading.Event()

    def link() -> None:  # the watch ends at Ctrl-C or at the deadline, whichever comes first
        ended = sleep_until(math.inf if deadline is None else deadline, done, interrupt, clock=time.time,
                            poll=LINK_LOOK)
        if not done.is_set() and (not ended or interrupt.caught()):
            tripped.set()

    watcher = threading.Thread(target=link, name="overbrainer-pod-deadline", daemon=True)
    watcher.start()
    error: OverbrainerError | None = None
    followed = None
    try:
        followed = watch(Interrupt.on(tripped))
    except OverbrainerError as e:
        error = e
    finally:
        done.set()
    if error is None and followed is not None:
        return followed
    if error is None and interrupt.caught():
        return None
    if error is None:
        return interrupt.shield(_deadline_reached, ctx, run_id,
                                note=f"deleting the pod of run {run_id}")
    return interrupt.shield(_unreachable, ctx, run_id, error,
                            note=f"looking up the pod of run {run_id}")


def _deadline_reached(ctx, run_id: str):
    remove(ctx.client, ctx.pod, ctx.pod_path, DEADLINE, "client", ctx.timing, publish=ctx.publish)
    ctx.home.fail_run(DEADLINE_MESSAGE)
    ctx.forget()
    raise DeadlineReached(f"{ctx.owner(run_id)} failed: {DEADLINE_MESSAGE}")


def _unreachable(ctx, run_id: str, error: OverbrainerError):
    """The watch failed: the run fails only when its pod is gone, or a member of its cluster."""
    lost = _node_lost(error)
    if lost is not None:
        _member_lost(ctx, run_id, lost)
    try:
        remote = look_up(ctx.client, ctx.pod.pod_id, ctx.timing)
    except RunpodError as e:
        log.warning("cannot look up pod %s of run %s: %s", ctx.pod.pod_id, run_id, e)
        raise error from e
    if remote is not None:
        raise error
    message = settle_gone(ctx, run_id)
    raise PodGone(f"{ctx.owner(run_id)} failed: {message}", cause=error)


def _node_lost(error: BaseException | None) -> NodeLost | None:
    """The NodeLost behind the watch's error (the follow wraps what it cannot get past)."""
    while error is not None and not isinstance(error, NodeLost):
        error = error.__cause__
    return error


def _member_lost(ctx, run_id: str, error: NodeLost):
    """A member of the run's cluster is lost: the job stopped on every node still reachable, the
    whole cluster deleted, the run failed saying which member and why."""
    message = f"{error}: the cluster was deleted"
    log.warning("%s: %s", ctx.owner(run_id), message)
    try:
        remove(ctx.client, ctx.pod, ctx.pod_path, MEMBER_LOST, "client", ctx.timing, publish=ctx.publish)
    except NotDeleted as e:
        message = f"{error}; {e}"
    ctx.home.fail_run(message)
    ctx.forget()
    raise PodGone(f"{ctx.owner(run_id)} failed: {message}", cause=error)


def settle_gone(ctx, run_id: str) -> str:
    """The run's side of a pod found gone: pod.json records it deleted (`gone.mark_gone`: by the
    watchdog when its deadline passed), the run's keys are forgotten, and the run fails when it
    was preparing or running; returns the reason."""
    message = gone_message(ctx.pod)
    mark_gone(ctx.pod, path=ctx.pod_path)
    ctx.forget()
    try:
        state = ctx.home.load().state
    except OverbrainerError:
        state = None
    if state in (PREPARING, RUNNING):  # an ended run keeps its outcome
        ctx.home.fail_run(message)
    log.warning("%s: %s", ctx.owner(run_id), message)
    return message


# --- the end of the job ---------------------------------------------------------------------

def copy_pod_logs(executor, remote_dir: str, run_dir: Path) -> None:
    """The watchdog's and the bootstrap's logs into `runs/<id>/.pod/`, best effort."""
    try:
        executor.download(remote_dir, str(run_dir), POD_LOGS)
    except OverbrainerError as e:
        log.warning("cannot copy the pod's logs of run %s: %s", run_dir.name, e)


def end_pod(ctx, executor, run, run_dir: Path, retrieved: bool) -> str:
    """End the pod once the job ended; returns the pod's state (`deleted`, `kept`,
    `awaiting_retrieval`). Raises OverbrainerError `<run> ended, but not its pod` when the
    delete cannot be confirmed."""
    pod = ctx.pod
    owner = ctx.owner(run.id)
    copy_pod_logs(executor, run.remote_dir, run_dir)
    if not retrieved:
        pod.transition(PodState.KEPT if pod.keep else PodState.AWAITING_RETRIEVAL)
        pod.save(ctx.pod_path)
        stays = ("stays (--keep-pod), nothing deletes it automatically" if pod.keep
                 else "stays until its watchdog's retrieve grace ends")
        again = (f"reach it with `{ctx.ssh_line(run.id)}`" if ctx.home.side
                 else f"retrieve them with `overbrainer train attach {run.id}`")
        log.warning("the results of %s were not retrieved: pod %s %s; %s, or remove the pod with "
                    "`overbrainer pod rm %s`", owner, pod.pod_id, stays, again, run.id)
        return pod.state.value
    try:
        executor.put_file(f"{run.remote_dir.rstrip('/')}/{RETRIEVED_MARKER}", "retrieved\n")
    except OverbrainerError as e:
        log.warning("cannot mark the results of %s retrieved on its pod: %s", owner, e)
    if pod.keep:
        pod.transition(PodState.KEPT)
        pod.save(ctx.pod_path)
        log.warning("%s: pod %s is kept (%s): reach it with `%s`; remove it with `overbrainer pod rm %s`",
                    owner, pod.pod_id, fmt.usd_per_hour(pod.cost_per_hour), ctx.ssh_line(run.id), run.id)
        return pod.state.value
    try:
        remove(ctx.client, pod, ctx.pod_path, RETRIEVED, "client", ctx.timing, publish=ctx.publish)
    except NotDeleted as e:
        raise OverbrainerError(f"{owner} ended, but not its pod: {e}", cause=e) from e
    ctx.sweep_and_forget(sweep)
    return pod.state.value


def retrieved_but_not_deleted(owners: Owners, retrieved: Retrieved | None, only: str | None = None) -> list[tuple]:
    """(owner, record, pod record) of every run and side job (or of `only`) that ended with its
    results home while its pod.json still shows a pod that is not kept: its client was killed
    after the retrieval and before the delete. A run's results are home by `retrieved(record,
    run_dir)` (the training's rule; None: runs are left alone), a side job's by its own rule
    (Owner.results_home). Unreadable records are left alone."""
    if only is not None:
        home = owners.find(only)
        homes = [home] if home is not None else []
    else:
        homes = pod_owners(owners)
    found = []
    for home in homes:
        if not home.side and retrieved is None:
            continue
        try:
            pod = PodRecord.load_if_any(PodRecord.path_in(home.dir))
            if pod is None or not pod.live or pod.keep or pod.state == PodState.KEPT:
                continue
            run = home.load()
        except (OverbrainerError, OSError):
            continue
        if run.ended and home.results_home(run, retrieved):
            found.append((home, run, pod))
    return found


def end_retrieved_pods(client, found: list[tuple], timing, *, publish=None) -> None:
    """Delete (and confirm) the pods `retrieved_but_not_deleted` found, one warning line each, then
    sweep each run's other marker pods and forget its keys. Failures are warnings."""
    for home, run, pod in found:
        log.warning("%s %s ended and its results are home, but its pod %s was not deleted: deleting it now",
                    home.kind, run.id, pod.pod_id)
        try:
            remove(client, pod, pod.path, RETRIEVED, "client", timing, publish=publish)
            strays = sweep(client, run.id, pod.pod_id, timing, publish=publish)
        except (NotDeleted, RunpodError) as e:
            log.warning("%s: %s", run.id, e)
            continue
        if strays:
            pod.add_strays(strays)
            pod.save(pod.path)
        if pod.no_pod_left:
            forget_run(client, pod.path.parent, run.id)


# --- reconnecting ----------------------------------------------------------------------------------

def reconnect(ctx, run):
    """Connect again to the run's pod (train attach, stop, cancel). None when there is no pod any
    more (`pod.json` then says deleted; a running run is failed). Raises PodStopped (EXITED),
    NoEndpoint (no `ssh.direct` yet) or the API's / the connection's error."""
    pod = ctx.pod
    if pod is None or pod.pod_id is None or pod.state == PodState.DELETED:
        return None
    remote = look_up(ctx.client, pod.pod_id, ctx.timing)
    if remote is None:
        settle_gone(ctx, run.id)
        return None
    if remote.status == "EXITED":
        raise PodStopped(f"pod {pod.pod_id} of run {run.id} is stopped and will not run again by itself; "
                         f"remove it with `overbrainer pod rm {run.id}`")
    if remote.ssh is None:
        raise NoEndpoint(f"pod {pod.pod_id} of run {run.id} has no SSH endpoint (status {remote.status}); "
                         "try again once it runs")
    endpoint = PodEndpoint(remote.ssh.host, remote.ssh.port, remote.ssh.username)
    keys = RunKeys.load(ctx.run_dir / SSH_DIR, run.id)  # the config is rewritten: a restart moves the port
    if pod.is_cluster:  # every member again (a member's endpoint as recorded; the primary's as shown now)
        endpoints = [endpoint if m.rank == 0 else m.ssh for m in pod.members]
        executors = [executor_for(keys, endpoint, workdir_of(run.remote_dir), pod_id=m.pod_id, members=endpoints,
                                  rank=m.rank) for m in pod.members]
        executor = nodes_executor(ctx, executors)
    else:
        executor = executor_for(keys, endpoint, workdir_of(run.remote_dir), pod_id=pod.pod_id)
    pod.ssh = endpoint
    pod.save(ctx.pod_path)
    return executor


def detach_message(pod: PodRecord, run_id: str) -> str:
    """What keeps a pod after the client let go of a running job."""
    rate = fmt.usd_per_hour(pod.cost_per_hour)
    text = (f"run {run_id} keeps running on pod {pod.pod_id} ({rate}): follow it with `overbrainer train "
            f"attach {run_id}`, or remove the pod with `overbrainer pod rm {run_id}`")
    if pod.keep:
        return text + f"; the pod is kept: reach it with `{ssh_line(run_id)}`"
    if pod.deadline is not None:
        text += f"; its watchdog deletes it at {pod.deadline} at the latest"
    return text

