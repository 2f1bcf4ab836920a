"""Reading a run's job.log: the last N lines, then new lines as they come.

The log is read from the run dir (`LocalLog`), or, while the run of an SSH target or a pod has not
ended or its log was never retrieved, from `<remote_dir>/job.log` on the target (`RemoteLog`,
through `Executor.read_from`, reached as its kind says: jobs.records.reader). `LogReader` splits
either into lines the same way, `CHUNK` bytes at a time (`--tail` reads backwards from the end, so
a huge log is never held whole).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from overbrainer.config.model import Config
from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.exec.base import Executor
from overbrainer.front.interrupt import Interrupt
from overbrainer.exec import scripts
from overbrainer.jobs import polling
from overbrainer.jobs.records import reader
from overbrainer.jobs.run_record import RunPlace
from overbrainer.jobs.targets import record_target
from overbrainer.support.lines import LineReader

log = logging.getLogger(__name__)

T = TypeVar("T")
Race = Callable[..., Any]  # Interrupt.race: fn(*args)'s result, or None once Ctrl-C came

CHUNK = 64 * 1024


class Stopped(Exception):
    """Ctrl-C came while a request to the target was in flight."""


class LocalLog:
    def __init__(self, path: Path):
        self.path = path

    def size(self) -> int | None:
        """Bytes in the log; None when it does not exist."""
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return None

    def read(self, offset: int, limit: int) -> bytes:
        try:
            with open(self.path, "rb") as f:
                f.seek(offset)
                return f.read(limit)
        except FileNotFoundError:
            return b""


class RemoteLog:
    """`path` on the target. `race` runs each request (Interrupt.race: None means Ctrl-C)."""

    def __init__(self, executor: Executor, path: str, race: Race | None = None):
        self.executor = executor
        self.path = path
        self.race = race

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self.race is None:
            return fn(*args)
        out: T | None = self.race(fn, *args)
        if out is None:
            raise Stopped()
        return out

    def size(self) -> int | None:
        out = self._call(self.executor.probe, scripts.file_size(self.path)).strip()
        if out == "missing":
            return None
        if not out.isdigit():
            raise OverbrainerError("the size of the job's log on the target could not be read")
        return int(out)

    def read(self, offset: int, limit: int) -> bytes:
        return self._call(self.executor.read_from, self.path, offset, limit)


class LogReader:
    """Complete lines of a log from `offset` (the bytes consumed so far), split by the one line
    reader (support/lines.py, bytes mode). An unterminated last line waits in `pending` for the
    next read, until `finish()` gives it out."""

    def __init__(self, source: LocalLog | RemoteLog):
        self.source = source
        self._lines = LineReader()

    @property
    def offset(self) -> int:
        return self._lines.offset

    @property
    def pending(self) -> bytes:
        return self._lines.pending

    def lines(self, n: int | None, *, partial: bool = False) -> Iterator[bytes] | None:
        """The last `n` lines (all of them with None, read as they are given out); None when the
        log does not exist. With `partial` an unterminated last line is one of them (nobody
        follows: the log may never end in a newline); otherwise it waits in `pending`."""
        size = self.source.size()
        if size is None:
            return None
        if n is None:
            return self._all(partial)
        # Read backwards until enough newlines are in hand.
        chunks: list[bytes] = []
        start, newlines = size, 0
        while start > 0 and newlines <= n:
            step = min(CHUNK, start)
            start -= step
            chunk = self.source.read(start, step)
            if partial and not chunks and chunk and not chunk.endswith(b"\n"):
                newlines += 1  # the unterminated last line counts
            chunks.insert(0, chunk)
            newlines += chunk.count(b"\n")
        self._lines = LineReader(start)
        lines = self._lines.feed(b"".join(chunks))
        if start > 0:
            if not lines:
                return iter([])  # all we read is the cut end of one long last line
            lines = lines[1:]  # the first one may be cut
        if partial:
            lines += self.finish()
        return iter(lines[-n:] if n else [])

    def _all(self, partial: bool) -> Iterator[bytes]:
        yield from self.forward()
        if partial:
            yield from self.finish()

    def forward(self) -> Iterator[bytes]:
        """The new complete lines, read CHUNK bytes at a time up to the end of the log."""
        while True:
            data = self.source.read(self.offset, CHUNK)
            yield from self._lines.feed(data)
            if len(data) < CHUNK:
                return

    def finish(self) -> list[bytes]:
        return self._lines.finish()


def follow(reader: LogReader, ended: Callable[[], bool], interrupt: Interrupt, run_id: str) -> Iterator[bytes]:
    """New lines until Ctrl-C, or until `ended()` and the log has stopped growing. A read that
    fails (the target out of reach) is retried with a warning; after `polling.FAILURE_BUDGET` such
    retries in a row the next failure ends the follow with an error."""
    failures = 0
    while True:
        before = reader.offset
        # Asked before the read: a run that had ended then wrote its whole log before this read
        # (asked after it, the job's last line could land between the read and the question).
        was_over = ended()
        try:
            yield from reader.forward()
        except Stopped:
            return
        except OverbrainerError as e:
            failures += 1
            if failures > polling.FAILURE_BUDGET:
                raise OverbrainerError(f"cannot follow the log of run {run_id}: {e}", cause=e) from e
            log.warning("cannot read the log (%d/%d): %s", failures, polling.FAILURE_BUDGET, e)
        else:
            failures = 0
            if reader.offset == before and was_over:
                yield from reader.finish()
                return
        if interrupt.wait(polling.poll_secs()):
            return


def run_ended(place: RunPlace) -> bool:
    try:
        return place.load().ended
    except Exception:  # noqa: BLE001 - a record being rewritten; look again later
        return False


# --- where the log is -----------------------------------------------------------------------

@dataclass
class OpenedLog:
    source: LocalLog | RemoteLog
    executor: Executor | None = None  # to close when done (the log is on the target)


def open_log(config: Config | None, place: RunPlace, *, race: Race | None = None) -> OpenedLog:
    """The run's job.log: local for a local target and for an ended run whose log is here; on
    the target while an SSH run has not ended (or its log never came home). `config` is None
    when it does not load: the local log then. Unreachable: the local log with a warning if
    there is one, else `cannot reach target `<n>`: …`."""
    path = place.dir / "job.log"
    local = LocalLog(path)
    here = path.exists()
    try:
        record = place.load()
    except OverbrainerError:
        return OpenedLog(local)  # no readable run.json: what is here is all there is
    if config is None or (record.ended and here):
        return OpenedLog(local)
    if record.target not in config.targets and here:
        return OpenedLog(local)
    target = record_target(config, record)
    opener = reader(config, target, record, place)
    if opener is None:
        return OpenedLog(local)
    call = race or (lambda fn, *a: fn(*a))
    try:
        executor = call(opener)
    except OverbrainerError as e:
        if not here or isinstance(e, ConfigError):
            raise
        log.warning("%s; showing the log retrieved earlier", e)
        return OpenedLog(local)
    if executor is None:
        raise Stopped()
    remote = f"{record.remote_dir.rstrip('/')}/job.log"
    return OpenedLog(RemoteLog(executor, remote, race), executor)
