"""One writer per project: a non-blocking fcntl.flock on .overbrainer/lock.

The file holds the holder's PID on its first line and, on a second line, the command it runs
(`overbrainer train attach`: the command's name only, never its arguments, so never a secret).
The kernel frees the lock when its holder dies, so there is no staleness logic; the holder empties
the file as it releases the lock, and the next holder overwrites what a dead one left. Readers
never lock. A second writer fails at once with `Busy` (exit 75, EX_TEMPFAIL) naming the holder
(never a PID that no longer runs: a holder that has not written its own yet is `unknown pid`).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from overbrainer.errors import Busy, OverbrainerError

_HOLDER_BYTES = 512  # what is read of the lock file: the PID line and the command line
_COMMAND_LIMIT = 120


class ProjectLocked(Busy):
    """Another process holds the project (exit 75). `pid` is its PID, or None when unknown;
    `command` what it runs, when it said."""

    def __init__(self, pid: int | None, command: str | None = None):
        who = f"pid {pid}" if pid else "unknown pid"
        if command:
            who += f", `{command}`"
        super().__init__(f"another overbrainer ({who}) is using this project; try again once it has ended")
        self.pid = pid
        self.command = command


def lock_path(project_dir: str | os.PathLike) -> Path:
    """`.overbrainer/lock` (named here: support/ sits below dataset/paths.ProjectPaths)."""
    return Path(project_dir) / ".overbrainer" / "lock"


class ProjectLock:
    """`with ProjectLock(project_dir):` holds the project for writing.

    Raises ProjectLocked at once when another process holds it.
    """

    def __init__(self, project_dir: str | os.PathLike, command: str | None = None):
        self.project_dir = Path(project_dir)
        self.command = _clean(command)
        self.path = lock_path(self.project_dir)
        self._fd: int | None = None

    def acquire(self) -> "ProjectLock":
        state = self.path.parent
        for p in (state, self.path):
            if p.is_symlink():
                raise OverbrainerError(f"refusing to use {p}: it is a symbolic link")
        try:
            state.mkdir(exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as e:
            raise OverbrainerError(f"cannot lock the project ({self.path}): {e.strerror}") from e
        try:
            if os.fstat(fd).st_nlink > 1:
                raise OverbrainerError(f"refusing to use {self.path}: it is a hard link")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise OverbrainerError(f"cannot lock the project ({self.path}): {e.strerror}") from e
                pid, command = _read_holder(fd)
                raise (ProjectLocked(pid, command) if pid is None or _alive(pid) else ProjectLocked(None)) from None
            os.ftruncate(fd, 0)
            text = f"{os.getpid()}\n" + (f"{self.command}\n" if self.command else "")
            os.pwrite(fd, text.encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)  # no PID left behind once it has ended
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "ProjectLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def holder_alive(project_dir: str | os.PathLike) -> bool:
    """Whether the process that last held the project's lock still runs (read without locking:
    a reader must not make a starting writer fail). A PID reused by another process reads as
    alive: the answer errs on the side of "someone may be working"."""
    path = lock_path(project_dir)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        pid, _ = _read_holder(fd)
    finally:
        os.close(fd)
    return pid is not None and _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM  # it runs, as another user
    return True


def _clean(command: str | None) -> str | None:
    """A command line fit for the lock file and an error line: printable, one line, short."""
    if not command:
        return None
    text = "".join(c if c.isprintable() else " " for c in command)
    return " ".join(text.split())[:_COMMAND_LIMIT] or None


def _read_holder(fd: int) -> tuple[int | None, str | None]:
    """(PID, command) of the lock file's holder; None for what it does not say."""
    try:
        raw = os.pread(fd, _HOLDER_BYTES, 0).decode("utf-8", "replace")
    except OSError:
        return None, None
    lines = raw.split("\n")
    first = lines[0].strip()
    pid = int(first) if first.isdigit() else None
    return pid, _clean(lines[1]) if len(lines) > 1 else None
