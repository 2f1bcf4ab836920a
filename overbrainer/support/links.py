"""A file hard-linked, else copied (another file system). Apart from support/files.py, which the
configuration loader reads with, because `shutil` brings the compression modules at start-up."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def link_or_copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """`dst` (its folders made) as a hard link of `src`, or a copy on another file system."""
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
