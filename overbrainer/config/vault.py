"""Vault/OpenBao KV v2 reads over HTTP (requests): `GET {VAULT_ADDR}/v1/{mount}/data/{path}`.

Settings come from the environment the configuration was loaded with: `VAULT_ADDR`, and the
token from `VAULT_TOKEN` (trimmed) or else `~/.vault-token`. The client is set up on the first
reference only, so literal keys work with a broken Vault configuration. Answers are never quoted
in errors; the token is registered with the redactor.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Mapping
from urllib.parse import quote

from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.support import redact

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10
READ_TIMEOUT = 30
ATTEMPTS = 3

_cache_lock = threading.Lock()
_sessions: dict[tuple[str, str], object] = {}


class _Transient(Exception):
    """A failure worth one more try (network error, 5xx)."""


def settings(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(VAULT_ADDR, token) or ConfigError (exit 2) saying what is missing."""
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
        raise ConfigError("VAULT_ADDR is set but no token was found in VAULT_TOKEN or ~/.vault-token")
    redact.register(token)
    return addr.rstrip("/"), token


def _session(addr: str, token: str):
    import requests

    with _cache_lock:
        s = _sessions.get((addr, token))
        if s is None:
            s = requests.Session()
            s.headers["X-Vault-Token"] = token
            s.headers["User-Agent"] = "overbrainer"
            _sessions[(addr, token)] = s
        return s


def read_secret(mount: str, path: str, field: str, *, environ: Mapping[str, str] | None = None) -> str:
    """The string at data.data[field] of the KV v2 secret mount/path."""
    import requests
    from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

    ref = f"vault:{mount}/{path}#{field}"
    addr, token = settings(environ)
    url = f"{addr}/v1/{quote(mount, safe='')}/data/{quote(path, safe='/')}"
    session = _session(addr, token)

    @retry(retry=retry_if_exception_type(_Transient), stop=stop_after_attempt(ATTEMPTS),
           wait=wait_exponential(multiplier=0.2, max=2), reraise=True)
    def fetch():
        try:
            r = session.get(url, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), allow_redirects=False)
        except requests.RequestException as e:
            log.debug("vault request failed: %s", type(e).__name__)
            raise _Transient(f"cannot reach vault at {addr} ({type(e).__name__})") from None
        if r.status_code >= 500:
            raise _Transient(f"vault answered HTTP {r.status_code} for {ref}")
        return r

    try:
        r = fetch()
    except _Transient as e:
        raise OverbrainerError(str(e)) from None
    if r.status_code in (401, 403):
        raise OverbrainerError(f"vault refused the token for {ref} (HTTP {r.status_code}): check VAULT_TOKEN")
    if r.status_code == 404:
        raise OverbrainerError(f"{ref} was not found in vault (HTTP 404)")
    if r.status_code != 200:
        raise OverbrainerError(f"vault answered HTTP {r.status_code} for {ref}")
    try:
        body = r.json()
    except ValueError:
        raise OverbrainerError(f"unparseable answer from vault for {ref}") from None
    data = body.get("data") if isinstance(body, dict) else None
    data = data.get("data") if isinstance(data, dict) else None
    if not isinstance(data, dict):
        raise OverbrainerError(f"unparseable answer from vault for {ref}")
    value = data.get(field)
    if not isinstance(value, str):
        raise OverbrainerError(f"field missing or not a string at {ref}")
    redact.register(value)
    return value
