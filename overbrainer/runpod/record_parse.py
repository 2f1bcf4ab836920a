"""Reading `pod.json`: every field checked, errors naming the file and a position or field (never
the content), unknown fields kept. See overbrainer.runpod.record for the record itself."""

from __future__ import annotations

import json
import math
from typing import Any

from overbrainer.runpod.record import (DELETED_BY, FILE, RESULTS, VERSION, Attempt, InvalidPodRecord,
                                       PodRecord, PodState, PodEndpoint, POD_ID, RUN_ID)

_KNOWN = ("version", "run_id", "state", "keep", "deadline", "deadline_unix", "attempts", "pod_id",
          "gpu_type", "gpu_count", "data_center_id", "cost_per_hour", "created_at", "created_unix",
          "ready_at", "ssh", "host_key", "deleted_at", "deleted_by", "estimated_spend", "stray_pods",
          "max_cost_usd", "network_volume_id", "max_volume_gb")


class _Fields:
    def __init__(self, data: dict[str, Any], where: str, prefix: str = ""):
        self.data, self.where, self.prefix = data, where, prefix

    def bad(self, name: str, why: str = "") -> InvalidPodRecord:
        return InvalidPodRecord(f"{self.where} is not a valid {FILE} (field {self.prefix}{name}{why})")

    def text(self, name: str, optional: bool = True) -> str | None:
        v = self.data.get(name)
        if v is None and optional:
            return None
        if not isinstance(v, str):
            raise self.bad(name)
        return v

    def number(self, name: str) -> float | None:
        v = self.data.get(name)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise self.bad(name)
        return v

    def integer(self, name: str, default: int | None = None) -> int | None:
        v = self.data.get(name, default)
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self.bad(name)
        return v

    def pod_id(self, name: str) -> str | None:
        v = self.text(name)
        if v is not None and not POD_ID.fullmatch(v):
            raise self.bad(name)
        return v


def _attempt(raw: Any, where: str, i: int) -> Attempt:
    f = _Fields(raw if isinstance(raw, dict) else {}, where, f"attempts[{i}].")
    if not isinstance(raw, dict):
        raise f.bad("", " is not an object")
    result = f.text("result", optional=False)
    if result not in RESULTS:
        raise f.bad("result", f": unknown result {_shown(result)}")
    return Attempt(name=f.text("name", optional=False), gpu_type=f.text("gpu_type", optional=False),
                   sent_at=f.text("sent_at", optional=False), deadline_unix=f.integer("deadline_unix"),
                   result=result, detail=f.text("detail"), pod_id=f.pod_id("pod_id"))


def _ssh(raw: Any, f: _Fields) -> PodEndpoint | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise f.bad("ssh")
    try:
        return PodEndpoint(host=raw.get("host"), port=raw.get("port"), user=raw.get("user", "root"))
    except ValueError:
        raise f.bad("ssh") from None


def _shown(value: Any) -> str:
    """A short, printable rendering of an enum-like value (never free text)."""
    text = "".join(c if c.isascii() and c.isprintable() else "?" for c in str(value))[:40]
    return f"`{text}`"


def from_dict(data: Any, where: str) -> PodRecord:
    if not isinstance(data, dict):
        raise InvalidPodRecord(f"{where} is not a valid {FILE} (not a JSON object)")
    f = _Fields(data, where)
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
    keep = data.get("keep", False)
    if not isinstance(keep, bool):
        raise f.bad("keep")
    attempts = data.get("attempts", [])
    if not isinstance(attempts, list):
        raise f.bad("attempts")
    strays = data.get("stray_pods", [])
    if not isinstance(strays, list):
        raise f.bad("stray_pods")
    stray_ids = []
    for i, s in enumerate(strays):  # pod ids (an object with an `id` is read too)
        s = s.get("pod_id", s.get("id")) if isinstance(s, dict) else s
        if not isinstance(s, str) or not POD_ID.fullmatch(s):
            raise f.bad(f"stray_pods[{i}]")
        stray_ids.append(s)
    deleted_by = f.text("deleted_by")
    if deleted_by is not None and deleted_by not in DELETED_BY:
        raise f.bad("deleted_by", f": unknown value {_shown(deleted_by)}")
    pod_id = f.pod_id("pod_id")
    if state is not PodState.CREATING and pod_id is None:
        raise f.bad("state", f": illegal state {state.value} without a pod_id")
    return PodRecord(
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


def parse(raw: bytes, where: str) -> PodRecord:
    """The record in `raw` (the bytes of the file `where`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidPodRecord(f"{where} is not a valid {FILE} (not UTF-8 at byte {e.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidPodRecord(f"{where} is not a valid {FILE} (line {e.lineno}, column {e.colno})") from None
    return from_dict(data, where)
