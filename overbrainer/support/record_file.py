"""The one way to read and write the JSON records a run owns (`run.json`, `pod.json`, `export.json`,
`push.json`, `compare.json`, a compare's `setup.json`): one JSON object, pretty-printed (2-space
indent, UTF-8) with a final newline, rewritten atomically (support/atomic.py), and read with one
wording of what is wrong: `<file> is not a valid <record> (line L, column C)` for a file that is not
JSON (or not UTF-8), `(not a JSON object)`, `(field F)` for a field of the wrong shape — the file
and a position or a field, never the content.

    RUN_JSON = RecordFile("run record", InvalidRecord)
    data = RUN_JSON.read(path, missing="no run `x` in runs/")    # a dict, or InvalidRecord
    f = RUN_JSON.fields(data, path)
    f.text("id"), f.integer("step"), f.number("cost"), f.flag("keep"); raise f.bad("job.pid")
    RUN_JSON.write(path, record.to_dict())

The owner of each record builds its typed object from the fields (and keeps the fields it does not
know, so a newer version's survive a rewrite).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Literal, overload

from overbrainer.errors import OverbrainerError
from overbrainer.support.atomic import atomic_write_text
from overbrainer.support.files import read_bytes


def position(raw: bytes, offset: int) -> tuple[int, int]:
    """The line and column (from 1) of byte `offset` of `raw`."""
    before = raw[:offset]
    line = before.count(b"\n") + 1
    return line, offset - (before.rfind(b"\n") + 1) + 1


class RecordFile:
    """One kind of record file: its name in messages (`run record`, `pod.json`) and its error class."""

    def __init__(self, what: str, error: type[OverbrainerError] = OverbrainerError):
        self.what = what
        self.error = error

    def invalid(self, where: str | os.PathLike, detail: str) -> OverbrainerError:
        return self.error(f"{where} is not a valid {self.what} ({detail})")

    def parse(self, raw: bytes, where: str | os.PathLike) -> dict[str, Any]:
        """The JSON object in `raw`, the bytes of the file `where`."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line, column = position(raw, e.start)
            raise self.invalid(where, f"line {line}, column {column}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise self.invalid(where, f"line {e.lineno}, column {e.colno}") from None
        if not isinstance(data, dict):
            raise self.invalid(where, "not a JSON object")
        return data

    def read(self, path: str | os.PathLike, *, missing: str | None = None) -> dict[str, Any]:
        """The JSON object in `path`; `missing` (default `<path> does not exist`) when there is none."""
        raw = read_bytes(path, missing=missing or f"{path} does not exist", error=self.error)
        return self.parse(raw, path)

    def read_if_any(self, path: str | os.PathLike) -> dict[str, Any] | None:
        """The JSON object in `path`, or None when the file does not exist."""
        return self.read(path) if Path(path).exists() else None

    def write(self, path: str | os.PathLike, data: dict[str, Any]) -> None:
        """`data` as the file's whole content, atomically; `cannot write <path>: …` on failure."""
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        try:
            atomic_write_text(Path(path), text)
        except OSError as e:
            raise OverbrainerError(f"cannot write {path}: {e.strerror or e}") from e

    def fields(self, data: dict[str, Any], where: str | os.PathLike, prefix: str = "") -> "Fields":
        return Fields(self, data, where, prefix)


class Fields:
    """Typed reads of one JSON object of a record (`prefix` names a nested one: `attempts[2].`)."""

    def __init__(self, kind: RecordFile, data: dict[str, Any], where: str | os.PathLike, prefix: str = ""):
        self.kind, self.data, self.where, self.prefix = kind, data, where, prefix

    def bad(self, name: str, why: str = "") -> OverbrainerError:
        """The error for field `name` (`why` is appended to its name: `: unknown value `x``)."""
        return self.kind.invalid(self.where, f"field {self.prefix}{name}{why}")

    @overload
    def text(self, name: str, optional: Literal[False]) -> str: ...
    @overload
    def text(self, name: str, optional: bool = True) -> str | None: ...
    def text(self, name: str, optional: bool = True) -> str | None:
        v = self.data.get(name)
        if v is None and optional:
            return None
        if not isinstance(v, str):
            raise self.bad(name)
        return v

    def number(self, name: str) -> float | None:
        """A finite number ≥ 0, or None when absent or null."""
        v = self.data.get(name)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise self.bad(name)
        return v

    def integer(self, name: str, default: int | None = None) -> int | None:
        """A whole number ≥ 0 (`3.0` reads as 3), `default` when absent, None when null."""
        v = self.data.get(name, default)
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self.bad(name)
        return v

    def flag(self, name: str, default: bool = False) -> bool:
        v = self.data.get(name, default)
        if not isinstance(v, bool):
            raise self.bad(name)
        return v

    def items(self, name: str) -> list:
        """A list, empty when absent."""
        v = self.data.get(name, [])
        if not isinstance(v, list):
            raise self.bad(name)
        return v
