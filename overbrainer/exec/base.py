"""The executor contract: where a job runs and how its files travel.

Two implementations: `exec.local.LocalExecutor` (this machine) and `exec.ssh.SshExecutor`
(any machine reached over SSH, Runpod pods included). Job control is file based (job.pid,
exit_code, cancelling, cancelled in the run directory on the target), so a later process can
find, inspect and cancel a job from run.json's `job` object alone.
See docs/runs.md#job-control-on-the-target.
"""

from __future__ import annotations

import posixpath
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Self

from overbrainer.config.model import ENGINES
from overbrainer.errors import OverbrainerError
from overbrainer.exec.transfer import Progress, Written, upload_names, verify
from overbrainer.support.threads import in_daemon

# Files on the target that only the job-control scripts use; never downloaded.
# Top-level entries of a local run dir that are never uploaded. run.json is the project's record of
# the run: nothing on the target reads it, and a copy there would keep the state of the upload
# (`preparing`) forever, so the record lives here only (a local target shares the run directory).
DEFAULT_SKIP = ("ssh", "pod.json", "run.json")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class TargetUnreachable(OverbrainerError):
    """The target could not be reached or the connection dropped (retry later).

    A follow loop counts these; anything else an executor raises is a real failure.
    """


class HostKeyError(OverbrainerError):
    """The target's host key is unknown or differs from known_hosts (never retried)."""


@dataclass(frozen=True)
class Container:
    """The container a job runs in, so cancel can stop it first."""

    engine: str
    name: str

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown container engine {self.engine!r}")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", self.name or ""):
            raise ValueError("invalid container name")

    def to_json(self) -> dict[str, str]:
        return {"engine": self.engine, "name": self.name}


@dataclass(frozen=True)
class JobSpec:
    """What to start: `script` runs under `sh -c` in `dir` (absolute, on the target).

    `env` holds plain settings (they may appear on the target's command line); `secrets`
    reach the job through its environment only, never through a command line or a file.
    """

    dir: str
    script: str
    env: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    container: Container | None = None


class InvalidJob(ValueError):
    """A malformed `job` object. `field` names the part at fault (`job`, `job.dir`, `job.pid`,
    `job.container`); neither it nor the message quotes a value."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class JobId:
    """The one reference to a started job: its run dir on the target, the PID of its process
    group's leader, its container if any. It is run.json's `job` object ({"dir": str, "pid": int,
    "container": null | {"engine", "name"}}): jobs/run_record.py reads it with `from_json`."""

    dir: str
    pid: int
    container: Container | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "dir": self.dir,
            "pid": self.pid,
            "container": self.container.to_json() if self.container else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> "JobId":
        """Strict: raises InvalidJob (no content quoted) on a malformed object; pid 0/1 refused."""
        if not isinstance(data, dict):
            raise InvalidJob("job", "job is not an object")
        d, pid, c = data.get("dir"), data.get("pid"), data.get("container")
        if not isinstance(d, str) or not d:
            raise InvalidJob("job.dir", "job.dir is not a non-empty string")
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1:
            raise InvalidJob("job.pid", "job.pid is not a process id above 1")
        container = None
        if c is not None:
            if not isinstance(c, dict) or not isinstance(c.get("engine"), str) or not isinstance(c.get("name"), str):
                raise InvalidJob("job.container", "job.container is not {engine, name}")
            try:
                container = Container(c["engine"], c["name"])
            except ValueError as e:
                raise InvalidJob("job.container",
                                 "job.container has an unknown engine or an invalid name") from e
        return cls(d, pid, container)


@dataclass(frozen=True)
class JobState:
    """kind: running | exited | cancelled | lost; code only for exited."""

    kind: str
    code: int | None = None

    @classmethod
    def parse(cls, text: str) -> "JobState":
        """Parse the status script's one line: `running`, `exited N`, `cancelled` or `lost`."""
        words = text.strip().split()
        if words in (["running"], ["cancelled"], ["lost"]):
            return cls(words[0])
        if len(words) == 2 and words[0] == "exited" and re.fullmatch(r"-?\d{1,4}", words[1]):
            return cls("exited", int(words[1]))
        if len(words) == 1 and words[0] == "exited":  # an empty exit_code file: torn write
            return cls("lost")
        raise OverbrainerError("the job status script printed an unexpected line")

    @property
    def ended(self) -> bool:
        return self.kind != "running"

    def __str__(self) -> str:
        return f"exited {self.code}" if self.kind == "exited" else self.kind


def check_secrets(secrets: dict[str, str]) -> None:
    """Names must be env names; values cannot hold a newline or NUL (sent as one stdin line)."""
    for name, value in secrets.items():
        if not _ENV_NAME.match(name) or "\n" in value or "\0" in value or "\r" in value:
            raise OverbrainerError(f"{name if _ENV_NAME.match(name) else 'a secret'} cannot be passed to the job")


def check_env(env: dict[str, str]) -> None:
    for name, value in env.items():
        if not _ENV_NAME.match(name) or "\0" in value:
            raise OverbrainerError(f"invalid job environment variable {name!r}")


