"""The steps of a job on a Runpod pod around the generic ones: following it under the client's
deadline, settling what the watch found, ending the pod, reconnecting to it.

Rules kept here:
- The watch (job polls, metrics) never calls the Runpod API and never deletes: dropping it on
  Ctrl-C loses nothing. Its deadline is the watchdog's plus `Timing.deadline_margin` (none for a
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
"""

from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path

from overbrainer.errors import OverbrainerError
from overbrainer.front.interrupt import Interrupt
from overbrainer.runpod import cost
from overbrainer.runpod.errors import RunpodError
from overbrainer.runpod.gone import look_up, mark_gone, past_deadline
from overbrainer.runpod.keys import SSH_DIR, RunKeys, ssh_line
from overbrainer.runpod.owners import PREPARING, RUNNING, Owners, Retrieved
from overbrainer.runpod.pod_record import PodEndpoint, PodRecord, PodState
from overbrainer.runpod.reach import executor_for
from overbrainer.runpod.remove import DEADLINE, RETRIEVED, NotDeleted, forget_run, remove, sweep
from overbrainer.support.sleep import sleep_until

log = logging.getLogger(__name__)

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
    """The watch failed: the run fails only when its pod is gone."""
    try:
        remote = look_up(ctx.client, ctx.pod.pod_id, ctx.timing)
    except RunpodError as e:
        log.warning("cannot look up pod %s of run %s: %s", ctx.pod.pod_id, run_id, e)
        raise error from e
    if remote is not None:
        raise error
    message = settle_gone(ctx, run_id)
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
                    owner, pod.pod_id, cost.format_rate(pod.cost_per_hour), ctx.ssh_line(run.id), run.id)
        return pod.state.value
    try:
        remove(ctx.client, pod, ctx.pod_path, RETRIEVED, "client", ctx.timing, publish=ctx.publish)
    except NotDeleted as e:
        raise OverbrainerError(f"{owner} ended, but not its pod: {e}", cause=e) from e
    ctx.sweep_and_forget(sweep)
    return pod.state.value


def pod_owners(owners: Owners) -> list:
    """Every run and side job of the project whose folder holds a pod.json."""
    return [owner for owner in owners.all() if PodRecord.path_in(owner.dir).is_file()]


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
    executor = executor_for(keys, endpoint, _workdir(run.remote_dir), pod_id=pod.pod_id)
    pod.ssh = endpoint
    pod.save(ctx.pod_path)
    return executor


def _workdir(remote_dir: str) -> str:
    return remote_dir.rstrip("/").rsplit("/", 1)[0] or "/"


def detach_message(pod: PodRecord, run_id: str) -> str:
    """What keeps a pod after the client let go of a running job."""
    rate = cost.format_rate(pod.cost_per_hour)
    text = (f"run {run_id} keeps running on pod {pod.pod_id} ({rate}): follow it with `overbrainer train "
            f"attach {run_id}`, or remove the pod with `overbrainer pod rm {run_id}`")
    if pod.keep:
        return text + f"; the pod is kept: reach it with `{ssh_line(run_id)}`"
    if pod.deadline is not None:
        text += f"; its watchdog deletes it at {pod.deadline} at the latest"
    return text

