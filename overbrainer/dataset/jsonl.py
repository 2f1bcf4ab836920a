"""Crash-safe JSON Lines I/O for the data files.

- `iter_records` / `iter_json_lines`: one record at a time (memory holds a line, not the file);
  `read_records` is the same as a list, for the small files. A missing file is empty; blank
  lines are skipped; a last line without `\\n` is kept when it is valid JSON and ignored with a
  warning otherwise; any other bad line is an `OverbrainerError` naming the file and the 1-based
  line.
- `Appender`: one flushed line per record, thread-safe; a torn tail is repaired on open.
- `LineReader`: a line read again at the byte offset `iter_records(..., offsets=True)` gave.
- `rewriting` / `rewrite`: temp file in the same folder written line by line, fsync, rename
  (overbrainer.support.atomic); memory holds a line, not the file.
- `StagedRewrite`: several files staged as `.<name>.staged.tmp` (also line by line), then
  renamed back to back.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Type, TypeVar, overload

from overbrainer.errors import OverbrainerError
from overbrainer.support.atomic import AtomicFile, fsync_dir

from .records import RecordError

log = logging.getLogger(__name__)

T = TypeVar("T")


def dumps(record: Any) -> str:
    """One compact JSON line (no newline) for a record (with `to_dict`) or a plain dict."""
    obj = record.to_dict() if hasattr(record, "to_dict") else record
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@contextlib.contextmanager
def _no_gc():
    """Pause the cyclic GC while building many small containers that are all kept: otherwise
    its repeated full passes over the growing heap cost more than the parsing (3x on 100k lines)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def iter_lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, raw bytes without the newline) of every line of
    `path`, blank ones included, read one at a time: memory holds one line, whatever the file's
    size. A missing file has no line; the last piece of a file that does not end with `\n` is
    yielded too (the caller decides about a torn tail: `torn` below)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    except OSError as e:
        raise OverbrainerError(f"cannot read {path}: {e.strerror}") from e
    with f:
        offset = 0
        lineno = 0
        try:
            for raw in f:
                lineno += 1
                yield lineno, offset, raw
                offset += len(raw)
        except OSError as e:
            raise OverbrainerError(f"cannot read {path}: {e.strerror}") from e


@overload
def iter_json_lines(path: Path, *, lenient: bool = False,
                    offsets: Literal[False] = False) -> Iterator[tuple[int, Any]]: ...
@overload
def iter_json_lines(path: Path, *, lenient: bool = False,
                    offsets: Literal[True]) -> Iterator[tuple[int, int, Any]]: ...
def iter_json_lines(path: Path, *, lenient: bool = False,
                    offsets: bool = False) -> Iterator[tuple[int, Any]] | Iterator[tuple[int, int, Any]]:
    """(line number, parsed JSON) of every non-blank line of `path`, one at a time, torn tail
    handled (a last line without `\n` that is not JSON is ignored with a warning). A bad line is
    an error naming file and line, or with `lenient` a warning and skipped. `offsets`: yield
    (line number, byte offset of the line, parsed JSON)."""
    path = Path(path)
    loads = json.loads
    for lineno, offset, raw in iter_lines(path):
        if not raw.strip():
            continue
        try:
            obj = loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            if not raw.endswith(b"\n"):
                log.warning("%s: ignoring an incomplete last line", path)
                continue
            reason = "not UTF-8" if isinstance(e, UnicodeDecodeError) else "not JSON"
            if lenient:
                log.warning("skipping line %d of %s: %s", lineno, path, reason)
                continue
            raise OverbrainerError(f"{path}:{lineno}: invalid record: {reason}") from None
        yield (lineno, offset, obj) if offsets else (lineno, obj)


def json_lines(path: Path, *, lenient: bool = False) -> list[tuple[int, Any]]:
    """`iter_json_lines` as a list: for the small files (history, a run's records)."""
    return list(iter_json_lines(path, lenient=lenient))


