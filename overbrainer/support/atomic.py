"""Crash-safe file rewrites: temp file in the same folder, fsync, os.replace, fsync the folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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


def umask_mode(base: int = 0o666) -> int:
    """`base` less the process umask: the mode a plain `open()` would give a new file.

    (`atomic_write_*` create their temp file private; pass this as `mode` for a file that should
    be as readable as any other the user creates.) Read from /proc so no thread ever runs with a
    changed umask; 0o022 is assumed where /proc does not tell.
    """
    umask = 0o022
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    umask = int(line.split()[1], 8)
                    break
    except (OSError, ValueError, IndexError):
        pass
    return base & ~umask & 0o777


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: str | os.PathLike, text: str, *, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)
