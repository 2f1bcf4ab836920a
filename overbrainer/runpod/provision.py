"""Provisioning a run's pod (`start_pod`): keys, `pod.json`, the host-key secret, the GPU walk,
reach and verdict. No pod bills unknown to the client: every create attempt is saved `sent`
before its POST, an unclear answer is reconciled by the run marker and the attempt's name (never
resent blindly), a pod that does not become ready is deleted and its delete confirmed before the
next create, and once the walk fails with no pod left the run's keys and secret are dropped.

Order: keys (`runs/<id>/ssh/`) → `pod.json` → provisioning flag → the `"auto"` pick from one
catalog read → the network volume's size → the host key as an account secret → the walk: per
GPU type at most 2 unclear creates; any 400 → next type (Runpod's "no capacity" has no machine
code: its `detail` is recorded and, when every type answered 400, shown one line per type);
401, 402, 403 and 422 stop the walk.

The caller runs this shielded from Ctrl-C and hands in the provisioning `flag` (anything with
`is_set()`): it is looked at before the walk (no request at all then), before each create, at
every reach and verdict poll and in reconcile waits (which still list once); the pod that exists
is then deleted and `errors.ProvisioningInterrupted` raised.

From a created pod to a ready one (`reach`, `verdict`): reach it over SSH with the run's own key
and pinned host key (never the user's ssh config, agent or known_hosts), then read the watchdog's
verdict. Both steps poll every `poll` seconds and look at the provisioning flag at each poll: a
set flag raises `Stopped`, and the pod is deleted. A pod answering 404 is not taken as gone on
that 404 (Runpod may 404 a pod it has just created): the gone rule decides (runpod/gone.py: 3
Runpod 404s `gone_interval` apart and its absence from the list, or `TERMINATED`), and a look
that cannot decide is one more failed poll. `executor_for` connects to a known pod again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from overbrainer.config.model import RunpodTarget
from overbrainer.errors import OverbrainerError
from overbrainer.exec.ssh import SshExecutor
from overbrainer.exec.ssh_connect import SshEndpoint
from overbrainer.front.events import PodStatus
from overbrainer.runpod import catalog, cost
from overbrainer.runpod import errors as api
from overbrainer.runpod.errors import (
    BootstrapFailed,
    HostKeySecret,
    NotFound,
    NotReady,
    NoTypePlaced,
    ProvisioningInterrupted,
    RunpodError,
    Unanswered,
    VolumeSize,
    WatchdogRefused,
)
from overbrainer.runpod.gone import look_up
from overbrainer.runpod.keys import SSH_DIR, RunKeys
from overbrainer.runpod.objects import Pod
from overbrainer.runpod.pod_record import (
    AMBIGUOUS,
    FORBIDDEN,
    NOT_READY,
    REFUSED,
    REJECTED,
    UNAVAILABLE,
    Attempt,
    PodEndpoint,
    PodRecord,
    PodState,
)
from overbrainer.runpod.pod_spec import SSH_PORT, PodSettings, create_body, host_key_secret_name, pod_env
from overbrainer.runpod.remove import (
    BOOTSTRAP_FAILED,
    DUPLICATE,
    INTERRUPTED,
    NotDeleted,
    delete_confirmed,
    forget_run,
    remove,
    sweep,
)
from overbrainer.runpod.remove import NOT_READY as NOT_READY_REASON
from overbrainer.runpod.remove import REFUSED as REFUSED_REASON
from overbrainer.runpod.units import POD, Unit
from overbrainer.runpod.waits import Timing, flag_set
from overbrainer.support import fmt
from overbrainer.support.redact import register, strip_controls
from overbrainer.support.sleep import pause
from overbrainer.support.timescale import scaled

log = logging.getLogger(__name__)

AMBIGUOUS_PER_TYPE = 2


@dataclass
class Provisioned:
    record: PodRecord
    pod: Pod
    executor: SshExecutor  # connected, pinned to the run's host key
    keys: RunKeys


@dataclass
class Walk:
    client: Any
    target: RunpodTarget
    run_id: str
    keys: RunKeys
    record: PodRecord
    workdir: str
    api_url: str
    flag: Any
    timing: Timing
    publish: Callable[[PodStatus], None] | None
    extra_env: dict = field(default_factory=dict)
    ports: tuple[str, ...] = (SSH_PORT,)
    own_entrypoint: bool = False
    volume_gb: int | None = None
    secret_made: bool = False
    refusals: list[str] = field(default_factory=list)     # `<gpu>: <detail>` of each 400
    not_ready: list[str] = field(default_factory=list)    # reasons of pods that never became ready

    def event(self, phase: str, pod_id: str | None = None, gpu: str | None = None, rate: float | None = None,
              message: str | None = None) -> None:
        if self.publish is not None:
            self.publish(PodStatus(self.run_id, phase, pod_id, gpu, rate or None, message=message))

    @property
    def run_dir_on_pod(self) -> str:
        return f"{self.workdir.rstrip('/')}/{self.run_id}"


@dataclass(frozen=True)
class PodPlace:
    """Where a run's pod works: the run's ID, its local `runs/<id>` (`run_dir`), the pod's workdir
    (the run's directory there is `<workdir>/<run-id>`), the API base URL the pod's watchdog calls,
    and whether the pod is kept when the job ends (`--keep-pod`)."""

    run_id: str
    run_dir: Path
    workdir: str
    api_url: str
    keep: bool = False
    ports: tuple[str, ...] = (SSH_PORT,)  # a served engine's HTTP port too (runpod/serve.py)
    own_entrypoint: bool = False  # the bootstrap replaces the image's ENTRYPOINT (pod_spec.pod_args)


def start_pod(client, target, place: PodPlace, *, flag, timing: Timing | None = None,
              publish: Callable[[PodStatus], None] | None = None, extra_env: dict | None = None) -> Provisioned:
    """Create the run's pod and wait until it is ready (see the module docstring). `target` is a
    RunpodTarget; `flag` stops the walk when set (see runpod.waits.flag_set). `extra_env` is added
    to the pod's env (images that need more; tests). On failure the record shows what may be
    left; keys and secret are dropped only when no pod of the run may be left."""
    if getattr(target, "cluster", False):
        raise ValueError("start_pod makes one pod: a target with nodes >= 2 is runpod.cluster.start_cluster's")
    return start_unit(client, target, place, flag=flag, timing=timing, publish=publish, extra_env=extra_env,
                      try_type=_try_type, unit=POD)


def start_unit(client, target, place: PodPlace, *, flag, timing: Timing | None, publish, extra_env: dict | None,
               try_type: Callable[[Walk, catalog.Candidate], Any], unit: Unit) -> Any:
    """The walk of a pod or a cluster (runpod/cluster.py): keys, `pod.json`, then `try_type` per
    candidate GPU type until one returns what it made; any failure cleans up (`_fail`)."""
    run_id, run_dir = place.run_id, Path(place.run_dir)
    keys = RunKeys.generate(run_dir / SSH_DIR, run_id)
    record = PodRecord.for_target(run_id, target, keep=place.keep, host_key=keys.host_public,
                                  path=PodRecord.path_in(run_dir))
    record.save()
    w = Walk(client, target, run_id, keys, record, place.workdir, place.api_url, flag, timing or Timing.default(),
             publish, dict(extra_env or {}), place.ports, place.own_entrypoint)
    try:
        return _provision(w, try_type)
    except Exception as e:
        _fail(w, e, unit)
        if isinstance(e, Stopped):
            raise ProvisioningInterrupted(not w.record.no_pod_left) from None
        raise


def _fail(w: Walk, error: Exception, unit: Unit = POD) -> None:
    """After a failed walk: delete what is live (best effort), sweep after unclear creates, and
    forget the keys and secret when no pod may be left."""
    record = w.record
    if record.live and not isinstance(error, NotDeleted):
        reason = INTERRUPTED if isinstance(error, Stopped) else NOT_READY_REASON
        try:
            remove(w.client, record, None, reason, "client", w.timing, publish=w.publish)
        except Exception as e:  # noqa: BLE001 - the first error wins; this one is logged
            log.warning("%s", e)
    if any(a.result == AMBIGUOUS for a in record.attempts):
        try:
            _note_strays(w, sweep(w.client, w.run_id, None, w.timing, publish=w.publish, unit=unit))
        except api.RunpodError as e:
            log.warning("cannot look for late %ss of run %s (%s): check `overbrainer pod ls`", unit.word, w.run_id, e)
        names = ", ".join(a.name for a in record.attempts if a.result == AMBIGUOUS)
        log.warning("Runpod did not answer clearly to %s: check `overbrainer pod ls`", names)
    if record.no_pod_left:
        forget_run(w.client, w.keys, w.run_id, secret=w.secret_made)


def _note_strays(w: Walk, strays: list[str]) -> None:
    if strays:
        w.record.add_strays(strays)
        w.record.save()


def _provision(w: Walk, try_type: Callable[[Walk, catalog.Candidate], Any]) -> Any:
    if flag_set(w.flag):
        raise Stopped()
    wanted = catalog.Wanted.of(w.target)
    cluster = bool(getattr(w.target, "cluster", False))
    gpus = w.client.gpu_types(w.target.gpu_count, cluster=cluster) if wanted.needs_catalog else None
    candidates = catalog.pick(wanted, gpus)
    _check_volume(w)
    _store_host_key(w)
    for candidate in candidates:
        done = try_type(w, candidate)
        if done is not None:
            return done
    if w.record.attempts and all(a.result == AMBIGUOUS for a in w.record.attempts):
        raise Unanswered()
    raise NoTypePlaced(_no_capacity_text(w))


def _check_volume(w: Walk) -> None:
    volume_id = w.target.network_volume_id
    if not volume_id:
        return
    try:
        size = w.client.volume(volume_id).size_gb
    except api.RunpodError as e:
        raise VolumeSize(volume_id, str(e)) from None
    if not size:
        raise VolumeSize(volume_id, "Runpod gave no size")
    w.volume_gb = size


def _store_host_key(w: Walk) -> None:
    name = host_key_secret_name(w.run_id)
    value = w.keys.host_secret_value()
    register(value)
    try:
        try:
            w.client.create_secret(name, value, f"host key of overbrainer run {w.run_id}")
        except api.SecretExists:
            found = w.client.secrets(name)
            if not found:
                raise HostKeySecret("Runpod says it exists, but does not list it") from None
            w.client.patch_secret(found[0].id, value)
    except api.RunpodError as e:
        raise HostKeySecret(str(e)) from None
    w.secret_made = True


def _no_capacity_text(w: Walk) -> str:
    volume = " (check network_volume_id and data_center_ids)" if w.target.network_volume_id else ""
    if w.not_ready:
        n = len(w.not_ready)
        text = (f"no gpu_types entry gave a ready pod: {n} pod{'s were' if n > 1 else ' was'} created but never "
                f"became ready, the last one because {w.not_ready[-1]}{volume}")
        if w.refusals:
            text += "; the other types answered 400:"
    else:
        text = f"no gpu_types entry could be placed{volume}"
        if w.refusals:
            text += (": every create answered 400 (Runpod's words below; if they are not about capacity, "
                     "overbrainer built a wrong request: please report it):")
    return text + "".join(f"\n  {line}" for line in w.refusals)


def _body(w: Walk, candidate: catalog.Candidate, attempt: Attempt) -> dict:
    t = w.target
    settings = PodSettings(run_id=w.run_id, authorized_key=w.keys.client_public,
                           max_seconds=None if w.record.keep else int(round(t.max_hours * 3600)),
                           boot_grace_secs=int(t.boot_grace_minutes * 60),
                           retrieve_grace_secs=int(t.retrieve_grace_minutes * 60), keep=w.record.keep,
                           gpu_count=t.gpu_count, max_cost_usd=w.record.max_cost_usd, api_url=w.api_url,
                           workdir=w.workdir, time_scale=scaled(1.0))
    return create_body(t, name=attempt.name, gpu_type=candidate.gpu_type, env={**w.extra_env, **pod_env(settings)},
                       data_center_ids=candidate.data_center_ids, volume_gb=w.volume_gb, ports=w.ports,
                       own_entrypoint=w.own_entrypoint)


@dataclass(frozen=True)
class Creates:
    """How the walk creates one kind of thing (a pod here, a cluster in runpod/cluster.py):
    `announce` (the event and price line before the POST), `create` (the POST, sent once),
    `reconcile` (after an unclear answer: what the attempt made, or None), `created` (follow it
    until ready: what `start_unit` returns, or None for the next GPU type)."""

    announce: Callable[[Walk, catalog.Candidate, Attempt], None]
    create: Callable[[Walk, catalog.Candidate, Attempt], Any]
    reconcile: Callable[[Walk, Attempt], Any]
    created: Callable[[Walk, Attempt, Any, bool], Any]


def try_type(w: Walk, candidate: catalog.Candidate, how: Creates) -> Any:
    """Up to 2 unclear creates of one GPU type: what `how.created` made ready, or None for the
    next type. An unclear answer is reconciled, never resent blindly."""
    record, gpu = w.record, candidate.gpu_type
    unclear = 0
    while True:
        if flag_set(w.flag):
            raise Stopped()
        attempt = record.begin_attempt(gpu, w.target.max_hours, now=time.time())
        how.announce(w, candidate, attempt)
        made, adopted = None, False
        try:
            made = how.create(w, candidate, attempt)
        except api.NoCapacity as e:  # any 400: no capacity has no machine code, so the next type
            record.settle(attempt, UNAVAILABLE, detail=str(e))
            record.save()
            w.refusals.append(f"{gpu}: {e.detail}")
            w.event("unavailable", gpu=gpu, message=str(e))
            return None
        except api.Forbidden as e:  # 403: the key may not do this; another type would not help
            record.settle(attempt, FORBIDDEN, detail=str(e))
            record.save()
            raise
        except api.Ambiguous as e:
            record.settle(attempt, AMBIGUOUS, detail=str(e))
            record.save()
            unclear += 1
            made = how.reconcile(w, attempt)
            adopted = made is not None
            if made is None:
                if flag_set(w.flag):
                    raise Stopped() from None
                if unclear >= AMBIGUOUS_PER_TYPE:
                    return None
                continue
        except api.RunpodError as e:  # 401, 402, 422, 429 after retries: stop
            record.settle(attempt, REJECTED, detail=str(e))
            record.save()
            raise
        return how.created(w, attempt, made, adopted)


def _announce(w: Walk, candidate: catalog.Candidate, attempt: Attempt) -> None:
    t, keep = w.target, w.record.keep
    price = candidate.price_per_gpu * t.gpu_count if candidate.price_per_gpu else None
    w.event("creating", gpu=candidate.gpu_type, rate=price, message=attempt.name)
    log.info("creating pod %s: %s", attempt.name, cost.price_line(
        candidate.gpu_type, t.gpu_count, candidate.price_per_gpu, None if keep else t.max_hours,
        None if keep else t.max_cost_usd))


def _try_type(w: Walk, candidate: catalog.Candidate) -> Provisioned | None:
    return try_type(w, candidate, Creates(
        _announce, lambda w, c, a: w.client.create_pod(_body(w, c, a)), _reconcile, _created))


def _reconcile(w: Walk, attempt: Attempt) -> Pod | None:
    """After an unclear create: wait, list the run's marker pods, adopt the one named like
    `attempt`, delete the others (duplicates; unconfirmed → strays). None found: wait longer and
    look again. Ctrl-C cuts the waits short but the list is still read once."""
    for wait in w.timing.reconcile_waits:
        stopped = pause(wait, w.flag)
        try:
            mine = [p for p in w.client.list_pods() if p.run_marker == w.run_id]
        except api.RunpodError as e:
            log.warning("cannot list pods to find the pod of %s: %s", attempt.name, e)
            mine = []
        adopt = next((p for p in mine if p.name == attempt.name), None)
        others = [p.id for p in mine if adopt is None or p.id != adopt.id]
        if others:
            log.warning("deleting %d other pod(s) of run %s: %s", len(others), w.run_id, ", ".join(others))
            _note_strays(w, _delete_all(w, others))
        if adopt is not None or stopped:
            return adopt
    return None


def _delete_all(w: Walk, pod_ids: list[str]) -> list[str]:
    strays = []
    for pod_id in pod_ids:
        w.event("deleting", pod_id, message=DUPLICATE)
        if delete_confirmed(w.client, pod_id, w.timing)[0]:
            w.event("deleted", pod_id, message=DUPLICATE)
        else:
            strays.append(pod_id)
            w.event("stray", pod_id, message="not confirmed deleted")
    return strays


def _created(w: Walk, attempt: Attempt, pod: Pod, adopted: bool) -> Provisioned | None:
    record = w.record
    record.pod_created(attempt, pod.id, gpu_type=pod.gpu_id, gpu_count=pod.gpu_count,
                       data_center_id=pod.data_center_id, rate=pod.cost_per_hour, adopted=adopted)
    try:
        record.save()
    except Exception:
        remove(w.client, record, None, NOT_READY_REASON, "client", w.timing, publish=w.publish)
        raise
    w.event("adopted" if adopted else "created", pod.id, record.gpu_type, record.cost_per_hour,
            message=f"in {pod.data_center_id}" if pod.data_center_id else None)
    try:
        executor, endpoint, seen = reach(w.client, record, w.keys, w.workdir, w.timing, w.flag,
                                         on_rate=lambda p: record.save())
        try:
            verdict(w.client, record, executor, w.run_dir_on_pod, w.timing, w.flag)
        except BaseException:
            executor.close()
            raise
    except NotReady as e:
        record.settle(attempt, NOT_READY, detail=str(e))
        w.event("not_ready", pod.id, record.gpu_type, message=str(e))
        remove(w.client, record, None, NOT_READY_REASON, "client", w.timing, publish=w.publish)
        record.forget_pod()
        record.save()
        w.not_ready.append(str(e))
        return None
    except WatchdogRefused as e:
        record.settle(attempt, REFUSED, detail=str(e))
        reason = BOOTSTRAP_FAILED if isinstance(e, BootstrapFailed) else REFUSED_REASON
        remove(w.client, record, None, reason, "client", w.timing, publish=w.publish)
        raise
    record.mark_ready(endpoint)
    record.save()
    w.event("ready", pod.id, record.gpu_type, record.cost_per_hour)
    try:
        _note_strays(w, sweep(w.client, w.run_id, pod.id, w.timing, publish=w.publish))
    except api.RunpodError as e:
        log.warning("cannot look for other pods of run %s (%s): check `overbrainer pod ls`", w.run_id, e)
    return Provisioned(record, seen, executor, w.keys)


# --- reaching a created pod, its verdict -----------------------------------------------------------

VERDICT = ".pod/watchdog"
VERDICT_CAP = 4096
CONNECT_CAP = 30.0


class Stopped(Exception):
    """The provisioning flag was set (Ctrl-C): stop and delete the pod."""


def executor_for(keys: RunKeys, endpoint: PodEndpoint, workdir: str, *, pod_id: str,
                 timeout: float = CONNECT_CAP, members: list[PodEndpoint] | None = None,
                 rank: int = 0) -> SshExecutor:
    """A connected executor on the pod: the run's config (rewritten now), its client key only,
    its pinned host key only, no agent. A cluster's member: `members` are every member's
    endpoints by rank (`endpoint` is the primary's), `rank` the one to reach (its own Host in
    the config: the members' hosts differ)."""
    others = list(members[1:]) if members else []
    config = keys.write_config(endpoint, others)
    reached = members[rank] if members else endpoint
    ssh = SshEndpoint(keys.member_alias(rank), port=reached.port, user=reached.user,
                      key_files=[str(keys.client_key)], ssh_config=str(config), known_hosts=[str(keys.known_hosts)],
                      host_key=keys.host_public, agent=False, timeout=timeout, label=f"pod {pod_id}")
    return SshExecutor(ssh, workdir)


def workdir_of(remote_dir: str) -> str:
    """The pod's workdir, from a run's directory there (`<workdir>/<id>`)."""
    return remote_dir.rstrip("/").rsplit("/", 1)[0] or "/"


def pod_executor(run_dir: Path, record: Any) -> SshExecutor:
    """The run's pod over SSH, from pod.json's last endpoint and the run's own keys (read-only:
    no Runpod API call; `runs logs`). Raises when the pod is not known to be up."""
    pod = PodRecord.load_if_any(PodRecord.path_in(run_dir))
    if pod is None or pod.ssh is None or pod.pod_id is None or pod.state == PodState.DELETED:
        raise OverbrainerError(f"run {record.id} has no pod to read its log from")
    keys = RunKeys.load(Path(run_dir) / SSH_DIR, record.id)
    if not keys.client_key.exists():
        raise OverbrainerError(f"run {record.id} has no pod to read its log from (its key is gone)")
    return executor_for(keys, pod.ssh, workdir_of(record.remote_dir), pod_id=pod.pod_id)


def look(client, pod_id: str, timing: Timing, flag=None) -> Pod:
    """The pod now. A Runpod 404 starts the gone rule (its waits cut short by the flag): gone
    raises NotReady("the pod disappeared"); TERMINATED too; a failed look raises the API's error."""
    try:
        pod = client.get_pod(pod_id)
    except NotFound:
        pod = look_up(client, pod_id, timing, wait=lambda s: pause(s, flag), seen_404=1)
        if flag_set(flag):
            raise Stopped() from None
    if pod is None or pod.terminated:
        raise NotReady("the pod disappeared")
    return pod


def reach(client, record: PodRecord, keys: RunKeys, workdir: str, timing: Timing, flag=None,
          on_rate=None) -> tuple[SshExecutor, PodEndpoint, Pod]:
    """Poll the pod until its SSH endpoint answers with the pinned key (≤ ready_timeout). Raises
    NotReady (gone, dead, or not reachable in time) or Stopped."""
    pod_id = record.pod_id
    assert pod_id is not None  # reached once the pod was created
    end = time.monotonic() + timing.ready_timeout
    last = "no SSH endpoint yet"
    while True:
        if flag_set(flag):
            raise Stopped()
        try:
            pod = look(client, pod_id, timing, flag)
        except RunpodError as e:
            pod, last = None, str(e)
        if pod is not None:
            if record.note_rate(pod.cost_per_hour) and on_rate is not None:
                on_rate(pod)
            if pod.dead:
                raise NotReady(f"the pod is {pod.status}")
            if pod.ssh is not None:
                try:
                    endpoint = PodEndpoint(pod.ssh.host, pod.ssh.port, pod.ssh.username)
                except ValueError as e:
                    raise NotReady(f"Runpod gave an unusable SSH endpoint ({e})") from None
                left = end - time.monotonic()
                try:
                    return executor_for(keys, endpoint, workdir, pod_id=pod_id,
                                        timeout=max(1.0, min(CONNECT_CAP, left))), endpoint, pod
                except OverbrainerError as e:
                    last = str(e)
            else:
                last = f"no SSH endpoint yet (status {pod.status})"
        if time.monotonic() >= end:
            raise NotReady(f"not reachable over SSH after {fmt.duration(timing.ready_timeout)}: {last}")
        if pause(timing.poll, flag):
            raise Stopped()


def read_verdict(executor: SshExecutor, run_dir_on_pod: str) -> str | None:
    """The watchdog's verdict line, or None while there is none (≤ 4 KiB read, one printable line
    of at most 200 characters)."""
    raw = executor.read_from(f"{run_dir_on_pod.rstrip('/')}/{VERDICT}", 0, VERDICT_CAP)
    text = strip_controls(raw.decode("utf-8", "replace")).strip()
    line = text.splitlines()[0].strip()[:200] if text else ""
    return line or None


def verdict(client, record: PodRecord, executor: SshExecutor, run_dir_on_pod: str, timing: Timing,
            flag=None) -> None:
    """Wait for the watchdog's verdict (≤ verdict_timeout): `ready` returns; `failed bootstrap: r`
    raises BootstrapFailed, `failed r` WatchdogRefused; no verdict in time is a refusal. While
    the file cannot be read, the pod is looked at: gone or dead is NotReady."""
    pod_id = record.pod_id
    assert pod_id is not None  # reached once the pod was created
    end = time.monotonic() + timing.verdict_timeout
    while True:
        if flag_set(flag):
            raise Stopped()
        try:
            line = read_verdict(executor, run_dir_on_pod)
        except OverbrainerError as e:
            log.debug("reading the verdict of pod %s: %s", pod_id, e)
            line = None
            _still_there(client, pod_id, timing, flag)
        if line == "ready":
            return
        if line is not None and line.startswith("failed bootstrap:"):
            raise BootstrapFailed(line[len("failed bootstrap:"):].strip() or "unknown", pod_id)
        if line is not None and line.startswith("failed"):
            raise WatchdogRefused(line[len("failed"):].strip() or "unknown", pod_id)
        if time.monotonic() >= end:
            raise WatchdogRefused(f"no verdict within {fmt.duration(timing.verdict_timeout)}", pod_id)
        if pause(timing.poll, flag):
            raise Stopped()


def _still_there(client, pod_id: str, timing: Timing, flag=None) -> None:
    try:
        pod = look(client, pod_id, timing, flag)
    except RunpodError:
        return
    if pod.dead:
        raise NotReady(f"the pod is {pod.status}")
