"""Reading a run's local job.log: the last N lines, then new lines as they come."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from overbrainer.runs.timing import poll_secs

_CHUNK = 64 * 1024


def read_log(path: Path, tail: int | None, *, partial: bool = False) -> tuple[list[bytes], int]:
    """The complete lines of `path` (the last `tail` of them), and the offset after the last one.

    A missing file reads as no line. An unterminated last line is left for a follower, or read
    as a line of its own with `partial` (nobody will follow: the log may never end in a newline).
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return [], 0
    with f:
        size = os.fstat(f.fileno()).st_size
        if tail is None:
            data = f.read(size)
            start = 0
        else:
            # Read backwards until enough newlines are in hand.
            start, data = size, b""
            while start > 0 and data.count(b"\n") <= tail:
                step = min(_CHUNK, start)
                start -= step
                f.seek(start)
                data = f.read(step) + data
    end = data.rfind(b"\n") + 1
    if partial and end < len(data):
        data, end = data + b"\n", len(data) + 1
    lines = data[:end].split(b"\n")[:-1] if end else []
    if tail is not None:
        if start > 0:
            lines = lines[1:]  # the first one may be cut
        lines = lines[-tail:] if tail else []
    return lines, start + end


def follow_log(path: Path, offset: int, runs_dir: Path, run_id: str, interrupt) -> Iterator[bytes]:
    """New complete lines of `path` from `offset`, until Ctrl-C or the run has ended and its log
    has stopped growing."""
    from overbrainer.runs.record import load

    pending = b""
    while True:
        data = b""
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            pass
        offset += len(data)
        pending += data
        *lines, pending = pending.split(b"\n")
        yield from lines
        if not data:
            try:
                ended = load(runs_dir, run_id).ended
            except Exception:  # noqa: BLE001 - a record being rewritten; look again later
                ended = False
            if ended:
                if pending:
                    yield pending
                return
        if interrupt.wait(poll_secs()):
            return
