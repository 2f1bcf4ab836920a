"""Typed results of the Runpod API, parsed tolerantly: unknown fields are ignored, nulls and wrong
types become None/defaults, strings lose control and escape characters, an unknown pod status
reads UNKNOWN. Only a pod id is strict (letters, digits, `_` and `-`, at most 128 characters):
it goes into URL paths, file names and commands."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from overbrainer.runpod.errors import InvalidAnswer
from overbrainer.support.redact import strip_controls

POD_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
STATUSES = ("PROVISIONING", "STARTING", "RUNNING", "EXITED", "ERROR", "TERMINATED")
DEAD = ("EXITED", "ERROR", "TERMINATED")
AVAILABILITY = ("NONE", "LOW", "MEDIUM", "HIGH")
RUN_MARKER = "OVERBRAINER_RUN_ID"
_TEXT_CAP = 200


def text(value: Any) -> str | None:
    """A cleaned one-line string, or None."""
    if not isinstance(value, str):
        return None
    return " ".join(strip_controls(value).split())[:_TEXT_CAP]


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def integer(value: Any) -> int | None:
    n = number(value)
    return int(n) if n is not None and n == int(n) else None


def obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def valid_pod_id(pod_id: Any) -> str:
    """`pod_id` when it is safe in a URL path and a file name, else InvalidAnswer saying why."""
    if isinstance(pod_id, str) and POD_ID.fullmatch(pod_id):
        return pod_id
    if not isinstance(pod_id, str) or not pod_id:
        raise InvalidAnswer("Runpod answered a pod without an id")
    shown = "".join(c if c.isalnum() or c in "_-./" else "?" for c in pod_id[:40])
    raise InvalidAnswer(f"Runpod answered a pod id overbrainer cannot use ({shown!r}): only letters, digits, "
                        "`_` and `-` are safe in a URL path and a file name")


@dataclass(frozen=True)
class SshDirect:
    host: str
    port: int
    username: str


@dataclass(frozen=True)
class Membership:
    """A cluster member's `cluster` object: its cluster, its node rank (None until assigned; 0 is
    the primary) and its address on the cluster's overlay network (None until assigned)."""

    cluster_id: str
    rank: int | None
    ip: str | None


@dataclass(frozen=True)
class Pod:
    id: str
    name: str | None
    status: str  # one of STATUSES, or UNKNOWN
    cost_per_hour: float  # USD billed now; 0 = no rate (EXITED, or not known yet)
    data_center_id: str | None
    gpu_id: str | None
    gpu_count: int | None
    ssh: SshDirect | None  # None until port 22 is published
    run_marker: str | None  # env.OVERBRAINER_RUN_ID (the rest of env is never read)
    created_at: str | None
    actions: tuple[str, ...]
    cluster: Membership | None = None  # a cluster member's membership (None for a standalone pod)

    @property
    def dead(self) -> bool:
        return self.status in DEAD

    @property
    def terminated(self) -> bool:
        """Runpod's word for a deleted pod: it counts as gone, never as alive."""
        return self.status == "TERMINATED"


def parse_pod(doc: Any) -> Pod:
    if not isinstance(doc, dict):
        raise InvalidAnswer("Runpod answered something other than a pod")
    status = text(doc.get("status")) or ""
    gpu = obj(doc.get("gpu"))
    direct = obj(obj(doc.get("ssh")).get("direct"))
    host, port, user = text(direct.get("host")), integer(direct.get("port")), text(direct.get("username"))
    ssh = SshDirect(host, port, user or "root") if host and port and 0 < port < 65536 else None
    marker = obj(doc.get("env")).get(RUN_MARKER)
    actions = doc.get("actions") if isinstance(doc.get("actions"), list) else []
    return Pod(
        id=valid_pod_id(doc.get("id")), name=text(doc.get("name")),
        status=status if status in STATUSES else "UNKNOWN",
        cost_per_hour=max(number(doc.get("cost")) or 0.0, 0.0), data_center_id=text(doc.get("dataCenterId")),
        gpu_id=text(gpu.get("id")), gpu_count=integer(gpu.get("count")), ssh=ssh,
        run_marker=marker if isinstance(marker, str) else None, created_at=text(doc.get("createdAt")),
        actions=tuple(a for a in (text(x) for x in actions) if a), cluster=_membership(doc.get("cluster")),
    )


_IP = re.compile(r"[0-9A-Fa-f.:]{2,45}")


def _membership(doc: Any) -> Membership | None:
    doc = obj(doc)
    cluster_id = doc.get("id")
    if not isinstance(cluster_id, str) or not POD_ID.fullmatch(cluster_id):
        return None
    rank = integer(doc.get("rank"))
    ip = doc.get("ip")
    return Membership(cluster_id, rank if rank is not None and rank >= 0 else None,
                      ip if isinstance(ip, str) and _IP.fullmatch(ip) else None)


@dataclass(frozen=True)
class Cluster:
    """A cluster of `GET /clusters/{id}` (its members are `GET /clusters/{id}/pods`): its shape
    and how many members it has by status. Runpod shows no status of its own for a cluster: a
    deleted one is a 404."""

    id: str
    name: str | None
    gpu_id: str | None
    gpu_count: int | None  # per pod
    pod_count: int | None
    data_center_id: str | None
    members: int  # member pods provisioned now
    by_status: tuple[tuple[str, int], ...]
    created_at: str | None

    @property
    def terminated(self) -> bool:
        """A cluster Runpod still shows exists (it has no TERMINATED status: gone is a 404)."""
        return False

    @property
    def status(self) -> str:
        """What `pod ls` shows: the members' status when they share one (`RUNNING`), else each of
        them (`RUNNING+EXITED`); PROVISIONING before any member is placed."""
        counts = dict(self.by_status)
        if not counts:
            return "PROVISIONING"
        return "+".join([s for s in STATUSES if s in counts] + sorted(s for s in counts if s not in STATUSES))


