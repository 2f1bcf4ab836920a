"""Secret values: a literal, or `vault:<mount>/<path>#<field>` read from Vault/OpenBao KV v2.

A Secret is resolved lazily (only when a command connects the role that needs it), once, and the
value is registered with the redactor before anyone can use it. `str()`/`repr()` never show it.
"""

from __future__ import annotations

import threading
from typing import Mapping

from overbrainer.errors import OverbrainerError
from overbrainer.support import redact

VAULT_PREFIX = "vault:"
BAD_REFERENCE = "invalid secret reference: expected vault:<mount>/<path>#<field>"


def parse_reference(text: str) -> tuple[str, str, str] | None:
    """(mount, path, field) of a `vault:` reference, or None when malformed."""
    if not text.startswith(VAULT_PREFIX):
        return None
    body = text[len(VAULT_PREFIX):]
    location, sep, field = body.rpartition("#")
    if not sep:
        return None
    mount, slash, path = location.partition("/")
    if not (slash and mount and path.strip("/") and field):
        return None
    return mount, path.strip("/"), field


class Secret:
    """A secret setting. `reference` is the raw text (never print it); `resolve()` the value."""

    __slots__ = ("reference", "_environ", "_value", "_lock")

    def __init__(self, reference: str, environ: Mapping[str, str] | None = None):
        self.reference = reference
        self._environ = dict(environ) if environ is not None else None
        self._value: str | None = None
        self._lock = threading.Lock()
        if not self.is_vault:
            redact.register(reference)

    @property
    def is_vault(self) -> bool:
        return self.reference.startswith(VAULT_PREFIX)

    @property
    def location(self) -> str:
        """Where the value comes from, safe to print: the vault reference, or `literal`."""
        return self.reference if self.is_vault else "literal"

    def resolve(self) -> str:
        """The value (cached); registers it with the redactor. Raises OverbrainerError."""
        with self._lock:
            if self._value is None:
                if self.is_vault:
                    ref = parse_reference(self.reference)
                    if ref is None:
                        raise OverbrainerError(BAD_REFERENCE)
                    # lazy: only a vault: reference needs the HTTP stack (requests, tenacity)
                    from overbrainer.config.vault import read_secret

                    value = read_secret(*ref, environ=self._environ)
                else:
                    value = self.reference
                redact.register(value)
                self._value = value
            return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.reference == self.reference

    def __hash__(self) -> int:
        return hash(("Secret", self.reference))