@overload
def iter_records(path: str | os.PathLike, cls: Type[T], *, offsets: Literal[False] = False) -> Iterator[T]: ...
@overload
def iter_records(path: str | os.PathLike, cls: Type[T], *, offsets: Literal[True]) -> Iterator[tuple[int, T]]: ...
def iter_records(path: str | os.PathLike, cls: Type[T], *,
                 offsets: bool = False) -> Iterator[T] | Iterator[tuple[int, T]]:
    """Every record of `path` as `cls` (strict: unknown fields, bad types are errors), one at a
    time. `offsets`: (byte offset of its line, record) pairs, for a second pass that reads the
    line again (`LineReader`) instead of keeping it."""
    path = Path(path)
    from_dict = cls.from_dict  # type: ignore[attr-defined]
    for lineno, offset, obj in iter_json_lines(path, offsets=True):
        try:
            record = from_dict(obj)
        except RecordError as e:
            raise OverbrainerError(f"{path}:{lineno}: invalid record: {e}") from None
        yield (offset, record) if offsets else record


def read_records(path: str | os.PathLike, cls: Type[T]) -> list[T]:
    """Every record of `path` as `cls`, in a list: only for files whose size is bounded by the
    configuration's counts (subtopics.jsonl, rejected.jsonl, a run's files); the data files
    that grow with the dataset are read with `iter_records`."""
    with _no_gc():
        return list(iter_records(path, cls))


class LineReader:
    """`path`, opened on first use, to read records again at the byte offsets of their lines
    (from `iter_records(..., offsets=True)`), in any order. A line that no longer parses (the
    file changed between the passes) is an error naming the file and the offset."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._file: Any = None

    def record_at(self, offset: int, cls: Type[T]) -> T:
        try:
            if self._file is None:
                self._file = open(self.path, "rb")
            self._file.seek(offset)
            raw = self._file.readline()
        except OSError as e:
            raise OverbrainerError(f"cannot read {self.path}: {e.strerror}") from e
        try:
            return cls.from_dict(json.loads(raw.decode("utf-8")))  # type: ignore[attr-defined]
        except (UnicodeDecodeError, ValueError):  # RecordError is a ValueError
            raise OverbrainerError(f"{self.path}: the line at byte {offset} changed while it was being read") from None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "LineReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _repair_tail(fd: int, path: Path) -> None:
    """If the file does not end with a newline: terminate a valid-JSON tail, else cut it off."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = size
    chunk = 1 << 16
    tail = b""
    while start > 0:
        begin = max(0, start - chunk)
        block = os.pread(fd, start - begin, begin)
        cut = block.rfind(b"\n")
        if cut >= 0:
            tail = block[cut + 1:] + tail
            start = begin + cut + 1
            break
        tail = block + tail
        start = begin
    try:
        json.loads(tail.decode("utf-8"))
        valid = True
    except (UnicodeDecodeError, ValueError):
        valid = False
    if valid:
        log.debug("%s: terminating a last line that lost its newline", path)
        os.write(fd, b"\n")
    else:
        log.warning("%s: removing an incomplete last line", path)
        os.ftruncate(fd, start)


