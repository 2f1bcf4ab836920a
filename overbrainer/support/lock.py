"""One writer per project: a non-blocking fcntl.flock on .overbrainer/lock, the holder's PID inside.

The kernel frees the lock when its holder dies, so there is no staleness logic. Readers never lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from overbrainer.errors import OverbrainerError


class ProjectLocked(OverbrainerError):
    """Another process holds the project. `pid` is its PID, or None when unknown."""

    def __init__(self, pid: int | None):
        who = f"pid {pid}" if pid else "unknown pid"
        super().__init__(f"another overbrainer ({who}) is using this project")
        self.pid = pid


class ProjectLock:
    """`with ProjectLock(project_dir):` holds the project for writing.

    Raises ProjectLocked at once when another process holds it.
    """

    def __init__(self, project_dir: str | os.PathLike):
        self.project_dir = Path(project_dir)
        self.path = self.project_dir / ".overbrainer" / "lock"
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
                raise ProjectLocked(_read_pid(fd)) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            try:
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
    path = Path(project_dir) / ".overbrainer" / "lock"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        pid = _read_pid(fd)
    finally:
        os.close(fd)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM  # it runs, as another user
    return True


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
