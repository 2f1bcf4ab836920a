"""Decontamination by n-gram overlap (docs/stages.md#decontamination).

The rule is lm-evaluation-harness's (lm_eval/decontamination/janitor.py, `Janitor`): a text is
normalized by lowercasing the ASCII letters and deleting ASCII punctuation (`string.punctuation`:
"don't" → "dont", "x-y" → "xy"; other characters are kept as they are), then split on whitespace
into words; its n-grams are its runs of n consecutive words (n = 13 by default), joined by one
space. Two texts overlap when they share one n-gram. Unlike the harness, a text of fewer than
n words (which has no n-gram, so the harness never matches it) is one unit, its whole normalized
text: it overlaps a text whose whole normalized text is the same (a short benchmark item copied
as is), never a longer text that contains it. A text without a word overlaps nothing.

Units are kept as 64-bit hashes (xxh3-64 of the UTF-8 joined words), in `HashIndex`: sorted
`array('Q')` runs merged as they grow, looked up by bisection. Memory: 8 bytes per distinct
n-gram at rest (8 MB per million), up to twice that while two runs merge, plus a pending set of
at most `HashIndex.PENDING` hashes (about 4 MB). A false match needs a 64-bit collision: about
one in 2⁶⁴ ÷ (index size) per lookup.
"""

from __future__ import annotations

import heapq
import string
from array import array
from bisect import bisect_left
from itertools import groupby
from typing import Iterable

import xxhash

DEFAULT_N = 13
_TABLE = str.maketrans(string.ascii_uppercase, string.ascii_lowercase, string.punctuation)


def words(text: str) -> list[str]:
    """The normalized words of `text` (ASCII lowercased, ASCII punctuation deleted)."""
    return text.translate(_TABLE).split()


def _hash(unit: str) -> int:
    return xxhash.xxh3_64_intdigest(unit.encode("utf-8"))


def units(text: str, n: int = DEFAULT_N) -> set[int]:
    """The hashes of `text`'s n-grams; of its whole normalized text when it has fewer than n
    words (but at least one); none for a text without a word."""
    ws = words(text)
    if len(ws) < n:
        return {_hash(" ".join(ws))} if ws else set()
    return set(map(_hash, map(" ".join, zip(*(ws[i:] for i in range(n))))))


class HashIndex:
    """A set of 64-bit hashes in sorted arrays: `add` any number, then look up with `hits` (a
    lookup first merges what was added)."""

    PENDING = 1 << 16

    def __init__(self) -> None:
        self._pending: set[int] = set()
        self._runs: list[array] = []

    def add(self, hashes: Iterable[int]) -> None:
        self._pending.update(hashes)
        if len(self._pending) >= self.PENDING:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._runs.append(array("Q", sorted(self._pending)))
            self._pending.clear()
        runs = self._runs
        while len(runs) >= 2 and len(runs[-2]) <= 2 * len(runs[-1]):
            b, a = runs.pop(), runs.pop()
            runs.append(array("Q", (k for k, _ in groupby(heapq.merge(a, b)))))

    def _sorted(self) -> array:
        if self._pending or len(self._runs) > 1:
            self._flush()
            while len(self._runs) > 1:  # the runs left differ in size: merge them all
                b, a = self._runs.pop(), self._runs.pop()
                self._runs.append(array("Q", (k for k, _ in groupby(heapq.merge(a, b)))))
        return self._runs[0] if self._runs else array("Q")

    def __len__(self) -> int:
        return len(self._sorted())

    def __contains__(self, h: int) -> bool:
        a = self._sorted()
        i = bisect_left(a, h)
        return i < len(a) and a[i] == h

    def hits(self, hashes: Iterable[int]) -> bool:
        """Whether any of `hashes` is in the index."""
        a = self._sorted()
        size = len(a)
        for h in hashes:
            i = bisect_left(a, h)
            if i < size and a[i] == h:
                return True
        return False


class Screen:
    """Named sources of contamination (benchmark files, the eval split), each a HashIndex of its
    texts' units; `overlaps` names the first source a text overlaps."""

    def __init__(self, n: int = DEFAULT_N) -> None:
        self.n = n
        self.sources: list[tuple[str, HashIndex]] = []

    def add_source(self, label: str, texts: Iterable[str]) -> HashIndex:
        index = HashIndex()
        for text in texts:
            index.add(units(text, self.n))
        self.sources.append((label, index))
        return index

    def __bool__(self) -> bool:
        return bool(self.sources)

    def overlaps(self, *texts: str) -> str | None:
        """The label of the first source one of `texts` shares a unit with, or None."""
        for text in texts:
            hashes = units(text, self.n)
            if not hashes:
                continue
            for label, index in self.sources:
                if index.hits(hashes):
                    return label
        return None
