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
`array('Q')` runs merged into one on the first lookup, with a bitmap filter of about one byte
per hash in front of the bisection. Memory: 9 to 10 bytes per distinct n-gram at rest (about
10 MB per million), up to twice that during the one merge, plus a pending set of at most
`HashIndex.PENDING` hashes (about 4 MB). A false match needs a 64-bit collision: about one in
2⁶⁴ ÷ (index size) per lookup.
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
    """A set of 64-bit hashes: `add` any number (kept as sorted runs of at most PENDING), then
    look up with `hits` or `in`. The first lookup after an add merges the runs into one sorted
    array without duplicates (a streaming k-way merge) and builds a bitmap of about 8 bits per
    hash (the top bits of each hash), so that most misses cost one bit test, not a bisection."""

    PENDING = 1 << 16

    def __init__(self) -> None:
        self._pending: set[int] = set()
        self._runs: list[array] = []
        self._bits = bytearray(1)
        self._shift = 63

    def add(self, hashes: Iterable[int]) -> None:
        self._pending.update(hashes)
        if len(self._pending) >= self.PENDING:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._runs.append(array("Q", sorted(self._pending)))
            self._pending.clear()

    def _sorted(self) -> array:
        if self._pending or len(self._runs) > 1:
            self._flush()
            runs = self._runs
            merged = runs[0] if len(runs) == 1 else array("Q", (k for k, _ in groupby(heapq.merge(*runs))))
            self._runs = [merged]
            self._bitmap(merged)
        return self._runs[0] if self._runs else array("Q")

    def _bitmap(self, hashes: array) -> None:
        """Bit `h >> shift` set for every hash h, 2^b bits for the smallest 2^b >= 8 × len."""
        b = max(8, (8 * len(hashes)).bit_length())
        self._shift = 64 - b
        bits = self._bits = bytearray(1 << (b - 3))
        shift = self._shift
        for h in hashes:
            k = h >> shift
            bits[k >> 3] |= 1 << (k & 7)

    def __len__(self) -> int:
        return len(self._sorted())

    def __contains__(self, h: int) -> bool:
        return self.hits((h,))

    def hits(self, hashes: Iterable[int]) -> bool:
        """Whether any of `hashes` is in the index."""
        a = self._sorted()
        size, bits, shift = len(a), self._bits, self._shift
        for h in hashes:
            k = h >> shift
            if bits[k >> 3] >> (k & 7) & 1:
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
