"""The log records of the tool, captured for the TUI's Logs view instead of written to stderr
(which the full-screen app owns while it runs).

`capture(buffer)` swaps the stderr handler of front/logs.py for `buffer` and puts it back on
exit; the levels set by OVERBRAINER_LOG stay as they are. Each record is kept as one `Line`
(time, level, message), redacted and stripped of control characters like every log line, in a
ring of `LIMIT` lines; readers ask for what came after the sequence number they last saw.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from dataclasses import dataclass
from typing import Iterator

from overbrainer.front.logs import RedactingFilter, StderrHandler, level_name
from overbrainer.support.fmt import stamp
from overbrainer.support.redact import redact, strip_controls

LIMIT = 5000
LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")


@dataclass(frozen=True)
class Line:
    seq: int
    time: str
    level: str  # DEBUG | INFO | WARN | ERROR
    message: str

    def text(self) -> str:
        return f"{self.time} {self.level} {self.message}"


class LogBuffer(logging.Handler):
    """A logging handler keeping the last `limit` records as `Line`s (thread-safe)."""

    def __init__(self, limit: int = LIMIT):
        super().__init__()
        self.addFilter(RedactingFilter())
        self._lines: collections.deque[Line] = collections.deque(maxlen=limit)
        self._seq = 0
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                message += "\n" + strip_controls(redact(record.exc_text))
            with self._guard:
                self._seq += 1
                self._lines.append(Line(self._seq, stamp(record.created), level_name(record.levelno), message))
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001
            self.handleError(record)

    @property
    def last_seq(self) -> int:
        with self._guard:
            return self._seq

    def since(self, seq: int = 0, level: str = "DEBUG") -> list[Line]:
        """The lines kept after sequence number `seq`, at `level` or above."""
        floor = LEVELS.index(level)
        with self._guard:
            lines = [line for line in self._lines if line.seq > seq]
        return [line for line in lines if LEVELS.index(line.level) >= floor]


@contextlib.contextmanager
def capture(buffer: LogBuffer) -> Iterator[LogBuffer]:
    """Log records go to `buffer`, not stderr, until the block ends."""
    root = logging.getLogger()
    removed = [h for h in root.handlers if isinstance(h, StderrHandler)]
    for handler in removed:
        root.removeHandler(handler)
    root.addHandler(buffer)
    try:
        yield buffer
    finally:
        root.removeHandler(buffer)
        for handler in removed:
            root.addHandler(handler)
