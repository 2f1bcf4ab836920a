"""From a created pod to a ready one: reach it over SSH with the run's own key and pinned host key
(never the user's ssh config, agent or known_hosts), then read the watchdog's verdict.

Both steps poll every `poll` seconds and look at the provisioning flag at each poll: a set flag
raises `Stopped`, and the caller deletes the pod. A pod answering 404 is not taken as gone on that
404 (Runpod may 404 a pod it has just created): the gone rule decides (runpod/gone.py: 3 Runpod
404s `gone_interval` apart and its absence from the list, or `TERMINATED`), and a look that
cannot decide is one more failed poll.
"""

from __future__ import annotations

import logging
import time

from overbrainer.errors import OverbrainerError
from overbrainer.exec.ssh import SshExecutor
from overbrainer.exec.ssh_connect import SshEndpoint
from overbrainer.runpod.errors import NotFound, RunpodError
from overbrainer.runpod.failures import BootstrapFailed, NotReady, WatchdogRefused
from overbrainer.runpod.gone import look_up
from overbrainer.runpod.keys import RunKeys
from overbrainer.runpod.objects import Pod
from overbrainer.runpod.pod_record import PodEndpoint, PodRecord
from overbrainer.runpod.waits import Timing, flag_set
from overbrainer.support import fmt
from overbrainer.support.redact import strip_controls
from overbrainer.support.sleep import pause

log = logging.getLogger(__name__)

VERDICT = ".pod/watchdog"
VERDICT_CAP = 4096
CONNECT_CAP = 30.0


class Stopped(Exception):
    """The provisioning flag was set (Ctrl-C): stop and delete the pod."""


def executor_for(keys: RunKeys, endpoint: PodEndpoint, workdir: str, *, pod_id: str,
                 timeout: float = CONNECT_CAP) -> SshExecutor:
    """A connected executor on the pod: the run's config (rewritten now), its client key only,
    its pinned host key only, no agent."""
    config = keys.write_config(endpoint)
    ssh = SshEndpoint(keys.alias, port=endpoint.port, user=endpoint.user, key_files=[str(keys.client_key)],
                      ssh_config=str(config), known_hosts=[str(keys.known_hosts)], host_key=keys.host_public,
                      agent=False, timeout=timeout, label=f"pod {pod_id}")
    return SshExecutor(ssh, workdir)


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
