"""`runs/<id>/pod.json` (version 1): what the run knows of its pods, so that no pod ever bills
unknown to the client.

What a run rents is one pod, or one Instant Cluster (`nodes` >= 2: several pods created, shown
and deleted as one, `cluster_id`); a cluster's record is the same, its members (`members`: pod,
rank, overlay address, SSH endpoint; rank 0 the primary, whose ID is `pod_id`) added once they are
all up, and every rate and spend the cluster's, summed over its members.

The record is written before any API call, every create attempt is saved (result `sent`) before
its `POST /pods`, and every answer, delete and confirmation is saved as it happens. It never holds
a private key, the API key or the pod's env. Field names are those of the original tool, so its
projects open unchanged; fields this version does not know are kept on rewrite.

States (snake_case):

    creating ─created / adopted─▶ provisioning ─SSH + verdict─▶ ready ─job spawned─▶ running
    running ─job ended─▶ deleting (retrieved) | kept (--keep-pod) | awaiting_retrieval
    any state with a pod ─delete─▶ deleting ─confirmed gone─▶ deleted
    deleting ─forget_pod (next GPU type)─▶ creating
    any state with a pod ─found gone (3 × 404 and not listed)─▶ deleted

`deleting` stays on disk while a delete cannot be confirmed (the pod is still tracked).

Every field is checked as it is read (`read_fields`): errors name the file and a position or a
field, never the content; unknown fields are kept (`extra`). Create attempts and their results,
and the SSH endpoint (`PodEndpoint`, checked so that it is safe in an ssh config), are typed here
too.
"""

from __future__ import annotations

import enum
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.runpod import cost
from overbrainer.runpod.objects import POD_ID  # the one pod id rule (letters, digits, _ and -)
from overbrainer.support import fmt
from overbrainer.support.fmt import stamp as rfc3339  # pod.json's moments
from overbrainer.support.record_file import Fields, RecordFile

VERSION = 1
FILE = "pod.json"


class InvalidPodRecord(OverbrainerError):
    """pod.json cannot be read: bad JSON, unknown version, a field of the wrong shape."""


POD_JSON = RecordFile(FILE, InvalidPodRecord)


class IllegalTransition(OverbrainerError):
    """A state change the machine forbids (a bug in the caller, or a record edited meanwhile)."""


class PodState(str, enum.Enum):
    CREATING = "creating"
    PROVISIONING = "provisioning"
    READY = "ready"
    RUNNING = "running"
    DELETING = "deleting"
    DELETED = "deleted"
    KEPT = "kept"
    AWAITING_RETRIEVAL = "awaiting_retrieval"


S = PodState
# Where each state may go next (staying put is always allowed). A pod found gone goes to
# `deleted` from any state holding a pod: that is `mark_deleted`, allowed from all of them.
TRANSITIONS: dict[PodState, frozenset[PodState]] = {
    S.CREATING: frozenset({S.PROVISIONING, S.DELETING}),
    S.PROVISIONING: frozenset({S.READY, S.DELETING, S.DELETED}),
    S.READY: frozenset({S.RUNNING, S.DELETING, S.DELETED}),
    S.RUNNING: frozenset({S.DELETING, S.DELETED, S.KEPT, S.AWAITING_RETRIEVAL}),
    S.KEPT: frozenset({S.DELETING, S.DELETED}),
    S.AWAITING_RETRIEVAL: frozenset({S.DELETING, S.DELETED, S.KEPT}),
    S.DELETING: frozenset({S.DELETED, S.CREATING}),
    S.DELETED: frozenset({S.CREATING}),
}
LIVE = frozenset({S.PROVISIONING, S.READY, S.RUNNING, S.KEPT, S.AWAITING_RETRIEVAL, S.DELETING})

# Attempt results. `sent` is saved before the POST; the answer settles it.
SENT, CREATED, UNAVAILABLE, FORBIDDEN, AMBIGUOUS, ADOPTED, NOT_READY, REFUSED, REJECTED = (
    "sent", "created", "unavailable", "forbidden", "ambiguous", "adopted", "not_ready", "refused",
    "rejected")
