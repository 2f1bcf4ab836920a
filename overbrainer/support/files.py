"""Files: reading a whole file whose absence or unreadability is the user's to fix (one error line
naming the file, never its content, in the caller's error class), and a file hard-linked, else
copied."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from overbrainer.errors import OverbrainerError


def read_bytes(path: str | os.PathLike, *, missing: str,
               error: type[OverbrainerError] = OverbrainerError) -> bytes:
    """The bytes of `path`; `error(missing)` when it does not exist, `error("cannot read <path>: …")`
    when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise error(missing) from None
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror or e}") from None


def link_or_copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """`dst` (its folders made) as a hard link of `src`, or a copy on another file system."""
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