class Appender:
    """Appends records to a JSONL file, one flushed line each. Thread-safe.

    Opening creates the folder and the file, and repairs a torn last line left by a crash.
    Use as a context manager or call `close()`.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)  # umask applies
        except OSError as e:
            raise OverbrainerError(f"cannot open {self.path}: {e.strerror}") from e
        try:
            _repair_tail(self._fd, self.path)
        except OSError as e:
            self.close()
            raise OverbrainerError(f"cannot repair {self.path}: {e.strerror}") from e

    def append(self, record: Any) -> None:
        """Write `record` as one line; it is in the file (not in a buffer) when this returns."""
        self._write((dumps(record) + "\n").encode("utf-8"))

    def append_all(self, records: Iterable[Any]) -> None:
        """Write `records` with a single write: a batch (a list request's new items) is in the
        file whole or, after a crash mid-write, cut at a line that the next open repairs."""
        data = "".join(dumps(record) + "\n" for record in records).encode("utf-8")
        if data:
            self._write(data)

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._fd is None:
                raise OverbrainerError(f"cannot write {self.path}: the appender is closed")
            view = memoryview(data)
            try:
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
            except OSError as e:
                raise OverbrainerError(f"cannot write {self.path}: {e.strerror}") from e

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "Appender":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LineWriter:
    """Writes one line per record into a file being rewritten (`rewriting`, `StagedRewrite.staging`)."""

    def __init__(self, write, name: Path):
        self._write = write
        self._name = name
        self.count = 0  # lines written
        self.cancelled = False

    def write_line(self, line: str) -> None:
        """`line` (JSON, without its newline) and a `\n`."""
        try:
            self._write(line.encode("utf-8") + b"\n")
        except OSError as e:
            raise OverbrainerError(f"cannot write {self._name}: {e.strerror}") from e
        self.count += 1

    def append(self, record: Any) -> None:
        self.write_line(dumps(record))

    def cancel(self) -> None:
        """Keep the file as it was: the block ends without replacing it."""
        self.cancelled = True


@contextlib.contextmanager
def rewriting(path: str | os.PathLike) -> Iterator[LineWriter]:
    """Replace `path` with the lines written in the block, atomically (temp file beside it,
    fsync, rename, fsync the folder), holding a line at a time. An error in the block, or
    `cancel()`, leaves `path` as it was and deletes the temp file."""
    path = Path(path)
    try:
        out = AtomicFile(path)
    except OSError as e:
        raise OverbrainerError(f"cannot write {path}: {e.strerror}") from e
    writer = LineWriter(out.write, path)
    try:
        yield writer
    except BaseException:
        out.discard()
        raise
    if writer.cancelled:
        out.discard()
        return
    try:
        out.commit()
    except OSError as e:
        raise OverbrainerError(f"cannot write {path}: {e.strerror}") from e


def rewrite(path: str | os.PathLike, records: Iterable[Any]) -> None:
    """Replace `path` with `records` atomically (`rewriting`)."""
    with rewriting(path) as out:
        for record in records:
            out.append(record)


class StagedRewrite:
    """Rewrite several files together: `stage(path, records)` (or `with staging(path) as out:`
    writing line by line) for each, then `commit()`.

    Staged files are `.<name>.staged.tmp` next to their target, fsynced; `commit` renames them
    back to back. Until `commit` nothing changed; `discard()` (or an error while staging, or in
    `commit` before a rename) deletes the staged files.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path]] = []

    def stage(self, path: str | os.PathLike, records: Iterable[Any]) -> None:
        with self.staging(path) as out:
            for record in records:
                out.append(record)

    @contextlib.contextmanager
    def staging(self, path: str | os.PathLike) -> Iterator[LineWriter]:
        """Stage `path` with the lines written in the block; an error discards every staged file."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.staged.tmp")
        self._staged.append((tmp, path))
        try:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                f = open(tmp, "wb", buffering=1 << 16)
            except OSError as e:
                raise OverbrainerError(f"cannot write {tmp}: {e.strerror}") from e
            with f:
                yield LineWriter(f.write, tmp)
                try:
                    f.flush()
                    os.fsync(f.fileno())
                except OSError as e:
                    raise OverbrainerError(f"cannot write {tmp}: {e.strerror}") from e
        except BaseException:
            self.discard()
            raise

    def commit(self) -> None:
        try:
            for tmp, path in self._staged:
                os.replace(tmp, path)
        except OSError as e:
            self.discard()
            raise OverbrainerError(f"cannot rename {tmp} to {path}: {e.strerror}") from e
        for folder in {path.parent for _, path in self._staged}:
            fsync_dir(folder)
        self._staged = []

    def discard(self) -> None:
        for tmp, _ in self._staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self._staged = []

    def __enter__(self) -> "StagedRewrite":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.discard()
