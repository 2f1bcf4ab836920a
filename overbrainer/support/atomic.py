"""Crash-safe file rewrites: temp file in the same folder, fsync, os.replace, fsync the folder.

A rewritten file gets the mode a plain `open()` would give it (0666 less the umask: 0644
typically), or the `mode` asked for (0600 for keys), from the moment its temp file exists.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_TRIES = 100


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory entry change (a rename or a create) to disk. Best effort."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a mix."""
    out = AtomicFile(path, mode=mode)
    try:
        out.write(data)
    except BaseException:
        out.discard()
        raise
    out.commit()


class AtomicFile:
    """A streaming rewrite of `path`: `write` as often as needed into a temp file beside it,
    then `commit()` (flush, fsync, rename over `path`, fsync the folder) or `discard()` (the
    temp file is deleted, `path` untouched). A failed `commit` discards too."""

    def __init__(self, path: str | os.PathLike, *, mode: int | None = None, buffering: int = 1 << 16):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp = _create_temp(self.path, 0o666 if mode is None else mode & 0o777)
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
            self._file = os.fdopen(fd, "wb", buffering=buffering)
        except BaseException:
            os.close(fd)
            self._unlink()
            raise

    def write(self, data: bytes) -> None:
        self._file.write(data)

    def commit(self) -> None:
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise
        fsync_dir(self.path.parent)

    def discard(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass
        self._unlink()

    def _unlink(self) -> None:
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


def _create_temp(path: Path, perm: int) -> tuple[int, Path]:
    """A new temp file beside `path`, created with `perm` (the umask applies, as for open())."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TRIES):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, perm), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def atomic_write_text(path: str | os.PathLike, text: str, *, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)
