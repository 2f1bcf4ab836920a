"""Stable, content-addressed IDs (docs/data-files.md#ids).

ID = xxh3-128 of the parts joined by U+001F, as 32 lowercase hex characters. Subtopic and
question IDs hash normalized text, so case and spacing variants are the same item.
"""

from __future__ import annotations

import re

import xxhash

SEPARATOR = "\x1f"

# Control characters (Unicode category Cc). Together with str.split()'s whitespace this is
# exactly Rust's `is_whitespace() || is_control()` set, which the original splits on.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def normalize(text: str) -> str:
    """Split on whitespace or control characters, drop empty pieces, lowercase, join with one space."""
    return " ".join(piece.lower() for piece in _CONTROL.sub(" ", text).split())


def of(*parts: str) -> str:
    """The ID of `parts` (not normalized here)."""
    return xxhash.xxh3_128_hexdigest(SEPARATOR.join(parts).encode("utf-8"))


def subtopic_id(topic: str, name: str) -> str:
    return of("subtopic", topic, normalize(name))


def question_id(subtopic_id: str, text: str) -> str:
    return of("question", subtopic_id, normalize(text))
