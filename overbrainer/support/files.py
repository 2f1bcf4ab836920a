"""Reading a whole file whose absence or unreadability is the user's to fix: one error line naming
the file (never its content), in the caller's error class."""

from __future__ import annotations

import os
from pathlib import Path

from overbrainer.errors import OverbrainerError


def read_bytes(path: str | os.PathLike, *, missing: str,
               error: type[OverbrainerError] = OverbrainerError) -> bytes:
    """The bytes of `path`; `error(missing)` when it does not exist, `error("cannot read <path>: …")`
    when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise error(missing) from None
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror or e}") from None

