"""Jobs on this machine: workdir = <project>/runs, so a run's dir on the target is its local run dir."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from concurrent.futures import wait
from typing import Iterable, Mapping

from overbrainer.errors import OverbrainerError
from overbrainer.exec import scripts, transfer
from overbrainer.exec.base import (
    Executor,
    JobId,
    JobSpec,
    JobState,
    check_env,
    check_secrets,
)
from overbrainer.support import fmt
from overbrainer.support.atomic import atomic_write_bytes
from overbrainer.support.threads import in_daemon

log = logging.getLogger(__name__)

_SCRUB = ("OVERBRAINER_", "VAULT_")
_REAP_EVERY = 0.15
# The jobs this process spawned, whichever executor spawned them: every executor reaps them all,
# so a job started through one executor and cancelled through another in the same process (the
# TUI's `train`, then its `train cancel`) never leaves a zombie leader that looks alive.
_children: list[subprocess.Popen[bytes]] = []
_children_lock = threading.Lock()
READER_LIMIT = 5.0  # seconds a timed-out script's output reader gets once its process group is killed


def job_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment minus every OVERBRAINER_* / VAULT_* variable."""
    base = os.environ if base is None else base
    return {k: v for k, v in base.items() if not k.startswith(_SCRUB)}


class LocalExecutor(Executor):
    def __init__(self, runs_dir: str | os.PathLike[str]):
        path = Path(runs_dir).expanduser()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OverbrainerError(f"cannot create {path}: {e.strerror}") from e
        self.workdir = str(path.resolve())

    # --- helpers ------------------------------------------------------------------------------

    def _path(self, path: str | os.PathLike[str]) -> Path:
        return Path(self.workdir, path)  # absolute paths win in Path joins

    def _reap(self) -> None:
        """Collect this process's finished jobs so a zombie leader never looks alive."""
        with _children_lock:
            _children[:] = [p for p in _children if p.poll() is None]

    def _run_script(self, script: str, action: str, timeout: float = 120) -> str:
        """Run a control script in its own process group (Ctrl-C cannot abort it), reaping jobs."""
        proc = subprocess.Popen(
            ["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )
        reading = in_daemon("script-output", proc.communicate)
        deadline = time.monotonic() + timeout
        while True:
            self._reap()
            if wait([reading], _REAP_EVERY).done:
                break
            if time.monotonic() > deadline:
                _kill_group(proc)
                # The pipes close with the group; a process that left it may hold them still.
                wait([reading], READER_LIMIT)
                raise OverbrainerError(f"{action} failed: it did not finish within {fmt.duration(timeout, words=True)}")
        self._reap()
        out, err = reading.result()
        if proc.returncode != 0:
            raise OverbrainerError(f"{action} failed: {_first_lines(err or b'', proc.returncode)}")
        return (out or b"").decode("utf-8", "replace")

    # --- contract -----------------------------------------------------------------------------

    def claim(self, dir: str, owner: str) -> bool:
        _check_owner(owner)
        d = self._path(dir)
        d.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(d / ".claim", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                return (d / ".claim").read_text().strip() == owner
            except OSError:
                return False
        with os.fdopen(fd, "w") as f:
            f.write(owner + "\n")
        return True

    def _upload(self, entries: list[tuple[Path, str]], folder: str | None, progress: transfer.Progress | None) -> None:
        if folder is not None:
            self._path(folder).mkdir(parents=True, exist_ok=True)
        if not entries:
            return
        base, members = transfer.under_one_folder([(path, str(self._path(there))) for path, there in entries])
        transfer.copy_members(members, base, progress=progress,
                              what=str(entries[0][0].parent) if folder is not None else str(entries[0][0]))

    def spawn(self, job: JobSpec) -> JobId:
        check_secrets(job.secrets)
        check_env(job.env)
        d = self._path(job.dir)
        d.mkdir(parents=True, exist_ok=True)
        for name in ("exit_code", "exit_code.tmp", "cancelling", "cancelling.tmp", "cancelled",
                     "job.pid", "job.pid.tmp"):
            try:
                os.unlink(d / name)
            except FileNotFoundError:
                pass
        env = job_environment()
        env.update(job.env)
        env.update(job.secrets)
        with open(d / "job.log", "wb") as logf:
            proc = subprocess.Popen(
                ["sh", "-c", scripts.wrapper(job.script)], cwd=d, stdin=subprocess.DEVNULL,
                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, env=env,
            )
        with _children_lock:
            _children.append(proc)
        _wait_for_pid_file(d / "job.pid", proc)
        log.debug("job started locally in %s, pid %d", d, proc.pid)
        return JobId(str(d), proc.pid, job.container)

    def read_from(self, path: str, offset: int, limit: int) -> bytes:
        try:
            with open(self._path(path), "rb") as f:
                f.seek(offset)
                return f.read(limit)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return b""

    def status(self, job: JobId) -> JobState:
        self._reap()
        return JobState.parse(self._run_script(scripts.status(job.dir, job.pid), "job status"))

    def cancel(self, job: JobId) -> None:
        self._run_script(scripts.cancel(job.dir, job.pid, job.container), "cancel", timeout=90)

    def download(self, remote: str, local: str, entries: Iterable[str], exclude: Iterable[str] = (),
                 progress: transfer.Progress | None = None) -> transfer.Written | None:
        src, dst = self._path(remote), Path(local)
        if not src.is_dir():
            raise OverbrainerError(f"{src} does not exist")
        if dst.exists() and src.resolve() == dst.resolve():
            return None
        names = [e for e in transfer.check_entries(entries) if os.path.lexists(src / e)]
        return transfer.copy_entries(src, dst, names, exclude, progress=progress) if names else None

    def manifest(self, remote: str, entries: Iterable[str], exclude: Iterable[str] = ()) -> list[tuple[str, str]]:
        src = self._path(remote)
        if not src.is_dir():
            raise OverbrainerError(f"{src} does not exist")
        return transfer.local_manifest(src, entries, exclude)

    def probe(self, script: str, timeout: float = 60) -> str:
        return self._run_script(script, "probe", timeout=timeout)

    def put_file(self, path: str, content: bytes | str) -> None:
        data = content.encode() if isinstance(content, str) else content
        atomic_write_bytes(self._path(path), data)


def _wait_for_pid_file(path: Path, proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """Like the SSH launcher: return once the wrapper wrote job.pid (or the job ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if path.stat().st_size > 0:
                return
        except FileNotFoundError:
            pass
        time.sleep(0.005)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the script's whole process group (it leads one: start_new_session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _check_owner(owner: str) -> None:
    if not owner or not owner.isalnum() or not owner.isascii() or len(owner) > 64:
        raise OverbrainerError("invalid claim owner token")


def _first_lines(stderr: bytes, code: int) -> str:
    text = stderr.decode("utf-8", "replace")[:4096].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()][:20]
    return "; ".join(lines) if lines else f"exit status {code}"
