"""One process-wide redactor: every resolved secret is registered here, and everything the tool
prints or logs (the log handler's filter in front/logs.py, the error printer, `runs logs`) passes
through `redact`."""

from __future__ import annotations

import re
import threading

MASK = "***"
# Values shorter than this are not redacted as substrings: a placeholder key such as "ollama" or
# "none" (local servers ignore keys) would otherwise mask every ordinary use of the word. No real
# provider key, token or password is this short; the code that handles secrets never prints them.
_MIN_LEN = 8


class Redactor:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: tuple[str, ...] = ()

    def register(self, secret: str | None) -> None:
        if not secret or len(secret) < _MIN_LEN:
            return
        with self._lock:
            if secret not in self._secrets:
                # Longest first, so a secret that contains another is masked whole.
                self._secrets = tuple(sorted(self._secrets + (secret,), key=len, reverse=True))

    def redact(self, text: str) -> str:
        secrets = self._secrets
        if not secrets or not text:
            return text
        for s in secrets:
            if s in text:
                text = text.replace(s, MASK)
        return text

    def clear(self) -> None:
        with self._lock:
            self._secrets = ()


REDACTOR = Redactor()


def register(secret: str | None) -> None:
    REDACTOR.register(secret)


def redact(text: str) -> str:
    return REDACTOR.redact(text)


# Terminal escape sequences (CSI, OSC) and control characters (C0 but tab and newline, DEL, C1):
# a provider's error body or a job's output must not move the cursor or retitle the terminal of
# whoever reads the logs. Compiled on first use (re's cache): `config check` never strips.
_CONTROL = (r"(?:\x1b\[|\x9b)[0-9;?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
            r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    return re.sub(_CONTROL, "", text)


MESSAGE_CAP = 300  # characters of a server's words kept in a message


def words(text: str, cap: int = MESSAGE_CAP) -> str:
    """A server's words fit for a message (an HTTP error body, a provider's or Runpod's
    `detail`): secrets masked, control characters removed, whitespace collapsed to one line, at
    most `cap` characters."""
    text = " ".join(strip_controls(redact(text)).split())
    return redact(text[:cap])
