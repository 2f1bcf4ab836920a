"""A served provider's pods (docs/serving.md): `replicas` pods of its runpod target, each running
the provider's engine on its model, made when a command first needs the provider and deleted when
the command lets it go, or kept warm for the next one.

Every replica is a pod like a run's (runpod/provision.py): recorded before each create, reached
over SSH with its own keys and pinned host key, refused unless its watchdog proves it can delete
it, its create never retried blindly. What differs:

- **The pod**: the engine's image (`Serve.image`), started with the bootstrap in place of the
  image's ENTRYPOINT (pod_spec.pod_args); `ports` publish SSH and the engine's port (`8000/http`,
  reached through Runpod's HTTP proxy: `[runpod] proxy_url`); the bootstrap starts the engine
  at once, beside sshd (runpod/engines.py: its command line; its API key and a gated model's Hub
  token reach it as Runpod account secrets of the serve, `{{ RUNPOD_SECRET_… }}` in its env,
  never in argv, a log or a file).
- **Its watchdog lives on a lease** (`OVERBRAINER_LEASE_SECONDS`): the client rewrites
  `.pod/lease` every `RENEW` seconds while a command holds the serve (`held`); a client that
  stops (killed, its machine gone) stops renewing, and the watchdog deletes the pod `LEASE`
  seconds after the last renewal it saw. Letting the serve go, a command either writes
  `.pod/released` and deletes the pods (confirmed), or leaves them warm: `<keep_warm> idle` (the
  watchdog deletes them after that much idle time, unless another command takes them first).
  `serve up` by hand leaves them `none idle` without keep_warm: they live until `serve down`,
  `max_hours` or `max_cost_usd`. The engine's end deletes the pod too (`engine_exited`).
- **Ready** only when the engine answers `GET /health` (200) and `GET /v1/models` (with the key)
  lists the model, within `boot_grace_minutes`; until then the bootstrap's and the engine's logs
  say why not (copied into the replica's folder on failure).
- **Its records**: `.overbrainer/serves/<serve id>/serve.json` (what was asked for, its state,
  the Runpod secrets made for it, no secret value) and a folder per replica with its `pod.json`
  and `ssh/`. A replica's ID (`<serve id>-r<n>`) is its pod's marker: `pod ls` shows it, `pod rm`
  deletes it (runpod/records.py gives the job layer the serves' replicas as owners).

The engine's API key is derived, not stored: HMAC-SHA256 of the Runpod API key over the serve's
ID and a random nonce (in serve.json), so another command with the same Runpod key (a `run` after
`serve up`) can reach the pods, and no file holds it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets as _random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from overbrainer.config.model import Serve
from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.front.events import PodStatus, RunWatched
from overbrainer.runpod import cost, engines
from overbrainer.runpod.errors import NotReady, RunpodError, SecretExists
from overbrainer.runpod.gone import look_up, mark_gone
from overbrainer.runpod.keys import SSH_DIR, RunKeys
from overbrainer.runpod.ledger import unix_of
from overbrainer.runpod.pod_record import PodEndpoint, PodRecord, PodState
from overbrainer.runpod.pod_spec import SSH_PORT, WORKDIR, secret_reference
from overbrainer.runpod.provision import PodPlace, executor_for, start_pod
from overbrainer.runpod.remove import INTERRUPTED, NOT_READY, REQUESTED, NotDeleted, forget_run, remove
from overbrainer.runpod.serve_record import DOWN, FAILED, IDLE, SERVE_JSON, UP, ServeRecord, all_serves
from overbrainer.runpod.waits import Timing, flag_set
from overbrainer.support import fmt, http
from overbrainer.support.redact import register
from overbrainer.support.sleep import pause
from overbrainer.support.timescale import scaled
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

LEASE = 180.0  # seconds a pod outlives its client's last renewal (scaled; at least LEASE_FLOOR)
LEASE_FLOOR = 15.0
RENEW_SHARE = 6  # renewals per lease
READY_POLL = 0.5  # between two looks at an engine that is loading
HEALTH_TIMEOUT = 30.0
LOST_AFTER = 3  # failed checks in a row (lease write and health) before a replica is looked up
POD_LOGS = (".pod/watchdog.log", ".pod/bootstrap.log", ".pod/engine.log")
HTTP_PORT = f"{engines.PORT}/http"
RELEASED, LEASE_FILE, ENGINE_EXIT = ".pod/released", ".pod/lease", ".pod/engine_exit"
LOST, ENDED = "lost", "released"  # why a replica's pod is deleted (events)


class ServeError(OverbrainerError):
    """A serve that could not be brought up (its pods were deleted) or reached."""


def now_text() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def lease_seconds() -> int:
    return int(max(scaled(LEASE), LEASE_FLOOR))


def settings_digest(serve: Serve, target: Any) -> str:
    """What makes two serves the same one: its model, engine, image, engine args and GPUs (the
    number of replicas aside: a serve is topped up)."""
    parts = [serve.model, serve.engine, serve.image, repr(serve.engine_args), target.name, repr(target.gpu_types),
             str(target.gpu_count), repr(target.data_center_ids), str(target.network_volume_id)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def derive_key(account_key: str, serve_id: str, nonce: str) -> str:
    """The engine's API key of a serve (see the module docstring)."""
    mac = hmac.new(account_key.encode(), f"overbrainer serve key {serve_id} {nonce}".encode(), hashlib.sha256)
    return "ob_" + mac.hexdigest()[:48]