class Executor(ABC):
    """Where jobs run. Every path argument is absolute on the target (relative = under workdir)."""

    workdir: str

    @abstractmethod
    def claim(self, dir: str, owner: str) -> bool:
        """Write `<dir>/.claim` exclusively with `owner`; True if ours (new or same owner)."""

    def upload(self, local: str | None = None, remote: str | None = None, skip: Iterable[str] = DEFAULT_SKIP,
               progress: Progress | None = None, *, entries: Iterable[tuple[str, str]] | None = None) -> None:
        """Copy files to the target, in one transfer: either the top-level entries of the folder
        `local` (minus `skip`) into the folder `remote` (made even when nothing is sent), or the
        chosen `entries` [(local path, remote path)], each file or folder (recursively) to
        exactly that path, its folders made. Symlinks are sent as symlinks. `progress(done,
        total)` (exec.transfer.Progress) is given the bytes sent (none when nothing moves)."""
        if entries is None:
            if local is None or remote is None:
                raise TypeError("upload() takes a folder and where it goes, or entries")
            names = upload_names(local, skip)
            self._upload([(Path(local, n), posixpath.join(remote, n)) for n in names], remote, progress)
            return
        if local is not None or remote is not None:
            raise TypeError("upload() takes a folder and where it goes, or entries, not both")
        chosen = [(Path(path), str(there)) for path, there in entries]
        if chosen:
            self._upload(chosen, None, progress)

    @abstractmethod
    def _upload(self, entries: list[tuple[Path, str]], folder: str | None, progress: Progress | None) -> None:
        """`upload`'s transfer: each entry's local file or folder to its remote path, after
        making `folder` (when given) on the target."""

    @abstractmethod
    def spawn(self, job: JobSpec) -> JobId:
        """Start the job detached (own session, survives us); returns its JobId."""

    @abstractmethod
    def read_from(self, path: str, offset: int, limit: int) -> bytes:
        """Up to `limit` bytes of `path` from `offset`; a missing file reads empty."""

    @abstractmethod
    def status(self, job: JobId) -> JobState: ...

    @abstractmethod
    def cancel(self, job: JobId) -> None:
        """Stop the job (container first, then its process group). A no-op once it ended."""

    @abstractmethod
    def download(self, remote: str, local: str, entries: Iterable[str], exclude: Iterable[str] = (),
                 progress: Progress | None = None) -> Written | None:
        """Copy `entries` of `remote` into `local` (exclude: basename globs). Missing entries skip.
        `progress(done, total)` is given the bytes received, as `upload`'s. Returns the SHA-256 of
        each file as it was written (exec.transfer.Written), or None when nothing was copied."""

    @abstractmethod
    def manifest(self, remote: str, entries: Iterable[str], exclude: Iterable[str] = ()) -> list[tuple[str, str]]:
        """Sorted [(relative path, sha256 hex)] of the regular files under `entries`."""

    @abstractmethod
    def probe(self, script: str, timeout: float = 60) -> str:
        """Run a small sh script on the target; its stdout (non-zero exit raises)."""

    @abstractmethod
    def put_file(self, path: str, content: bytes | str) -> None:
        """Write a small file atomically on the target."""

    def fetch(self, remote: str, local: str, entries: Iterable[str], exclude: Iterable[str] = (),
              progress: Progress | None = None) -> list[tuple[str, str]]:
        """`download` then verify; returns the target's manifest.

        The target hashes its files (`manifest`, on a thread of its own) while they stream here,
        and each file is hashed here as it is written, so verifying compares two lists: every
        regular file under `entries` here must have the SHA-256 the target computed from its own
        disk, none missing, none extra. Raises `manifest failed: …` (first when both fail),
        `download failed: …`, or exec.transfer.VerifyError (`verify failed: …`)."""
        entries, exclude = list(entries), list(exclude)

        def hash_there() -> list[tuple[str, str]]:
            return self.manifest(remote, entries, exclude)

        if _same_dir(remote, local):  # a local target: the files are here, and the manifest hashes them
            return _manifest_of(hash_there)
        hashing = in_daemon("manifest", hash_there)
        try:
            written = self.download(remote, local, entries, exclude, progress=progress)
        except OverbrainerError as e:
            _manifest_of(hashing.result)  # waits for it: its failure is said first
            raise OverbrainerError(f"download failed: {e}", cause=e) from e
        manifest = _manifest_of(hashing.result)
        verify(local, manifest, entries, exclude, written)
        return manifest

    def close(self) -> None:
        """Release connections (running jobs are not affected)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _same_dir(remote: str, local: str) -> bool:
    try:
        return Path(remote).resolve() == Path(local).resolve()
    except OSError:
        return False


def _manifest_of(get: Callable[[], list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The manifest `get()` returns (hashed here, or the thread's result, waited for)."""
    try:
        return get()
    except OverbrainerError as e:
        raise OverbrainerError(f"manifest failed: {e}", cause=e) from e