RESULTS = (SENT, CREATED, UNAVAILABLE, FORBIDDEN, AMBIGUOUS, ADOPTED, NOT_READY, REFUSED, REJECTED)
RESULT_NEXT = {
    SENT: {CREATED, UNAVAILABLE, FORBIDDEN, AMBIGUOUS, REJECTED},
    AMBIGUOUS: {ADOPTED},
    CREATED: {NOT_READY, REFUSED},
    ADOPTED: {NOT_READY, REFUSED},
}

# Who deleted the pod: the client, the watchdog (found gone after a limit passed, or GET and
# DELETE both said unknown), `pod rm`, or nobody knows.
DELETED_BY = ("client", "watchdog", "pod_rm", "unknown")

_HOST = re.compile(r"[A-Za-z0-9.:-]+")
_USER = re.compile(r"[A-Za-z0-9._-]+")
RUN_ID = re.compile(r"[A-Za-z0-9_-]+")


NAME_PREFIX = "overbrainer-"


def attempt_name(run_id: str, n: int) -> str:
    """The name of the n-th create call of a run (n from 1): it finds the pod (or cluster) of an
    unclear create."""
    return f"{NAME_PREFIX}{run_id}-{n}"


def run_of_name(name: str | None) -> str | None:
    """The run (or side job) ID in an `overbrainer-<run>-<n>` name (a cluster's only marker: a
    cluster has no env of its own), or None."""
    if not name or not name.startswith(NAME_PREFIX):
        return None
    rest = name[len(NAME_PREFIX):]
    head, _, tail = rest.rpartition("-")
    return head if head and tail.isdigit() else rest


@dataclass(frozen=True)
class PodEndpoint:
    """Where the pod's sshd answers (Runpod's `ssh.direct`), checked so it is safe in an ssh
    config file: host `[A-Za-z0-9.:-]+`, user `[A-Za-z0-9._-]+`, port 1–65535."""

    host: str
    port: int
    user: str = "root"

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not _HOST.fullmatch(self.host):
            raise ValueError("invalid SSH host")
        if not isinstance(self.user, str) or not _USER.fullmatch(self.user):
            raise ValueError("invalid SSH user")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise ValueError("invalid SSH port")

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.user}


@dataclass(frozen=True)
class Member:
    """A cluster's member pod: its node rank (0: the primary), its address on the cluster's
    overlay network, its published SSH endpoint."""

    pod_id: str
    rank: int
    ip: str
    ssh: PodEndpoint

    def to_dict(self) -> dict[str, Any]:
        return {"pod_id": self.pod_id, "rank": self.rank, "ip": self.ip, "ssh": self.ssh.to_dict()}


@dataclass
class Attempt:
    """One create call: saved `sent` before its POST, then settled by the answer."""

    name: str
    gpu_type: str
    sent_at: str
    deadline_unix: int | None
    result: str = SENT
    detail: str | None = None
    pod_id: str | None = None  # the pod it made, or the cluster (`cluster_id` then)
    cluster_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "gpu_type": self.gpu_type, "sent_at": self.sent_at,
                                "deadline_unix": self.deadline_unix, "result": self.result}
        if self.detail is not None:
            data["detail"] = self.detail
        if self.pod_id is not None:
            data["pod_id"] = self.pod_id
        if self.cluster_id is not None:
            data["cluster_id"] = self.cluster_id
        return data


_KNOWN = ("version", "run_id", "state", "keep", "deadline", "deadline_unix", "attempts", "pod_id",
          "gpu_type", "gpu_count", "data_center_id", "cost_per_hour", "created_at", "created_unix",
          "ready_at", "ssh", "host_key", "deleted_at", "deleted_by", "estimated_spend", "stray_pods",
          "max_cost_usd", "network_volume_id", "max_volume_gb", "cluster_id", "nodes", "members")


def _pod_id(f: Fields, name: str) -> str | None:
    v = f.text(name)
    if v is not None and not POD_ID.fullmatch(v):
        raise f.bad(name)
    return v


def _attempt(raw: Any, where: str, i: int) -> Attempt:
    f = POD_JSON.fields(raw if isinstance(raw, dict) else {}, where, f"attempts[{i}].")
    if not isinstance(raw, dict):
        raise f.bad("", " is not an object")
    result = f.text("result", optional=False)
    if result not in RESULTS:
        raise f.bad("result", f": unknown result {_shown(result)}")
    return Attempt(name=f.text("name", optional=False), gpu_type=f.text("gpu_type", optional=False),
                   sent_at=f.text("sent_at", optional=False), deadline_unix=f.integer("deadline_unix"),
                   result=result, detail=f.text("detail"), pod_id=_pod_id(f, "pod_id"),
                   cluster_id=_pod_id(f, "cluster_id"))