def parse_cluster(doc: Any) -> Cluster:
    if not isinstance(doc, dict):
        raise InvalidAnswer("Runpod answered something other than a cluster")
    compute, pods = obj(doc.get("compute")), obj(doc.get("pods"))
    by_status = tuple(sorted((s, n) for s, n in ((text(k), integer(v)) for k, v in obj(pods.get("byStatus")).items())
                             if s and n))
    return Cluster(
        id=valid_pod_id(doc.get("id")), name=text(doc.get("name")), gpu_id=text(compute.get("gpuTypeId")),
        gpu_count=integer(compute.get("gpuCountPerPod")), pod_count=integer(compute.get("podCount")),
        data_center_id=text(doc.get("dataCenterId")),
        members=max(integer(pods.get("total")) or 0, 0), by_status=by_status, created_at=text(doc.get("createdAt")),
    )


_STOCKED = ("LOW", "MEDIUM", "HIGH")


@dataclass(frozen=True)
class GpuType:
    """One GPU type of `GET /catalog/gpus` (read with availability for a given GPU count): the one
    type the API client returns and the GPU pick (runpod/catalog.py) ranks."""

    id: str
    name: str | None = None
    memory_gb: float | None = None
    secure: bool = False  # offered on Secure Cloud: only an explicit `"secure": true`
    price_per_hour: float | None = None  # Secure list USD/h of ONE GPU; None = no price (missing or <= 0)
    max_count: int = 0  # Secure per-pod ceiling (not stock); 0 = unknown
    availability: str = "NONE"  # NONE|LOW|MEDIUM|HIGH for the count asked (NONE when unknown)
    data_centers: tuple[tuple[str, str], ...] = ()  # (data center id, availability)

    @property
    def in_stock(self) -> bool:
        return self.availability in _STOCKED

    def stocked_in(self, data_center_ids) -> bool:
        wanted = set(data_center_ids)
        return any(dc in wanted and a in _STOCKED for dc, a in self.data_centers)

    def stock_dcs(self) -> list[str]:
        """The data centers where the type is in stock, in the catalog's order."""
        return [dc for dc, a in self.data_centers if a in _STOCKED]

    def stock_at(self, data_center: str) -> str:
        """The availability in `data_center` (NONE when the catalog does not list it there)."""
        return next((a for dc, a in self.data_centers if dc == data_center), "NONE")


def _availability(value: Any) -> str | None:
    value = text(value)
    return value if value in AVAILABILITY else None


def parse_gpu(doc: Any) -> GpuType | None:
    """A catalog GPU type, or None when the entry has no usable id. The schema's `secure` is a
    boolean and `price.secure` a number: a missing or non-true `secure` is not Secure Cloud, a
    missing, zero or negative price is no price (the pick leaves both out)."""
    doc = obj(doc)
    gpu_id = text(doc.get("id"))
    if not gpu_id:
        return None
    price = number(obj(doc.get("price")).get("secure"))
    dcs = []
    for entry in doc.get("dataCenters") or []:
        entry = obj(entry)
        dc = text(entry.get("id"))
        if dc:
            dcs.append((dc, _availability(entry.get("availability")) or "NONE"))
    return GpuType(
        id=gpu_id, name=text(doc.get("name")), memory_gb=number(doc.get("memory")), secure=doc.get("secure") is True,
        price_per_hour=price if price is not None and price > 0 else None,
        max_count=max(integer(obj(doc.get("maxCount")).get("secure")) or 0, 0),
        availability=_availability(doc.get("availability")) or "NONE", data_centers=tuple(dcs),
    )


@dataclass(frozen=True)
class DataCenter:
    id: str
    name: str | None
    region: str | None
    gpu_types_in_stock: tuple[str, ...]


def parse_datacenter(doc: Any) -> DataCenter | None:
    doc = obj(doc)
    dc = text(doc.get("id"))
    if not dc:
        return None
    stock = []
    for entry in doc.get("gpuAvailability") or []:
        entry = obj(entry)
        gpu = text(entry.get("id"))
        if gpu and _availability(entry.get("availability")) in ("LOW", "MEDIUM", "HIGH"):
            stock.append(gpu)
    return DataCenter(dc, text(doc.get("name")), text(doc.get("region")), tuple(stock))


@dataclass(frozen=True)
class Volume:
    id: str
    name: str | None
    size_gb: int | None
    data_center: str | None


def parse_volume(doc: Any) -> Volume | None:
    doc = obj(doc)
    vid = text(doc.get("id"))
    if not vid:
        return None
    return Volume(vid, text(doc.get("name")), integer(doc.get("size")), text(doc.get("dataCenter")))


@dataclass(frozen=True)
class Secret:
    """An account secret's metadata (Runpod never returns values)."""

    id: str
    name: str
    description: str | None


def parse_secret(doc: Any) -> Secret | None:
    doc = obj(doc)
    sid, name = doc.get("id"), doc.get("name")
    if not isinstance(sid, str) or not sid or not isinstance(name, str) or not name:
        return None
    return Secret(sid, name, text(doc.get("description")))
