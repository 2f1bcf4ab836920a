"""Logging set-up: one stderr handler, `<time> <LEVEL> <message>` (or JSON lines with --json),
level from OVERBRAINER_LOG, colour on a terminal only, secrets masked.

OVERBRAINER_LOG: `debug|info|warn|warning|error` sets overbrainer's own level (default info);
dependencies (urllib3, paramiko, …) stay at warning unless the level is stricter, or unless a
directive names them: `OVERBRAINER_LOG=debug,urllib3=debug`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import IO, Mapping

from overbrainer.front import terminal
from overbrainer.support.fmt import stamp
from overbrainer.support.redact import redact, strip_controls

ROOT = "overbrainer"

LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "off": logging.CRITICAL + 10,
}
_NAMES = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN",
          logging.ERROR: "ERROR", logging.CRITICAL: "ERROR"}
_COLORS = {"DEBUG": "\x1b[34m", "INFO": "\x1b[32m", "WARN": "\x1b[33m", "ERROR": "\x1b[31m"}
_RESET = "\x1b[0m"


def level_name(levelno: int) -> str:
    for n in (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO):
        if levelno >= n:
            return _NAMES[n]
    return "DEBUG"


class TextFormatter(logging.Formatter):
    def __init__(self, color: bool = False):
        super().__init__()
        self.color = color

    def format(self, record: logging.LogRecord) -> str:
        name = level_name(record.levelno)
        if self.color:
            name = f"{_COLORS[name]}{name}{_RESET}"
        line = f"{stamp(record.created)} {name} {record.getMessage()}"
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            message += "\n" + record.exc_text
        return json.dumps({"event": "log", "time": stamp(record.created),
                            "level": level_name(record.levelno).lower(), "message": message})


class RedactingFilter(logging.Filter):
    """Rewrites each record's message with secrets masked and control characters removed
    (attach to every handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not kill logging
            message = str(record.msg)
        record.msg = strip_controls(redact(message))
        record.args = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


class StderrHandler(logging.Handler):
    """Writes to `stream`, or to whatever sys.stderr is at the time, out of the bars' way."""

    def __init__(self, stream: IO[str] | None = None):
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if record.exc_text:
                text = redact(text)  # the filter ran before the traceback was formatted
            terminal.write_line(text, self.stream)
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001
            self.handleError(record)


def parse_levels(value: str | None) -> tuple[int, dict[str, int], list[str]]:
    """OVERBRAINER_LOG → (overbrainer's level, {logger: level}, problems)."""
    own = logging.INFO
    named: dict[str, int] = {}
    problems: list[str] = []
    for part in (value or "").split(","):
        part = part.strip()
        if not part:
            continue
        target, sep, lvl = part.rpartition("=") if "=" in part else ("", "", part)
        level = LEVELS.get(lvl.strip().lower())
        if level is None:
            problems.append(f"OVERBRAINER_LOG: unknown level `{lvl.strip()}` (debug|info|warn|error)")
            continue
        target = target.strip().replace("::", ".")
        if not sep:
            own = level
        elif target in (ROOT, ""):
            own = level
        else:
            named[target] = level
    return own, named, problems


_managed: list[str] = []


def setup_logging(json: bool = False, *, stream: IO[str] | None = None,
                  environ: Mapping[str, str] | None = None) -> logging.Handler:
    """Install the one stderr handler (replacing one installed before). Returns it."""
    env = os.environ if environ is None else environ
    own, named, problems = parse_levels(env.get("OVERBRAINER_LOG"))

    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, StderrHandler):
            root.removeHandler(h)
    for name in _managed:
        logging.getLogger(name).setLevel(logging.NOTSET)
    _managed.clear()

    handler = StderrHandler(stream)
    if json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter(color=terminal.use_color(stream or sys.stderr, env)))
    handler.addFilter(RedactingFilter())
    root.addHandler(handler)
    root.setLevel(max(logging.WARNING, own))
    logging.getLogger(ROOT).setLevel(own)
    _managed.append(ROOT)
    for name, level in named.items():
        logging.getLogger(name).setLevel(level)
        _managed.append(name)
    logging.captureWarnings(True)
    for p in problems:
        logging.getLogger(__name__).warning("%s", p)
    return handler
