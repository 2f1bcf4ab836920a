"""What the log handler and the renderers share about stderr: one lock so lines never
interleave, and getting out of the way of progress bars (tqdm is imported only by the bars
renderer, so this module stays cheap)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import IO, Iterator, Mapping

LOCK = threading.RLock()
_bars = 0


def is_tty(stream: IO[str] | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def use_color(stream: IO[str] | None, environ: Mapping[str, str] | None = None) -> bool:
    """Colour only on a terminal, never with NO_COLOR (any non-empty value) or TERM=dumb."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("TERM") == "dumb":
        return False
    return is_tty(stream)


def use_bars(stream: IO[str] | None, *, json: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    """Progress bars only on a terminal that has a width, never in JSON mode or on TERM=dumb."""
    env = os.environ if environ is None else environ
    if json or env.get("TERM") == "dumb" or stream is None or not is_tty(stream):
        return False
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, ValueError, OSError):
        return True  # a terminal whose size cannot be asked: tqdm falls back to 80 columns


def bars_started() -> None:
    global _bars
    with LOCK:
        _bars += 1


def bars_stopped() -> None:
    global _bars
    with LOCK:
        _bars = max(0, _bars - 1)


@contextlib.contextmanager
def writing(stream: IO[str] | None = None) -> Iterator[None]:
    """Hold while writing a line to stderr: clears drawn bars first and redraws them after."""
    with LOCK:
        tqdm_mod = sys.modules.get("tqdm") if _bars else None
        if tqdm_mod is None:
            yield
            return
        with tqdm_mod.tqdm.external_write_mode(file=stream if stream is not None else sys.stderr):
            yield


def write_line(line: str, stream: IO[str] | None = None) -> None:
    """Write one line to stderr (or `stream`) under the lock, flushed."""
    with writing(stream):
        out = stream if stream is not None else sys.stderr
        try:
            out.write(line + "\n")
            out.flush()
        except (OSError, ValueError):
            pass