def _nodes(f: Fields) -> int:
    nodes = f.integer("nodes", 1)
    if nodes is None or nodes < 1:
        raise f.bad("nodes")
    return nodes


def _members(f: Fields, raw: Any) -> list[Member]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise f.bad("members")
    out = []
    for i, item in enumerate(raw):
        m = item if isinstance(item, dict) else {}
        pod_id, rank, ip = m.get("pod_id"), m.get("rank"), m.get("ip")
        if (not isinstance(pod_id, str) or not POD_ID.fullmatch(pod_id) or isinstance(rank, bool)
                or not isinstance(rank, int) or rank < 0 or not isinstance(ip, str) or not _HOST.fullmatch(ip)):
            raise f.bad(f"members[{i}]")
        ssh = _ssh(m.get("ssh"), f)
        if ssh is None:
            raise f.bad(f"members[{i}]")
        out.append(Member(pod_id, rank, ip, ssh))
    return out


def _ssh(raw: Any, f: Fields) -> PodEndpoint | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise f.bad("ssh")
    try:
        return PodEndpoint(host=raw.get("host", ""), port=raw.get("port", 0), user=raw.get("user", "root"))
    except ValueError:
        raise f.bad("ssh") from None


def _shown(value: Any) -> str:
    """A short, printable rendering of an enum-like value (never free text)."""
    text = "".join(c if c.isascii() and c.isprintable() else "?" for c in str(value))[:40]
    return f"`{text}`"