def key_secret_name(serve_id: str) -> str:
    return f"overbrainer_serve_key_{serve_id}"


def hf_secret_name(serve_id: str) -> str:
    return f"overbrainer_serve_hf_{serve_id}"


# --- the live serve ---------------------------------------------------------------------------------


@dataclass
class Replica:
    key: str
    dir: Path
    pod: PodRecord
    keys: RunKeys
    base: str  # the engine's address through Runpod's proxy (`…/v1` is the OpenAI API)
    executor: Any = None  # SshExecutor, while held
    lost: bool = False
    strikes: int = 0

    @property
    def api_base(self) -> str:
        return self.base + "/v1"


class Context:
    """What bringing a serve up or down shares: the API client, the configuration's target and
    provider, where its records go, the front end's bus and interrupt, the timing."""

    def __init__(self, client, config, provider: str | None, serves_dir: Path, *, publish=None, interrupt=None,
                 timing: Timing | None = None):
        self.client = client
        self.config = config
        if provider is not None:
            self.provider = config.providers[provider]
            serve = self.provider.serve
            if serve is None:
                raise ValueError(f"provider {provider} is not served")
            self.serve: Serve = serve
            self.target = config.target(serve.target)
        self.serves_dir = Path(serves_dir)
        self.publish = publish
        self.interrupt = interrupt
        self.timing = timing or Timing.default()
        self.account_key = config.runpod.api_key.resolve() if config.runpod.api_key is not None else ""

    @classmethod
    def bare(cls, client, config, serves_dir: Path, **kw: Any) -> "Context":
        """A context that only deletes (a serve whose provider is no longer served)."""
        return cls(client, config, None, serves_dir, **kw)

    def stopped(self) -> bool:
        """Whether the command was stopped (`interrupt`: a front.interrupt.Interrupt, or an Event)."""
        i = self.interrupt
        if i is None:
            return False
        caught = getattr(i, "caught", None)
        return bool(caught()) if caught is not None else i.is_set()

    def event(self, key: str, phase: str, pod_id: str | None = None, message: str | None = None) -> None:
        if self.publish is not None:
            self.publish(PodStatus(key, phase, pod_id, message=message))

    def label(self, key: str, provider: str) -> None:
        """The replica's log lines carry `serve <provider>` (front.events.RunWatched)."""
        if self.publish is not None:
            self.publish(RunWatched(key, f"serve {provider}"))

    def proxy(self, pod_id: str) -> str:
        return self.config.runpod.proxy.format(pod_id=pod_id, port=engines.PORT).rstrip("/")


