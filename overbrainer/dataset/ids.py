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


_HEX_ID = re.compile("[0-9a-f]{32}")


def packed(item_id: str) -> int | str:
    """An ID as an index over many of them keeps it: the 128-bit integer of its 32 lowercase hex
    digits (44 bytes instead of a string's 81), or the string itself when it is not of that form.
    Two IDs are equal exactly when their packed forms are; packed integers order as their texts."""
    if len(item_id) == 32 and _HEX_ID.fullmatch(item_id):
        return int(item_id, 16)
    return item_id


def unpacked(key: int | str) -> str:
    """The ID text of a `packed` key."""
    return key if isinstance(key, str) else format(key, "032x")
