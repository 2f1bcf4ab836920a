"""Reading a whole file whose absence or unreadability is the user's to fix: one error line naming
the file (never its content), in the caller's error class. And paths as text without `pathlib`
(importing it, with the urllib.parse and ipaddress it imports, costs as many instructions as a
tenth of `import click`: `config check` does without it)."""

from __future__ import annotations

import os

from overbrainer.errors import OverbrainerError


def path_text(*parts: str | os.PathLike) -> str:
    """`str(Path(*parts))` without pathlib: the parts joined with `/` (an absolute part starts
    over), `.` parts and doubled or trailing slashes dropped (`..` kept), `.` when nothing is
    left."""
    root = ""
    names: list[str] = []
    for part in parts:
        text = os.fspath(part)
        if not isinstance(text, str):
            raise TypeError(f"expected str or os.PathLike returning str, not {type(text).__name__}")
        if text.startswith("/"):
            # POSIX keeps exactly two leading slashes (implementation-defined); three or more are one
            root = "//" if text.startswith("//") and not text.startswith("///") else "/"
            names = []
        names += [name for name in text.split("/") if name and name != "."]
    return root + "/".join(names) if root or names else "."


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
