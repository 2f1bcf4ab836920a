"""Counts in words: `1 subtopic`, `2 subtopics`, `0 answers`."""

from __future__ import annotations

_IRREGULAR = {"entry": "entries", "is": "are", "was": "were"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n word` with the word in the plural unless n is 1 (`many` when the plural is irregular)."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {many or _IRREGULAR.get(word) or word + 's'}"
