"""Vault/OpenBao KV v2 reads on the shared HTTP stack (support/http.py):
`GET {VAULT_ADDR}/v1/{mount}/data/{path}`, 3 attempts on transport failures, 408, 429 and 5xx
(the wait is `Retry-After` when given, else 0.2 s·2^n ≤ 2 s × [0.5, 1)), bodies capped at 1 MiB.

Settings come from the environment the configuration was loaded with: `VAULT_ADDR`, and the
token from `VAULT_TOKEN` (trimmed) or else `~/.vault-token`. The client is set up on the first
reference only, so literal keys work with a broken Vault configuration. Answers are never quoted
in errors; the token is registered with the redactor.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from overbrainer.errors import ConfigError, OverbrainerError, PersonMustAct
from overbrainer.support import fmt, http, redact

if TYPE_CHECKING:  # pragma: no cover
    import requests
from overbrainer.support.http import TooLarge, Unanswered, exchange
from overbrainer.support.retry import Policy, retrying

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10
READ_TIMEOUT = 30
ATTEMPTS = 3
BACKOFF_BASE = 0.2  # seconds: 0.1-0.2, then 0.2-0.4 (jittered); a Retry-After wins
BACKOFF_CAP = 2.0
BODY_CAP = 1024 * 1024

_cache_lock = threading.Lock()
_sessions: dict[tuple[str, str], requests.Session] = {}


class _Transient(Exception):
    """A failure worth one more try (network error, 408, 429, 5xx); `retry_after` in seconds."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def _transient(error: BaseException) -> bool:
    return isinstance(error, _Transient)


def _delay(error: BaseException, attempt: int) -> float:
    after = error.retry_after if isinstance(error, _Transient) else None
    return after if after is not None else http.backoff(attempt, BACKOFF_BASE, BACKOFF_CAP)


def _waiting(error: BaseException, seconds: float) -> None:
    log.warning("%s; retrying in %s", error, fmt.duration(seconds))


READS = Policy(ATTEMPTS, _transient, _delay)  # how a read of a secret is retried


def settings(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(VAULT_ADDR, token); ConfigError (exit 2) without VAULT_ADDR, PersonMustAct (exit 77)
    without a token."""
    env = os.environ if environ is None else environ
    addr = (env.get("VAULT_ADDR") or "").strip()
    if not addr:
        raise ConfigError("a vault: reference was found but VAULT_ADDR is not set: export VAULT_ADDR "
                          "(and VAULT_TOKEN) or use a literal key")
    token = (env.get("VAULT_TOKEN") or "").strip()
    if not token:
        home = env.get("HOME") or str(Path.home())
        try:
            token = (Path(home) / ".vault-token").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            token = ""
    if not token:
        raise PersonMustAct("VAULT_ADDR is set but no token was found in VAULT_TOKEN or ~/.vault-token")
    redact.register(token)
    return addr.rstrip("/"), token


def _session(addr: str, token: str) -> requests.Session:
    with _cache_lock:
        s = _sessions.get((addr, token))
        if s is None:
            s = _sessions[(addr, token)] = http.session(addr, headers={"X-Vault-Token": token})
        return s


def _fetch(session: requests.Session, addr: str, url: str, ref: str) -> http.Answer:
    try:
        answer = exchange(session, "GET", url, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), allow_redirects=False,
                          cap=BODY_CAP)
    except Unanswered as e:
        raise _Transient(f"cannot reach vault at {http.display_url(addr)} ({e})") from None
    except TooLarge:
        raise OverbrainerError(f"unparseable answer from vault for {ref} (larger than 1 MiB)") from None
    if answer.status in (408, 429) or answer.status >= 500:
        raise _Transient(f"vault answered HTTP {answer.status} for {ref}",
                         http.retry_after(answer.headers.get("Retry-After")))
    return answer


def read_secret(mount: str, path: str, field: str, *, environ: Mapping[str, str] | None = None) -> str:
    """The string at data.data[field] of the KV v2 secret mount/path."""
    ref = f"vault:{mount}/{path}#{field}"
    addr, token = settings(environ)
    url = f"{addr}/v1/{quote(mount, safe='')}/data/{quote(path, safe='/')}"
    session = _session(addr, token)
    try:
        r = retrying(READS, _waiting)(_fetch, session, addr, url, ref)
    except _Transient as e:
        raise OverbrainerError(str(e)) from None
    if r.status in (401, 403):
        raise PersonMustAct(f"vault refused the token for {ref} (HTTP {r.status}): check VAULT_TOKEN")
    if r.status == 404:
        raise PersonMustAct(f"{ref} was not found in vault (HTTP 404)")
    if r.status != 200:
        raise OverbrainerError(f"vault answered HTTP {r.status} for {ref}")
    try:
        body = json.loads(r.body)
    except ValueError:
        raise OverbrainerError(f"unparseable answer from vault for {ref}") from None
    data = body.get("data") if isinstance(body, dict) else None
    data = data.get("data") if isinstance(data, dict) else None
    if not isinstance(data, dict):
        raise OverbrainerError(f"unparseable answer from vault for {ref}")
    value = data.get(field)
    if not isinstance(value, str):
        raise PersonMustAct(f"field missing or not a string at {ref}")
    redact.register(value)
    return value