def read_fields(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The keyword arguments of a PodRecord from the JSON object of `where` (every field checked,
    the unknown ones kept in `extra`)."""
    f = POD_JSON.fields(data, where)
    version = data.get("version")
    if version != VERSION:
        if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
            raise InvalidPodRecord(f"{where} has version {version}, written by a newer overbrainer: "
                                   f"this one reads version {VERSION}")
        raise f.bad("version", f": expected {VERSION}")
    run_id = f.text("run_id", optional=False)
    if not RUN_ID.fullmatch(run_id):
        raise f.bad("run_id")
    try:
        state = PodState(data.get("state"))
    except ValueError:
        raise f.bad("state", f": illegal state {_shown(data.get('state'))}") from None
    keep = f.flag("keep")
    attempts = f.items("attempts")
    strays = f.items("stray_pods")
    stray_ids = []
    for i, s in enumerate(strays):  # pod ids (an object with an `id` is read too)
        s = s.get("pod_id", s.get("id")) if isinstance(s, dict) else s
        if not isinstance(s, str) or not POD_ID.fullmatch(s):
            raise f.bad(f"stray_pods[{i}]")
        stray_ids.append(s)
    deleted_by = f.text("deleted_by")
    if deleted_by is not None and deleted_by not in DELETED_BY:
        raise f.bad("deleted_by", f": unknown value {_shown(deleted_by)}")
    pod_id = _pod_id(f, "pod_id")
    cluster_id = _pod_id(f, "cluster_id")
    if state is not PodState.CREATING and pod_id is None and cluster_id is None:
        raise f.bad("state", f": illegal state {state.value} without a pod_id")
    return dict(
        run_id=run_id, state=state, keep=keep, deadline=f.text("deadline"),
        deadline_unix=f.integer("deadline_unix"),
        attempts=[_attempt(a, where, i) for i, a in enumerate(attempts)],
        pod_id=pod_id, gpu_type=f.text("gpu_type"), gpu_count=f.integer("gpu_count", 1) or 1,
        data_center_id=f.text("data_center_id"), cost_per_hour=f.number("cost_per_hour"),
        created_at=f.text("created_at"), created_unix=f.integer("created_unix"),
        ready_at=f.text("ready_at"), ssh=_ssh(data.get("ssh"), f), host_key=f.text("host_key"),
        deleted_at=f.text("deleted_at"), deleted_by=deleted_by,
        estimated_spend=f.number("estimated_spend"), stray_pods=stray_ids,
        max_cost_usd=f.number("max_cost_usd"), network_volume_id=f.text("network_volume_id"),
        max_volume_gb=f.integer("max_volume_gb"), cluster_id=cluster_id, nodes=_nodes(f),
        members=_members(f, data.get("members")),
        extra={k: v for k, v in data.items() if k not in _KNOWN},
    )


@dataclass
class PodRecord:
    run_id: str
    state: PodState = PodState.CREATING
    keep: bool = False
    deadline: str | None = None
    deadline_unix: int | None = None
    attempts: list[Attempt] = field(default_factory=list)
    pod_id: str | None = None
    gpu_type: str | None = None
    gpu_count: int = 1
    data_center_id: str | None = None
    cost_per_hour: float | None = None
    created_at: str | None = None
    created_unix: int | None = None
    ready_at: str | None = None
    ssh: PodEndpoint | None = None
    host_key: str | None = None
    deleted_at: str | None = None
    deleted_by: str | None = None
    estimated_spend: float | None = None
    stray_pods: list[str] = field(default_factory=list)
    max_cost_usd: float | None = None
    network_volume_id: str | None = None
    max_volume_gb: int | None = None
    cluster_id: str | None = None  # what the run rents is a cluster of `nodes` pods
    nodes: int = 1
    members: list[Member] = field(default_factory=list)  # a cluster's members once all are up, by rank
    extra: dict[str, Any] = field(default_factory=dict)  # unknown fields, kept on rewrite
    path: Path | None = field(default=None, compare=False)  # where it was loaded from / saved to

    # --- creation, loading, saving -------------------------------------------------------------

    @classmethod
    def for_target(cls, run_id: str, target: Any, *, keep: bool, host_key: str,
                   path: Path | None = None) -> "PodRecord":
        """The first record of a run on a RunpodTarget (the cost cap is not armed on kept pods)."""
        if not RUN_ID.fullmatch(run_id or ""):
            raise ValueError(f"{run_id!r} is not a valid run ID")
        return cls(run_id=run_id, keep=keep, gpu_count=target.gpu_count, nodes=getattr(target, "nodes", 1),
                   host_key=host_key,
                   max_cost_usd=None if keep else target.max_cost_usd,
                   network_volume_id=target.network_volume_id, max_volume_gb=target.max_volume_gb,
                   path=path)

    @staticmethod
    def path_in(run_dir: Path) -> Path:
        return Path(run_dir) / FILE

    @classmethod
    def load(cls, path: Path) -> "PodRecord":
        """The record in `path`. Errors name the file and a position or field, never content."""
        path = Path(path)
        record = cls(**read_fields(POD_JSON.read(path), str(path)))
        record.path = path
        return record

    @classmethod
    def load_if_any(cls, path: Path) -> "PodRecord | None":
        """The record in `path`, or None when the run never asked for a pod."""
        return cls.load(path) if Path(path).exists() else None

    def reload(self) -> "PodRecord":
        """The record as it is on disk now: another command (`pod rm`, `train attach`) may have
        edited it, so an editor re-reads before it edits."""
        if self.path is None:
            raise ValueError("PodRecord.reload needs a record that was loaded or saved")
        return PodRecord.load(self.path)

    def save(self, path: Path | None = None) -> None:
        """Pretty JSON, written atomically; the file's mode follows the umask (it holds no secret)."""
        path = Path(path) if path is not None else self.path
        if path is None:
            raise ValueError("PodRecord.save needs a path the first time")
        POD_JSON.write(path, self.to_dict())
        self.path = path

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": VERSION, "run_id": self.run_id, "state": self.state.value, "keep": self.keep,
            "deadline": self.deadline, "deadline_unix": self.deadline_unix,
            "attempts": [a.to_dict() for a in self.attempts],
            "pod_id": self.pod_id, "gpu_type": self.gpu_type, "gpu_count": self.gpu_count,
            "data_center_id": self.data_center_id, "cost_per_hour": self.cost_per_hour,
            "created_at": self.created_at, "created_unix": self.created_unix, "ready_at": self.ready_at,
            "ssh": self.ssh.to_dict() if self.ssh is not None else None, "host_key": self.host_key,
            "deleted_at": self.deleted_at, "deleted_by": self.deleted_by,
            "estimated_spend": self.estimated_spend, "stray_pods": list(self.stray_pods),
            "max_cost_usd": self.max_cost_usd, "network_volume_id": self.network_volume_id,
            "max_volume_gb": self.max_volume_gb,
        }
        if self.nodes > 1 or self.cluster_id is not None:
            data.update(cluster_id=self.cluster_id, nodes=self.nodes, members=[m.to_dict() for m in self.members])
        for k, v in self.extra.items():
            data.setdefault(k, v)
        return data

    # --- the state machine ---------------------------------------------------------------------

    def _where(self) -> str:
        return str(self.path) if self.path is not None else f"the pod record of run {self.run_id}"

    def transition(self, state: PodState | str) -> None:
        """Move to `state`, or IllegalTransition (naming the file) when the machine forbids it."""
        new = PodState(state)
        if new != self.state and new not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"{self._where()}: a pod record cannot go from "
                                    f"{self.state.value} to {new.value}")
        if new not in (S.CREATING,) and self.unit_id is None:
            raise IllegalTransition(f"{self._where()}: state {new.value} needs a pod, and none is recorded")
        self.state = new

    @property
    def is_cluster(self) -> bool:
        """The run rents a cluster (`nodes` >= 2), not one pod."""
        return self.cluster_id is not None or self.nodes > 1

    @property
    def unit_id(self) -> str | None:
        """What is deleted as one: the cluster, else the pod."""
        return self.cluster_id if self.is_cluster else self.pod_id

    @property
    def word(self) -> str:
        return "cluster" if self.is_cluster else "pod"

    @property
    def live(self) -> bool:
        """Whether a recorded pod (or cluster) may still exist (and bill)."""
        return self.unit_id is not None and self.state in LIVE

    @property
    def no_pod_left(self) -> bool:
        """No pod (or cluster) of the run may still exist: none recorded or it is confirmed
        deleted, no stray. Only then may the run's client key and host-key secret be forgotten."""
        return not self.stray_pods and (self.unit_id is None or self.state == S.DELETED)

    @property
    def primary(self) -> Member | None:
        """A cluster's rank-0 member (None before its members are known, or for a pod)."""
        return next((m for m in self.members if m.rank == 0), None)

    # --- attempts ------------------------------------------------------------------------------

    def begin_attempt(self, gpu_type: str, max_hours: float, *, now: float | None = None) -> Attempt:
        """Append the next create attempt (`sent`) and SAVE the record: call it right before the
        POST, so a pod Runpod creates is never unknown here. Nothing is appended if the save fails."""
        now = time.time() if now is None else now
        attempt = Attempt(name=attempt_name(self.run_id, len(self.attempts) + 1), gpu_type=gpu_type,
                          sent_at=rfc3339(now),
                          deadline_unix=None if self.keep else int(now + max_hours * 3600))
        self.attempts.append(attempt)
        try:
            self.save()
        except BaseException:
            self.attempts.pop()
            raise
        return attempt

    def settle(self, attempt: Attempt, result: str, *, detail: str | None = None,
               pod_id: str | None = None) -> None:
        """Record the answer to `attempt` (the caller saves)."""
        if result not in RESULT_NEXT.get(attempt.result, ()):
            raise IllegalTransition(f"{self._where()}: attempt {attempt.name} cannot go from "
                                    f"{attempt.result} to {result}")
        attempt.result = result
        if detail is not None:
            attempt.detail = detail
        if pod_id is not None:
            attempt.pod_id = pod_id

    # --- pod life ------------------------------------------------------------------------------

    def pod_created(self, attempt: Attempt, pod_id: str, *, gpu_type: str | None, gpu_count: int | None,
                    data_center_id: str | None, rate: float | None, adopted: bool = False,
                    now: float | None = None) -> None:
        """The pod (or, for a cluster record, the cluster) of `attempt` exists (answered 201, or
        found by its name): `provisioning`, with the attempt's deadline. `created_*` is the local
        clock now (the caller saves)."""
        if not POD_ID.fullmatch(pod_id or ""):
            raise ValueError("invalid pod id")
        if self.state != S.CREATING:
            raise IllegalTransition(f"{self._where()}: a {self.word} was created while the record is "
                                    f"{self.state.value}, not creating")
        now = time.time() if now is None else now
        if self.is_cluster:
            self.settle(attempt, ADOPTED if adopted else CREATED)
            attempt.cluster_id = self.cluster_id = pod_id
        else:
            self.settle(attempt, ADOPTED if adopted else CREATED, pod_id=pod_id)
            self.pod_id = pod_id
        self.transition(S.PROVISIONING)
        self.gpu_type = gpu_type or attempt.gpu_type
        self.gpu_count = gpu_count or self.gpu_count
        self.data_center_id = data_center_id
        self.cost_per_hour = None
        self.note_rate(rate)
        self.created_unix = int(now)
        self.created_at = rfc3339(now)
        self.deadline_unix = attempt.deadline_unix
        self.deadline = rfc3339(attempt.deadline_unix) if attempt.deadline_unix is not None else None

    def note_rate(self, rate: float | None) -> bool:
        """Keep the first non-zero rate Runpod reports; True when this one was kept."""
        if self.cost_per_hour is None and cost.usable_rate(rate) is not None:
            self.cost_per_hour = float(rate)  # type: ignore[arg-type]
            return True
        return False

    def mark_ready(self, endpoint: PodEndpoint, *, now: float | None = None,
                   members: list[Member] | None = None) -> None:
        """Ready: reached over SSH (a cluster: every member, `members`; `endpoint` the primary's)."""
        self.transition(S.READY)
        self.ssh = endpoint
        if members is not None:
            self.members = sorted(members, key=lambda m: m.rank)
            self.pod_id = self.members[0].pod_id if self.members else None
        self.ready_at = rfc3339(time.time() if now is None else now)

    def mark_deleted(self, by: str, *, now: float | None = None) -> None:
        """The pod is confirmed gone: when, by whom, and about what it cost (the caller saves)."""
        if by not in DELETED_BY:
            raise ValueError(f"unknown deleted_by {by!r}")
        now = time.time() if now is None else now
        self.transition(S.DELETED)
        self.deleted_at = rfc3339(now)
        self.deleted_by = by
        self.estimated_spend = cost.spend(self.cost_per_hour, self.created_unix, now)

    def forget_pod(self) -> None:
        """After a pod that never became ready was deleted: back to `creating` for the next type."""
        self.transition(S.CREATING)
        for name in ("pod_id", "gpu_type", "data_center_id", "cost_per_hour", "created_at", "created_unix",
                     "ready_at", "ssh", "deadline", "deadline_unix", "deleted_at", "deleted_by",
                     "estimated_spend", "cluster_id"):
            setattr(self, name, None)
        self.members = []

    def add_strays(self, pod_ids: list[str]) -> None:
        """Pods (of a cluster record: clusters) whose delete was never confirmed."""
        for pod_id in pod_ids:
            if pod_id != self.unit_id and pod_id not in self.stray_pods:
                self.stray_pods.append(pod_id)

    def drop_stray(self, pod_id: str) -> None:
        if pod_id in self.stray_pods:
            self.stray_pods.remove(pod_id)

    # --- cost and display ----------------------------------------------------------------------

    def spend_so_far(self, now: float | None = None) -> float | None:
        """The estimate once deleted; else rate × time since the create answer; None unknown."""
        if self.state == S.DELETED:
            return self.estimated_spend
        return cost.spend(self.cost_per_hour, self.created_unix, time.time() if now is None else now)

    def summary(self) -> str:
        """The pod column of `runs ls`: `pod running <id> $0.53/h`, `pod deleted about $0.64`,
        `pod kept <id>`, `pod awaiting retrieval <id>`, plus ` +N stray`."""
        words = self.state.value.replace("_", " ")
        what = f"cluster of {self.nodes}" if self.is_cluster else "pod"
        if self.state == S.DELETED:
            text = f"{what} deleted {fmt.about_usd(self.estimated_spend)}"
        elif self.unit_id is None:
            text = f"{what} creating"
        else:
            text = f"{what} {words} {self.unit_id}"
            if self.state in (S.RUNNING, S.READY, S.PROVISIONING) and self.cost_per_hour:
                text += f" {fmt.usd_per_hour(self.cost_per_hour)}"
        if self.stray_pods:
            text += f" +{len(self.stray_pods)} stray"
        return text
