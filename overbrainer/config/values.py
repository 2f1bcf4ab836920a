"""Value readers both configuration builders use (build.py, build_train.py): secrets and URLs.

Like the readers of fields.Table, they append a problem naming the key (never the value) and
return None instead of stopping.
"""

from __future__ import annotations

import ipaddress
from typing import Mapping
from urllib.parse import urlsplit

from overbrainer.config.fields import Table
from overbrainer.config.secrets import BAD_REFERENCE, Secret, parse_reference


def secret(t: Table, k: str, environ: Mapping[str, str]) -> Secret | None:
    """A secret key: a literal (exact text) or a well-formed vault: reference."""
    text = t.str(k)
    if text is None:
        return None
    if text.startswith("vault:") and parse_reference(text) is None:
        t.problem(k, BAD_REFERENCE, t.data.get(k))
        return None
    return Secret(text, environ)


def url(t: Table, k: str, *, loopback_http: bool = False) -> str | None:
    """An http(s) URL; with `loopback_http`, plain http only on a loopback host."""
    v: str | None = t.str(k)
    if v is None:
        return None
    v = v.strip()
    try:
        parts = urlsplit(v)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        t.problem(k, "expected an http:// or https:// URL", t.data.get(k))
        return None
    if loopback_http and parts.scheme == "http" and not _is_loopback(host):
        t.problem(k, "must be https (plain http only on a loopback host)", t.data.get(k))
        return None
    return v


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
