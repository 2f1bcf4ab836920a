"""The Runpod REST API v2 client: one method per call the Runpod target makes, typed results
(overbrainer/runpod/objects.py), errors from overbrainer/runpod/errors.py, HTTP and retries from
overbrainer/runpod/transport.py. Thread-safe enough for one caller per thread (requests' Session).

Paths are relative to the base URL (default `https://api.runpod.io/v2`). A cluster (an Instant
Cluster: several pods made, shown and deleted as one) has calls of its own; its members are pods
that `GET /pods` leaves out and that answer 409 to their own DELETE. `GET /pods` has no
pagination in the published schema: one request (`includeClusterPods=false`) is the list; should
an answer ever carry `pagination` (`hasNextPage`/`nextCursor`), its pages are followed. A pod the
list shows `TERMINATED` is deleted: the list leaves it out.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar
from urllib.parse import quote

from overbrainer.runpod.catalog import MIN_CUDA
from overbrainer.runpod.errors import Ambiguous, InvalidAnswer, NoKey, NotFound, RunpodError
from overbrainer.runpod.objects import (
    Cluster,
    DataCenter,
    GpuType,
    Pod,
    Secret,
    Volume,
    parse_cluster,
    parse_datacenter,
    parse_gpu,
    parse_pod,
    parse_secret,
    parse_volume,
    valid_pod_id,
)
from overbrainer.runpod.transport import ATTEMPTS, Timeouts, Transport

T = TypeVar("T")
MAX_PAGES = 100


def _items(doc: Any, key: str, what: str) -> list:
    """`doc[key]` as a list (Runpod wraps every collection in an object)."""
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise InvalidAnswer(f"Runpod's answer to {what} has no `{key}` list")
    return doc[key]


def _parsed(items: Iterable, parse: Callable[[Any], T | None]) -> list[T]:
    return [x for x in (parse(i) for i in items) if x is not None]


class RunpodClient:
    """A client for one account key. `timeouts`, `attempts` and `sleep` exist for tests."""

    def __init__(self, base_url: str, api_key: str, *, timeouts: Timeouts | None = None, attempts: int = ATTEMPTS,
                 sleep: Callable[[float], None] | None = None):
        self._http = Transport(base_url, api_key, timeouts, attempts, sleep)

    @classmethod
    def from_config(cls, config, **kw) -> "RunpodClient":
        """The client of `config.runpod` (key resolved now: a literal or a `vault:` reference)."""
        if config.runpod.api_key is None:
            raise NoKey()
        return cls(config.runpod.url, config.runpod.api_key.resolve(), **kw)

    @property
    def base_url(self) -> str:
        return self._http.base

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "RunpodClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- pods ----------------------------------------------------------------------------------
    def create_pod(self, body: dict) -> Pod:
        """`POST /pods` (only 429 retried). Raises Ambiguous when the pod may exist regardless,
        NoCapacity, Forbidden, NoCredits, Rejected, …"""
        return self._create("/pods", body, parse_pod, "pod")

    def get_pod(self, pod_id: str) -> Pod:
        """`GET /pods/{id}`; NotFound on Runpod's 404 (unknown, or not visible to this key)."""
        path = f"/pods/{valid_pod_id(pod_id)}"
        return parse_pod(self._http.call("GET", path).json(f"GET {path}"))

    def list_pods(self) -> list[Pod]:
        """Every pod of the account (cluster members excluded), TERMINATED ones left out (deleted).
        One page; pages of an answer with `pagination` are followed, a repeated cursor or more
        than 100 pages being an error (a list that never ends)."""
        pods: list[Pod] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            params = {"includeClusterPods": "false", **({"cursor": cursor} if cursor else {})}
            doc = self._http.call("GET", "/pods", params=params).json("GET /pods")
            pods += [p for p in (parse_pod(d) for d in _items(doc, "pods", "GET /pods")) if not p.terminated]
            page = doc.get("pagination")
            if not isinstance(page, dict) or page.get("hasNextPage") is not True:
                return pods
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen:
                raise InvalidAnswer("Runpod's pod list repeated a page cursor (or gave none): the list cannot be read")
            seen.add(cursor)
        raise InvalidAnswer(f"Runpod's pod list has more than {MAX_PAGES} pages: the list cannot be read")

    def delete_pod(self, pod_id: str) -> bool:
        """`DELETE /pods/{id}`: True when deleted now, False when Runpod already did not know it
        (its 404, which counts as deleted; confirm with get_pod)."""
        return self._delete(f"/pods/{valid_pod_id(pod_id)}")

    # -- clusters ------------------------------------------------------------------------------
    def create_cluster(self, body: dict) -> Cluster:
        """`POST /clusters` (only 429 retried, like a pod's create). Raises Ambiguous when the
        cluster may exist regardless, NoCapacity (any 400), Forbidden, NoCredits, Rejected, …"""
        return self._create("/clusters", body, parse_cluster, "cluster")

    def get_cluster(self, cluster_id: str) -> Cluster:
        """`GET /clusters/{id}`; NotFound on Runpod's 404 (deleted, unknown, or not visible)."""
        path = f"/clusters/{valid_pod_id(cluster_id)}"
        return parse_cluster(self._http.call("GET", path).json(f"GET {path}"))

    def cluster_pods(self, cluster_id: str) -> list[Pod]:
        """`GET /clusters/{id}/pods`: the member pods, each with its `cluster` membership."""
        path = f"/clusters/{valid_pod_id(cluster_id)}/pods"
        doc = self._http.call("GET", path).json(f"GET {path}")
        return [p for p in (parse_pod(d) for d in _items(doc, "pods", f"GET {path}")) if not p.terminated]

    def list_clusters(self) -> list[Cluster]:
        """`GET /clusters`: every cluster of the account (the schema has no pagination)."""
        doc = self._http.call("GET", "/clusters").json("GET /clusters")
        return [parse_cluster(d) for d in _items(doc, "clusters", "GET /clusters")]

    def delete_cluster(self, cluster_id: str) -> bool:
        """`DELETE /clusters/{id}` (its member pods with it): True when deleted now, False on
        Runpod's 404 (it did not know it any more; confirm with get_cluster)."""
        return self._delete(f"/clusters/{valid_pod_id(cluster_id)}")

    # -- shared ----------------------------------------------------------------------------------
    def _create(self, path: str, body: dict, parse, word: str):
        """A billed create: sent once (only a 429 is retried, by the transport); an answer that
        cannot be read is Ambiguous (what it made may exist)."""
        answer = self._http.call("POST", path, body=body, create=True)
        try:
            return parse(answer.json("the create request"))
        except InvalidAnswer as e:
            raise Ambiguous(f"{e.message}: the {word} may exist", answer.status) from None

    def _delete(self, path: str) -> bool:
        """DELETE: True when deleted now, False on Runpod's 404."""
        try:
            self._http.call("DELETE", path)
        except NotFound:
            return False
        return True

    # -- catalog and volumes ---------------------------------------------------------------------
    def gpu_types(self, count: int = 1, *, cluster: bool = False) -> list[GpuType]:
        """Secure Cloud GPU types with their stock for `count` GPUs per pod (CUDA ≥ 13.0); with
        `cluster`, as a cluster's pods (`product=CLUSTER`)."""
        params = {"include": "AVAILABILITY", "product": "CLUSTER" if cluster else "POD", "cloud": "SECURE",
                  "count": int(count), "minCudaVersion": MIN_CUDA}
        doc = self._http.call("GET", "/catalog/gpus", params=params).json("GET /catalog/gpus")
        return _parsed(_items(doc, "gpus", "GET /catalog/gpus"), parse_gpu)

    def data_centers(self) -> list[DataCenter]:
        doc = self._http.call("GET", "/catalog/datacenters", params={"include": "GPU_AVAILABILITY"}).json(
            "GET /catalog/datacenters")
        return _parsed(_items(doc, "dataCenters", "GET /catalog/datacenters"), parse_datacenter)

    def volumes(self) -> list[Volume]:
        doc = self._http.call("GET", "/network-volumes").json("GET /network-volumes")
        return _parsed(_items(doc, "networkVolumes", "GET /network-volumes"), parse_volume)

    def volume(self, volume_id: str) -> Volume:
        path = f"/network-volumes/{quote(volume_id, safe='')}"
        vol = parse_volume(self._http.call("GET", path).json(f"GET {path}"))
        if vol is None:
            raise InvalidAnswer(f"Runpod's answer to GET {path} is not a network volume")
        return vol

    # -- account secrets -------------------------------------------------------------------------
    def secrets(self, name: str | None = None) -> list[Secret]:
        """The account's secrets (metadata only); with `name`, those named exactly so (Runpod
        matches names without regard to case: the client filters again)."""
        params = {"name": name} if name else None
        doc = self._http.call("GET", "/account/secrets", params=params, secrets=True).json("GET /account/secrets")
        found = _parsed(_items(doc, "secrets", "GET /account/secrets"), parse_secret)
        return [s for s in found if name is None or s.name == name]

    def create_secret(self, name: str, value: str, description: str | None = None) -> Secret:
        """`POST /account/secrets`; SecretExists (409) when the name is taken."""
        body = {"name": name, "value": value, **({"description": description} if description else {})}
        return self._secret(self._http.call("POST", "/account/secrets", body=body, secrets=True), "POST")

    def patch_secret(self, secret_id: str, value: str | None = None, description: str | None = None) -> Secret:
        body = {k: v for k, v in (("value", value), ("description", description)) if v is not None}
        path = f"/account/secrets/{quote(secret_id, safe='')}"
        return self._secret(self._http.call("PATCH", path, body=body, secrets=True), "PATCH")

    def delete_secret(self, secret_id: str) -> bool:
        """True when deleted now, False when Runpod did not know it."""
        try:
            self._http.call("DELETE", f"/account/secrets/{quote(secret_id, safe='')}", secrets=True)
        except NotFound:
            return False
        return True

    @staticmethod
    def _secret(answer, method: str) -> Secret:
        secret = parse_secret(answer.json(f"{method} /account/secrets"))
        if secret is None:
            raise InvalidAnswer(f"Runpod's answer to {method} /account/secrets is not a secret")
        return secret


__all__ = ["RunpodClient", "RunpodError", "Timeouts"]
