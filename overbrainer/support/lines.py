"""The one line reader: complete lines out of a byte stream read in chunks from an offset.

Both growing files of a run are read with it: metrics.jsonl (train/metrics.py) and job.log
(runs/logs.py). `offset` is the number of bytes fed so far (where the next read starts); an
unterminated last line waits in `pending` for the next chunk until `finish()` gives it out; a
`pending` tail of `limit` bytes without a terminator is cut at a UTF-8 boundary and given out (a
huge line never holds the reader up).

Two modes:
* bytes (default): `\\n` ends a line, lines are bytes, empty lines are kept (a log as written);
* `text=True`: `\\n` and `\\r` both end a line, blank lines are dropped (`\\r\\n` gives no empty
  line) and lines are decoded as UTF-8 with errors replaced (a multi-byte character split between
  chunks is decoded whole).
"""

from __future__ import annotations

import re

MAX_LINE = 1 << 20  # an unterminated line this long is given out (cut at a UTF-8 boundary)

_TEXT_ENDS = re.compile(rb"[\r\n]")


def utf8_cut(data: bytes, limit: int) -> int:
    """The largest cut ≤ limit (and > 0) that does not split a UTF-8 character."""
    cut = min(limit, len(data))
    back = cut
    while 0 < back and cut - back < 3 and back < len(data) and (data[back] & 0xC0) == 0x80:
        back -= 1
    if back < len(data) and (data[back] & 0xC0) == 0x80 or back == 0:
        return cut  # not UTF-8 anyway: cut where the limit says
    return back


class LineReader:
    def __init__(self, offset: int = 0, limit: int = MAX_LINE, *, text: bool = False):
        self.offset = offset
        self.limit = limit
        self.text = text
        self.pending = b""

    def feed(self, chunk: bytes) -> list:
        """The lines `chunk` completes (bytes, or str in text mode)."""
        self.offset += len(chunk)
        data = self.pending + chunk
        if self.text:
            *lines, tail = _TEXT_ENDS.split(data)
        else:
            *lines, tail = data.split(b"\n")
        while len(tail) >= self.limit:
            cut = utf8_cut(tail, self.limit)
            lines.append(tail[:cut])
            tail = tail[cut:]
        self.pending = tail
        return self._out(lines)

    def finish(self) -> list:
        """The held-back tail as a last line (a file that will not grow any more)."""
        tail, self.pending = self.pending, b""
        return self._out([tail]) if tail else []

    def _out(self, lines: list[bytes]) -> list:
        if not self.text:
            return lines
        return [s for s in (line.decode("utf-8", errors="replace") for line in lines) if s.strip()]
