"""A command's results on stdout: the text line, or with --json the data as one JSON object;
secrets masked; never interleaved with a log line or a progress bar on a shared terminal.

Kept apart from the front ends so that a command that only reports (`config check`) loads no bus,
no events and no renderer."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from overbrainer.front import terminal
from overbrainer.support.redact import redact


def write_result(text: str, data: dict[str, Any] | None, *, as_json: bool, out: IO[str] | None = None) -> None:
    """One result line on `out` (stdout by default), flushed."""
    if as_json:
        line = json.dumps(data if data is not None else {"message": text}, ensure_ascii=False)
    else:
        line = text
    out = out if out is not None else sys.stdout
    with terminal.writing():
        out.write(redact(line) + "\n")
        out.flush()