class Held:
    """A serve a command holds: its replicas' addresses and key, the lease renewed on a thread of
    its own, replicas found lost reported to `on_lost` (and their pods deleted)."""

    def __init__(self, ctx: Context, record: ServeRecord, replicas: list[Replica], api_key: str):
        self.ctx = ctx
        self.record = record
        self.replicas = replicas
        self.api_key = api_key
        self.on_lost: Callable[[str], None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._seq = 0
        self._sessions = {r.key: http.session(r.base) for r in replicas}
        self.held_since = time.time()
        self.served = Usage()  # the tokens of the answers of this command (`count`)
        self.charge: Callable[[float], None] | None = None  # told the pod time as it passes (a spend cap)
        self.booted_at = self.held_since  # when this command began bringing it up (pods it took over: older)
        self._charged_until = self.held_since
        self.settled: str | None = None  # what they cost, once let go (`settle`)

    def count(self, usage: Usage) -> None:
        """An answer the serve gave: its tokens are counted on the serve (serve.json at release)."""
        with self._lock:
            self.served = self.served + usage

    @property
    def provider(self) -> str:
        return self.record.provider

    @property
    def per_replica(self) -> int:
        return self.ctx.serve.per_replica

    def endpoints(self) -> list[tuple[str, str]]:
        """(replica ID, its OpenAI API base URL) of the replicas not lost."""
        return [(r.key, r.api_base) for r in self.replicas if not r.lost]

    def rate(self) -> float:
        """USD per hour of the replicas not lost."""
        return sum(r.pod.cost_per_hour or 0.0 for r in self.replicas if not r.lost)

    def spend_between(self, start: float, end: float) -> float:
        """What the serve's pods cost between two Unix times (their rate × their overlap)."""
        total = 0.0
        for _, pod in self.record.pods():
            if pod is None or pod.cost_per_hour is None or pod.created_unix is None:
                continue
            gone = unix_of(pod.deleted_at) if pod.state == PodState.DELETED else None
            a, b = max(start, pod.created_unix), min(end, gone if gone is not None else end)
            if b > a:
                total += pod.cost_per_hour * (b - a) / 3600.0
        return total

    # --- the lease -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._keep, name=f"overbrainer-serve-{self.provider}", daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        every = lease_seconds() / RENEW_SHARE
        while not self._stop.wait(every):
            self.renew()
            self.charge_time()

    def charge_time(self) -> None:
        """Tell `charge` what the pods cost since it was last told (a command's spend cap counts
        their time)."""
        if self.charge is None:
            return
        with self._lock:
            start, now = self._charged_until, time.time()
            self._charged_until = now
        spent = self.spend_between(start, now)
        if spent > 0:
            self.charge(spent)

    def renew(self, seconds: int | None = None, kind: str = "held") -> None:
        """Write the lease on every replica (`seconds`: its length, None = `LEASE`; `kind`
        `held` or `idle`); a replica whose lease cannot be written and whose engine does not
        answer LOST_AFTER times in a row is looked up, and lost when gone."""
        with self._lock:
            self._seq += 1
            line = f"{self._seq} {lease_seconds() if seconds is None else seconds} {kind}\n"
            for r in self.replicas:
                if r.lost or r.executor is None:
                    continue
                ok = _write(r, LEASE_FILE, line) and (kind != "held" or self._healthy(r))
                r.strikes = 0 if ok else r.strikes + 1
                if r.strikes >= LOST_AFTER and not self._stop.is_set():
                    self._check_lost(r)

    def _healthy(self, r: Replica) -> bool:
        try:
            answer = http.exchange(self._sessions[r.key], "GET", r.base + "/health",
                                   timeout=(10.0, HEALTH_TIMEOUT), cap=65536,
                                   headers={"Authorization": f"Bearer {self.api_key}"})
        except (http.Unanswered, http.TooLarge):
            return False
        return answer.status == 200

    def _check_lost(self, r: Replica) -> None:
        ctx = self.ctx
        assert r.pod.pod_id is not None  # a replica has a pod
        try:
            remote = look_up(ctx.client, r.pod.pod_id, ctx.timing, wait=lambda s: self._stop.wait(s))
        except RunpodError as e:
            log.warning("serve %s: cannot look up replica %s (pod %s): %s", self.provider, r.key, r.pod.pod_id, e)
            return
        if remote is not None and not remote.dead and _engine_alive(r):
            return
        self.lose(r, gone=remote is None)

    def lose(self, r: Replica, gone: bool = False) -> None:
        """Replica `r` no longer serves: its requests go to the others, its pod is deleted."""
        if r.lost:
            return
        r.lost = True
        left = len([x for x in self.replicas if not x.lost])
        log.warning("serve %s: replica %s (pod %s) is lost; %d replica(s) left", self.provider, r.key,
                    r.pod.pod_id, left)
        if self.on_lost is not None:
            self.on_lost(r.key)
        self.ctx.event(r.key, "deleting", r.pod.pod_id, LOST)
        _close(r)
        if gone:
            mark_gone(r.pod.reload(), path=r.pod.path)
        else:
            _end_replica(self.ctx, r, LOST)

    # --- letting go ----------------------------------------------------------------------------

    def stop_lease(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        for s in self._sessions.values():
            s.close()

    def settle(self) -> str | None:
        """This command's tokens and pod time onto serve.json; in words, `<tokens> output tokens
        for about $X of pod time: $Y per million output tokens` (None without output tokens)."""
        record = self.record
        now = time.time()
        spent = self.spend_between(self.held_since, now)
        with self._lock:
            served, self.served = self.served, Usage()
            self.held_since = now
        record.input_tokens += served.input_tokens
        record.output_tokens += served.output_tokens
        record.serving_usd = round(record.serving_usd + spent, 6)
        record.save()
        out = served.output_tokens
        if not out:
            return None
        return (f"{out} output tokens for {fmt.about_usd(spent)} of pod time: "
                f"${round(spent, 6) / out * 1e6:,.2f} per million output tokens")

    def release(self, *, end: bool | None = None) -> str:
        """Let the serve go at the end of a command: delete its pods (`end`, or a serve made for
        the command without keep_warm), else leave them warm (`<keep_warm> idle`) or, brought up
        by hand without keep_warm, until `serve down`. Returns what was done, in words."""
        self.stop_lease()
        self.charge_time()
        self.settled = self.settle()
        record = self.record
        keep_warm = self.ctx.serve.keep_warm_minutes
        if end is None:
            end = not keep_warm and not record.by_hand
        if not end:
            seconds = int(keep_warm * 60) if keep_warm else None
            with self._lock:
                self._seq += 1
                line = f"{self._seq}-idle {seconds if seconds is not None else 'none'} idle\n"
                for r in self.replicas:
                    if not r.lost and r.executor is not None:
                        _write(r, LEASE_FILE, line)
                    _close(r)
            record.state = IDLE
            record.save()
            return (f"kept warm for {keep_warm:g} min" if keep_warm
                    else "kept until `overbrainer serve down`, max_hours or max_cost_usd")
        return end_serve(self.ctx, record, self.replicas, ENDED)


def _write(r: Replica, name: str, text: str) -> bool:
    try:
        r.executor.put_file(f"{WORKDIR}/{r.key}/{name}", text)
        return True
    except (OverbrainerError, OSError) as e:
        log.debug("replica %s: cannot write %s: %s", r.key, name, e)
        return False


def _engine_alive(r: Replica) -> bool:
    """False once the engine's exit code is on the pod (best effort: unknown reads as alive)."""
    if r.executor is None:
        return True
    try:
        return not r.executor.read_from(f"{WORKDIR}/{r.key}/{ENGINE_EXIT}", 0, 64).strip()
    except (OverbrainerError, OSError):
        return True


def _close(r: Replica) -> None:
    if r.executor is not None:
        try:
            r.executor.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        r.executor = None


def _copy_logs(r: Replica) -> None:
    if r.executor is None:
        return
    try:
        r.executor.download(f"{WORKDIR}/{r.key}", str(r.dir), POD_LOGS)
    except OverbrainerError as e:
        log.debug("cannot copy the logs of replica %s: %s", r.key, e)


def _end_replica(ctx: Context, r: Replica, reason: str) -> bool:
    """Mark the replica released on its pod (its watchdog then deletes it even if we cannot),
    delete and confirm its pod, forget its keys; True when no pod of it may be left."""
    pod = r.pod.reload() if r.pod.path is not None else r.pod
    r.pod = pod
    if not pod.live:
        forget_run(ctx.client, r.dir / SSH_DIR, r.key)
        return True
    if r.executor is not None:
        _write(r, RELEASED, "released\n")
        _copy_logs(r)
        _close(r)
    try:
        remove(ctx.client, pod, pod.path, reason, "client", ctx.timing, publish=ctx.publish)
    except NotDeleted as e:
        log.warning("%s", e)
        return False
    forget_run(ctx.client, r.dir / SSH_DIR, r.key)
    return True


def end_serve(ctx: Context, record: ServeRecord, replicas: list[Replica], reason: str) -> str:
    """Delete every pod of the serve (confirmed) and, once none is left, its Runpod secrets."""
    known = {r.key: r for r in replicas}
    left = []
    spent = 0.0
    for key, pod in record.pods():
        ctx.label(key, record.provider)
        r = known.get(key)
        if r is None:
            if pod is None:
                continue
            r = Replica(key, record.replica_dir(key), pod, RunKeys.load(record.replica_dir(key) / SSH_DIR, key), "")
        if not _end_replica(ctx, r, reason):
            left.append(key)
        spent += r.pod.estimated_spend or 0.0
    record = _reloaded(record)
    if left:
        record.message = f"pods of {', '.join(left)} could not be confirmed deleted"
        record.save()
        raise ServeError(f"serve {record.id} of provider {record.provider}: {record.message}; run "
                         f"`overbrainer serve down {record.provider}` again")
    _forget_secrets(ctx.client, record)
    record.state = DOWN
    record.ended_at = now_text()
    record.save()
    return f"deleted, {fmt.about_usd(spent)}"


def _reloaded(record: ServeRecord) -> ServeRecord:
    try:
        fresh = ServeRecord.load(record.path) if record.path is not None else record
    except OverbrainerError:
        return record
    fresh.input_tokens = max(fresh.input_tokens, record.input_tokens)
    fresh.output_tokens = max(fresh.output_tokens, record.output_tokens)
    return fresh


def _forget_secrets(client, record: ServeRecord) -> None:
    for name in list(record.secrets):
        try:
            for found in client.secrets(name):
                client.delete_secret(found.id)
            record.secrets.remove(name)
        except RunpodError as e:
            log.warning("cannot delete the Runpod account secret %s of serve %s (%s): `overbrainer serve down` "
                        "retries", name, record.id, e)


def _store_secret(client, name: str, value: str, description: str) -> None:
    register(value)
    try:
        client.create_secret(name, value, description)
    except SecretExists:
        found = client.secrets(name)
        if not found:
            raise ServeError(f"Runpod says the secret {name} exists, but does not list it") from None
        client.patch_secret(found[0].id, value)


# --- bringing a serve up ------------------------------------------------------------------------------


def _new_record(ctx: Context, by_hand: bool) -> ServeRecord:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    base = f"serve_{ctx.provider.name}_{stamp}"
    serve_id = base
    n = 2
    while (ctx.serves_dir / serve_id).exists():
        serve_id, n = f"{base}_{n}", n + 1
    s, t = ctx.serve, ctx.target
    record = ServeRecord(id=serve_id, provider=ctx.provider.name, model=s.model, engine=s.engine, image=s.image,
                         target=t.name, replicas=s.replicas, gpu_count=t.gpu_count, settings=settings_digest(s, t),
                         nonce=_random.token_hex(16), created=now_text(), by_hand=by_hand,
                         keep_warm_minutes=s.keep_warm_minutes)
    (ctx.serves_dir / serve_id).mkdir(parents=True, exist_ok=False)
    record.save(ctx.serves_dir / serve_id / SERVE_JSON)
    return record


def _engine_env(ctx: Context, record: ServeRecord) -> dict[str, str]:
    cmd = engines.command(ctx.serve, ctx.target.gpu_count)
    env = {"OVERBRAINER_ENGINE_ARGV": cmd.shell(), "OVERBRAINER_ENGINE_KEY_VAR": cmd.key_var,
           "OVERBRAINER_ENGINE_KEY": secret_reference(key_secret_name(record.id)),
           "OVERBRAINER_LEASE_SECONDS": str(lease_seconds()), "OVERBRAINER_INSTALL_SSHD": "1"}
    if hf_secret_name(record.id) in record.secrets:
        env["OVERBRAINER_ENGINE_HF_TOKEN"] = secret_reference(hf_secret_name(record.id))
    return env


def _secrets(ctx: Context, record: ServeRecord, api_key: str) -> None:
    """The serve's Runpod account secrets: the engine's key, and the Hub token when one is set
    (recorded by name before each is made, forgotten with the serve's last pod)."""
    wanted = [(key_secret_name(record.id), api_key, "engine key")]
    hf = ctx.config.hf_token
    if hf is not None:
        token = hf.resolve()
        register(token)
        wanted.append((hf_secret_name(record.id), token, "Hub token"))
    for name, value, what in wanted:
        if name not in record.secrets:
            record.secrets.append(name)
            record.save()
        try:
            _store_secret(ctx.client, name, value, f"{what} of overbrainer serve {record.id}")
        except RunpodError as e:
            raise ServeError(f"serve {record.id}: cannot store its {what} as a Runpod secret ({e}); no pod was "
                             "created") from None


class _Flag:
    """What start_pod and the readiness wait look at: the command's Interrupt."""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    def is_set(self) -> bool:
        return self.ctx.stopped()


def _replica(ctx: Context, record: ServeRecord, key: str, api_key: str, flag) -> Replica:
    """One replica from create to an engine that answers (see the module docstring); on failure
    its pod is deleted (start_pod's own rules, then ours) and the error raised."""
    rdir = record.replica_dir(key)
    rdir.mkdir(parents=True, exist_ok=True)
    ctx.label(key, record.provider)
    place = PodPlace(key, rdir, WORKDIR, ctx.client.base_url, keep=False, ports=(SSH_PORT, HTTP_PORT),
                     own_entrypoint=True)
    target = replace(ctx.target, image=ctx.serve.image)
    made = start_pod(ctx.client, target, place, flag=flag, timing=ctx.timing, publish=ctx.publish,
                     extra_env=_engine_env(ctx, record))
    assert made.record.pod_id is not None  # start_pod returns a ready pod
    r = Replica(key, rdir, made.record, made.keys, ctx.proxy(made.record.pod_id), made.executor)
    try:
        _arm(ctx, r)
        _write(r, LEASE_FILE, f"0 {lease_seconds()} held\n")
        wait_ready(ctx, r, api_key, flag)
        r.pod.transition(PodState.RUNNING)
        r.pod.save()
        ctx.event(key, "ready", r.pod.pod_id, f"engine ready at {r.base}")
        return r
    except BaseException as e:
        _copy_logs(r)
        reason = INTERRUPTED if flag_set(flag) else NOT_READY
        try:
            _end_replica(ctx, r, reason)
        except Exception as cleanup:  # noqa: BLE001 - the first error wins; this one is logged
            log.warning("%s", cleanup)
        if isinstance(e, OverbrainerError) and not isinstance(e, Interrupted):
            raise ServeError(f"replica {key}: {e}") from e
        raise


def _arm(ctx: Context, r: Replica) -> None:
    """The target's max_cost_usd on the pod (seconds left, counted by its watchdog)."""
    pod = r.pod
    cap = cost.arm_cost_cap(pod.max_cost_usd, pod.cost_per_hour, pod.created_unix or 0, False)
    if cap is None:
        return
    for name, text in cap.files(time.time()).items():
        r.executor.put_file(f"{WORKDIR}/{r.key}/{name}", text)
    warning = cost.cap_warning(pod.max_cost_usd, pod.cost_per_hour)
    if warning:
        log.warning("%s", warning)


class EngineExited(NotReady):
    pass


def wait_ready(ctx: Context, r: Replica, api_key: str, flag) -> None:
    """Until the engine answers /health and lists the model on /v1/models (≤ boot_grace_minutes);
    raises EngineExited (its exit code is on the pod), NotReady (not in time) or Interrupted."""
    deadline = time.monotonic() + ctx.target.boot_grace_minutes * 60.0
    s = http.session(r.base, headers={"Authorization": f"Bearer {api_key}"})
    last = "no answer yet"
    try:
        while True:
            if flag_set(flag):
                raise Interrupted("interrupted while the engine loaded")
            last = _ready(s, r.base, ctx.serve.model) or ""
            if not last:
                return
            code = _exit_code(r)
            if code is not None:
                raise EngineExited(f"the engine exited ({code}) before it was ready; its log is "
                                   f"{r.dir / '.pod' / 'engine.log'}")
            if time.monotonic() >= deadline:
                raise NotReady(f"the engine was not ready within boot_grace_minutes = "
                               f"{ctx.target.boot_grace_minutes} ({last})")
            if pause(READY_POLL, flag):
                raise Interrupted("interrupted while the engine loaded")
    finally:
        s.close()


def _ready(s, base: str, model: str) -> str | None:
    """None when the engine is ready, else why not."""
    try:
        health = http.exchange(s, "GET", base + "/health", timeout=(10.0, HEALTH_TIMEOUT), cap=65536)
        if health.status != 200:
            return f"GET /health answered {health.status}"
        models = http.exchange(s, "GET", base + "/v1/models", timeout=(10.0, HEALTH_TIMEOUT), cap=4 << 20)
    except http.Unanswered as e:
        return f"no answer ({e})"
    except http.TooLarge:
        return "an answer too large"
    if models.status != 200:
        return f"GET /v1/models answered {models.status}"
    try:
        ids = [m.get("id") for m in json.loads(models.body).get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return "GET /v1/models answered no model list"
    return None if model in ids else f"the engine lists {', '.join(map(str, ids)) or 'no model'}, not {model}"


def _exit_code(r: Replica) -> str | None:
    if r.executor is None:
        return None
    try:
        text = r.executor.read_from(f"{WORKDIR}/{r.key}/{ENGINE_EXIT}", 0, 64).decode("utf-8", "replace").strip()
    except OverbrainerError:
        return None
    return text or None


def bring_up(ctx: Context, *, by_hand: bool = False) -> Held:
    """The provider's serve, held: a live one of the same settings taken over (its lost replicas
    replaced), else a new one. Runs shielded from Ctrl-C by the caller; the flag is the
    Interrupt: a stop deletes what was made and raises Interrupted."""
    api_key = ""
    found = _reusable(ctx)
    record = found[0] if found is not None else None
    replicas = found[1] if found is not None else []
    if record is None:
        record = _new_record(ctx, by_hand)
    elif by_hand and not record.by_hand:
        record.by_hand = True
    api_key = derive_key(ctx.account_key, record.id, record.nonce)
    register(api_key)
    started, started_unix = time.monotonic(), time.time()
    try:
        if not replicas:
            _secrets(ctx, record, api_key)
        missing = ctx.serve.replicas - len(replicas)
        if missing > 0:
            replicas += _create(ctx, record, api_key, missing)
    except BaseException as e:
        if not replicas or ctx.stopped() or isinstance(e, Interrupted):
            record.state = FAILED
            record.message = str(e) if isinstance(e, Exception) else type(e).__name__
            record.save()
            try:
                end_serve(ctx, record, replicas, INTERRUPTED if ctx.stopped() else NOT_READY)
            except ServeError as cleanup:
                log.warning("%s", cleanup)
            if ctx.stopped() and not isinstance(e, Interrupted):
                raise Interrupted(f"interrupted: serve {record.id} of provider {record.provider} was not brought up; "
                                  "its pods were deleted") from None
            raise
        log.warning("serve %s: %s; going on with %d replica(s)", record.id, e, len(replicas))
    record.state = UP
    record.ready_at = record.ready_at or now_text()
    if record.boot_secs is None:
        record.boot_secs = round(time.monotonic() - started, 3)
    record.message = None
    record.save()
    held = Held(ctx, record, replicas, api_key)
    held.booted_at = started_unix
    held.renew()
    held.start()
    return held


def _create(ctx: Context, record: ServeRecord, api_key: str, n: int) -> list[Replica]:
    """`n` new replicas, made at the same time; those that came up, or the first error when none
    did (the others' pods deleted). A stop ends them all."""
    keys = []
    last = max([int(k.rpartition("-r")[2]) for k in record.replica_keys] or [0])
    for i in range(n):
        keys.append(f"{record.id}-r{last + i + 1}")
    record.replica_keys += keys
    record.save()
    flag = _Flag(ctx)
    made: list[Replica] = []
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="overbrainer-replica") as pool:
        futures = [pool.submit(_replica, ctx, record, key, api_key, flag) for key in keys]
        for f in futures:
            try:
                made.append(f.result())
            except BaseException as e:  # noqa: BLE001 - collected, the first one raised
                errors.append(e)
    if ctx.stopped():
        for r in made:
            _end_replica(ctx, r, INTERRUPTED)
        raise Interrupted(f"interrupted: serve {record.id} of provider {record.provider} was not brought up; "
                          "its pods were deleted")
    if not made:
        raise errors[0]
    for error in errors:
        log.warning("serve %s: %s", record.id, error)
    return made


def _reusable(ctx: Context) -> tuple[ServeRecord, list[Replica]] | None:
    """The provider's live serve with the same settings and its replicas that still answer
    (reconnected, their lease renewed); a serve of other settings, or none of whose replicas
    answers, is ended first."""
    digest = settings_digest(ctx.serve, ctx.target)
    for record in reversed(all_serves(ctx.serves_dir)):
        if record.provider != ctx.provider.name or record.state in (DOWN,) or not record.live:
            continue
        if record.settings != digest or record.state == FAILED:
            log.warning("serve %s of provider %s was made with other settings: deleting its pods", record.id,
                        record.provider)
            end_serve(ctx, record, [], ENDED)
            continue
        api_key = derive_key(ctx.account_key, record.id, record.nonce)
        register(api_key)
        alive = []
        for key, pod in record.pods():
            if pod is None or not pod.live:
                continue
            r = _reconnect(ctx, record, key, pod, api_key)
            if r is not None:
                alive.append(r)
        if alive:
            log.info("serve %s of provider %s: using its %d replica(s) up since %s", record.id, record.provider,
                     len(alive), record.ready_at)
            return record, alive
        end_serve(ctx, record, [], ENDED)
    return None


def _reconnect(ctx: Context, record: ServeRecord, key: str, pod: PodRecord, api_key: str) -> Replica | None:
    """A replica of an earlier command, reached again when its pod is there and its engine answers;
    None (its pod recorded gone, or deleted) otherwise."""
    rdir = record.replica_dir(key)
    assert pod.pod_id is not None  # a live pod.json has a pod
    try:
        remote = look_up(ctx.client, pod.pod_id, ctx.timing)
    except RunpodError as e:
        log.warning("serve %s: cannot look up replica %s: %s", record.id, key, e)
        return None
    if remote is None:
        mark_gone(pod, path=pod.path)
        forget_run(ctx.client, rdir / SSH_DIR, key)
        return None
    keys = RunKeys.load(rdir / SSH_DIR, key)
    r = Replica(key, rdir, pod, keys, ctx.proxy(pod.pod_id))
    if remote.dead or remote.ssh is None or not keys.client_key.exists():
        _end_replica(ctx, r, ENDED)
        return None
    try:
        endpoint = PodEndpoint(remote.ssh.host, remote.ssh.port, remote.ssh.username)
        r.executor = executor_for(keys, endpoint, WORKDIR, pod_id=pod.pod_id)
    except (OverbrainerError, ValueError) as e:
        log.warning("serve %s: cannot reach replica %s: %s", record.id, key, e)
        _end_replica(ctx, r, ENDED)
        return None
    if not _write(r, LEASE_FILE, f"r{time.time():.0f} {lease_seconds()} held\n") or _exit_code(r) is not None:
        _end_replica(ctx, r, ENDED)
        return None
    s = http.session(r.base, headers={"Authorization": f"Bearer {api_key}"})
    try:
        why = _ready(s, r.base, record.model)
    finally:
        s.close()
    if why is not None:
        log.warning("serve %s: replica %s does not answer (%s): deleting it", record.id, key, why)
        _end_replica(ctx, r, ENDED)
        return None
    return r


# --- the commands' side -----------------------------------------------------------------------------


def down(ctx: Context, record: ServeRecord) -> str:
    """`serve down`: every pod of the serve deleted (confirmed), its secrets forgotten."""
    return end_serve(ctx, record, [], REQUESTED)

