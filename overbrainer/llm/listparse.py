"""Lenient parsing of a model's list answer (`string_array`).

Every `[` is tried in order; from it JSON strings separated by whitespace or commas are read until
`]`, a non-string or a truncated string; the first `[` that yields a complete string wins. Failing
that, numbered or bulleted lines. Items are trimmed and empty ones dropped; nothing ⇒ None.
"""

from __future__ import annotations

import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # not in typeshed's json.decoder

_SEPARATORS = " \t\r\n,"
_BULLET = re.compile(r"^\s*(?:[-*\u2022]\s+|\d+[.)](?!\d)\s*)(.*)$")


def _strings_from(text: str, start: int) -> list[str]:
    """The complete JSON strings of the array opening at text[start] == '['."""
    items: list[str] = []
    i = start + 1
    n = len(text)
    while True:
        while i < n and text[i] in _SEPARATORS:
            i += 1
        if i >= n or text[i] != '"':
            return items  # `]`, end of text, or a non-string
        try:
            value, i = scanstring(text, i + 1, False)
        except ValueError:
            return items  # truncated string or a bad escape
        items.append(value)


def _clean(items: list[str]) -> list[str]:
    return [s for s in (item.strip() for item in items) if s]


def string_array(text: str) -> list[str] | None:
    if not text:
        return None
    pos = text.find("[")
    while pos >= 0:
        items = _clean(_strings_from(text, pos))
        if items:
            return items
        pos = text.find("[", pos + 1)
    bullets = []
    for line in text.splitlines():
        m = _BULLET.match(line)
        if m:
            bullets.append(m.group(1))
    return _clean(bullets) or None
