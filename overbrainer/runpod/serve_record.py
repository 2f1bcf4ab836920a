"""A served provider's records (runpod/serve.py), read without acting: `serve.json` of each serve
in `.overbrainer/serves/<serve id>/`, and its replicas as owners of pods (runpod/owners.Owner), so
that the ledger (`pod ls`, the orphan warnings) and `pod rm` know them as they know runs.

A replica's record, as the ledger reads it, has the serve's state in run.json's words:
`preparing` while the serve starts, `running` while a command holds it, `idle` between commands
(kept warm, or brought up by hand), and `down` or `failed` once it ended (a pod still live then
was never confirmed deleted). No API client here: `runs ls`, `pod ls` and the job layer load it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.runpod.pod_record import PodRecord
from overbrainer.runpod.pod_spec import WORKDIR
from overbrainer.support.record_file import RecordFile

log = logging.getLogger(__name__)

SERVE_JSON = "serve.json"
STARTING, UP, IDLE, DOWN, FAILED = "starting", "up", "idle", "down", "failed"
STATES = (STARTING, UP, IDLE, DOWN, FAILED)
# The serve's state in the words of run.json (what the ledger's notes say).
WORDS = {STARTING: "preparing", UP: "running", IDLE: "idle", DOWN: "down", FAILED: "failed"}


class InvalidServe(OverbrainerError):
    pass


SERVE_FILE = RecordFile("serve record", InvalidServe)


@dataclass
class ServeRecord:
    """serve.json (version 1): what was asked for, the serve's state and its replicas (their IDs,
    in order), the Runpod secrets made for it (names only), the times it was created, ready and
    ended, and what it served (tokens)."""

    id: str
    provider: str
    model: str
    engine: str
    image: str
    target: str
    replicas: int
    gpu_count: int
    settings: str
    nonce: str
    created: str
    state: str = STARTING
    by_hand: bool = False
    keep_warm_minutes: float | None = None
    replica_keys: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    ready_at: str | None = None
    ended_at: str | None = None
    message: str | None = None
    boot_secs: float | None = None  # from the first create to the first replica ready
    input_tokens: int = 0
    output_tokens: int = 0
    serving_usd: float = 0.0  # pod time while commands used it (the tokens' cost; boot and idle aside)
    extra: dict[str, Any] = field(default_factory=dict)
    path: Path | None = field(default=None, compare=False)

    @property
    def dir(self) -> Path:
        assert self.path is not None
        return self.path.parent

    def replica_dir(self, key: str) -> Path:
        return self.dir / key

    def pods(self) -> list[tuple[str, PodRecord | None]]:
        """(replica ID, its pod.json or None) of every replica the serve made."""
        out = []
        for key in self.replica_keys:
            try:
                out.append((key, PodRecord.load_if_any(PodRecord.path_in(self.replica_dir(key)))))
            except OverbrainerError as e:
                log.warning("%s", e)
                out.append((key, None))
        return out

    @property
    def live(self) -> bool:
        """Whether a pod of the serve may still exist."""
        return any(p is not None and (p.live or p.stray_pods) for _, p in self.pods())

    def to_dict(self) -> dict[str, Any]:
        data = {"version": 1, "id": self.id, "provider": self.provider, "model": self.model, "engine": self.engine,
                "image": self.image, "target": self.target, "replicas": self.replicas, "gpu_count": self.gpu_count,
                "settings": self.settings, "nonce": self.nonce, "created": self.created, "state": self.state,
                "by_hand": self.by_hand, "keep_warm_minutes": self.keep_warm_minutes,
                "replica_keys": list(self.replica_keys), "secrets": list(self.secrets), "ready_at": self.ready_at,
                "ended_at": self.ended_at, "message": self.message, "boot_secs": self.boot_secs,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "serving_usd": self.serving_usd}
        for k, v in self.extra.items():
            data.setdefault(k, v)
        return data

    def save(self, path: Path | None = None) -> None:
        path = Path(path) if path is not None else self.path
        if path is None:
            raise ValueError("ServeRecord.save needs a path the first time")
        path.parent.mkdir(parents=True, exist_ok=True)
        SERVE_FILE.write(path, self.to_dict())
        self.path = path

    @classmethod
    def load(cls, path: Path) -> "ServeRecord":
        data = SERVE_FILE.read(path)
        f = SERVE_FILE.fields(data, path)
        state = f.text("state") or STARTING
        if state not in STATES:
            raise f.bad("state")
        keys = f.items("replica_keys")
        names = f.items("secrets")
        if not all(isinstance(k, str) and k.startswith(f.text("id", False) + "-r") for k in keys):
            raise f.bad("replica_keys")
        if not all(isinstance(n, str) for n in names):
            raise f.bad("secrets")
        known = ("version", "id", "provider", "model", "engine", "image", "target", "replicas", "gpu_count",
                 "settings", "nonce", "created", "state", "by_hand", "keep_warm_minutes", "replica_keys", "secrets",
                 "ready_at", "ended_at", "message", "boot_secs", "input_tokens", "output_tokens", "serving_usd")
        record = cls(id=f.text("id", False), provider=f.text("provider", False), model=f.text("model", False),
                     engine=f.text("engine", False), image=f.text("image", False), target=f.text("target", False),
                     replicas=f.integer("replicas", 1) or 1, gpu_count=f.integer("gpu_count", 1) or 1,
                     settings=f.text("settings", False), nonce=f.text("nonce", False),
                     created=f.text("created", False), state=state, by_hand=f.flag("by_hand"),
                     keep_warm_minutes=f.number("keep_warm_minutes"), replica_keys=list(keys), secrets=list(names),
                     ready_at=f.text("ready_at"), ended_at=f.text("ended_at"), message=f.text("message"),
                     boot_secs=f.number("boot_secs"), input_tokens=f.integer("input_tokens", 0) or 0,
                     output_tokens=f.integer("output_tokens", 0) or 0, serving_usd=f.number("serving_usd") or 0.0,
                     extra={k: v for k, v in data.items() if k not in known})
        record.path = Path(path)
        return record


def all_serves(serves_dir: Path) -> list[ServeRecord]:
    """Every serve of the project, oldest first (an unreadable serve.json is a warning)."""
    out = []
    for path in sorted(Path(serves_dir).glob(f"*/{SERVE_JSON}")):
        try:
            out.append(ServeRecord.load(path))
        except OverbrainerError as e:
            log.warning("%s", e)
    return out


def replica_of(serves_dir: Path, key: str) -> "ServeRecord | None":
    """The serve of the replica `key` (`<serve id>-r<n>`), or None."""
    serve_id, _, n = key.rpartition("-r")
    if not serve_id or not n.isdigit():
        return None
    path = Path(serves_dir) / serve_id / SERVE_JSON
    if not path.is_file():
        return None
    try:
        record = ServeRecord.load(path)
    except OverbrainerError:
        return None
    return record if key in record.replica_keys else None


@dataclass
class ReplicaRecord:
    """A replica as the ledger reads a run (runpod/owners.Record)."""

    id: str
    state: str
    message: str | None
    remote_dir: str
    job: Any = None

    @property
    def ended(self) -> bool:
        return self.state in (WORDS[DOWN], WORDS[FAILED])


@dataclass(frozen=True)
class ReplicaOwner:
    """A replica of a serve, the owner of its pod (runpod/owners.Owner): `key` is its ID and pod
    marker, `dir` its folder (pod.json, ssh/)."""

    key: str
    serves_dir: Path

    @property
    def serve_dir(self) -> Path:
        return Path(self.serves_dir) / self.key.rpartition("-r")[0]

    @property
    def dir(self) -> Path:
        return self.serve_dir / self.key

    @property
    def kind(self) -> str:
        return "serve"

    @property
    def side(self) -> bool:
        return True

    def shown(self, project_dir: Path) -> str:
        try:
            return str(self.dir.relative_to(Path(project_dir)))
        except ValueError:
            return str(self.dir)

    def load(self) -> ReplicaRecord:
        record = ServeRecord.load(self.serve_dir / SERVE_JSON)
        return ReplicaRecord(self.key, WORDS[record.state], record.message, f"{WORKDIR}/{self.key}")

    def fail(self, record: Any, message: str) -> None:
        self.fail_run(message)

    def fail_run(self, message: str) -> None:
        """Note on the serve that one of its pods went (`pod rm`); the serve itself finds it lost."""
        try:
            record = ServeRecord.load(self.serve_dir / SERVE_JSON)
            record.message = f"replica {self.key}: {message}"
            record.save()
        except OverbrainerError as e:
            log.warning("%s", e)

    def claim(self, executor: Any, record: Any, token: str) -> None:  # pragma: no cover - a lease's step
        raise OverbrainerError("a serve's replica has no run directory to claim")

    def results_home(self, record: Any, rule: Any) -> bool:
        return True  # a replica keeps nothing worth a pod once its serve ended


def replica_owners(serves_dir: Path) -> list[ReplicaOwner]:
    """Every replica folder of the project's serves."""
    out = []
    for record in all_serves(serves_dir):
        out += [ReplicaOwner(key, Path(serves_dir)) for key in record.replica_keys]
    return out


def replica_owner(serves_dir: Path, key: str) -> ReplicaOwner | None:
    return ReplicaOwner(key, Path(serves_dir)) if replica_of(serves_dir, key) is not None else None
