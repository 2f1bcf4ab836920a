"""The fields of `runs/<id>/pod.json` (version 1): the pod's states and their transitions, the create
attempts and their results, the SSH endpoint, and the checks of every field as it is read (errors
name the file and a position or a field, never the content; unknown fields are kept). The record
itself, its state machine and its saves are runpod/pod_record.py."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.runpod.objects import POD_ID  # the one pod id rule (letters, digits, _ and -)
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


def attempt_name(run_id: str, n: int) -> str:
    """The name of the n-th create call of a run (n from 1): it finds the pod of an unclear create."""
    return f"overbrainer-{run_id}-{n}"


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


@dataclass
class Attempt:
    """One create call: saved `sent` before its POST, then settled by the answer."""

    name: str
    gpu_type: str
    sent_at: str
    deadline_unix: int | None
    result: str = SENT
    detail: str | None = None
    pod_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "gpu_type": self.gpu_type, "sent_at": self.sent_at,
                                "deadline_unix": self.deadline_unix, "result": self.result}
        if self.detail is not None:
            data["detail"] = self.detail
        if self.pod_id is not None:
            data["pod_id"] = self.pod_id
        return data


_KNOWN = ("version", "run_id", "state", "keep", "deadline", "deadline_unix", "attempts", "pod_id",
          "gpu_type", "gpu_count", "data_center_id", "cost_per_hour", "created_at", "created_unix",
          "ready_at", "ssh", "host_key", "deleted_at", "deleted_by", "estimated_spend", "stray_pods",
          "max_cost_usd", "network_volume_id", "max_volume_gb")


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
                   result=result, detail=f.text("detail"), pod_id=_pod_id(f, "pod_id"))


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
    if state is not PodState.CREATING and pod_id is None:
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
        max_volume_gb=f.integer("max_volume_gb"),
        extra={k: v for k, v in data.items() if k not in _KNOWN},
    )

