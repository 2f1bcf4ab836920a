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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path, 0o666 if mode is None else mode & 0o777)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)  # exactly `mode`, whatever the umask
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


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
