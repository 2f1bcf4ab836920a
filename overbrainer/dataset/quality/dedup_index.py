"""The flat structures behind `dedup.LexicalDedup`: postings of shingle hashes in arrays, and the
frequent shingles of a memory found in bounded space."""

from __future__ import annotations

from array import array
from typing import Iterable

LOW32 = 0xFFFFFFFF
_MAX_PLACE = 0xFFFF
_GOLDEN = 0x9E3779B1


def size_mix(size: int) -> int:
    """What a text's size adds to its postings' tags: tag = (hash ^ size_mix(size)) & LOW32."""
    return (size * _GOLDEN) & LOW32


class Postings:
    """(shingle hash, size of the text) -> the (text, place) of each indexed shingle, newest first.

    Chains of entries in flat arrays, hung from a table of buckets chosen by the low bits of a
    32-bit tag of hash and size; an entry keeps its tag, so a chain read for a tag yields every
    entry of that hash and size (and, rarely, of another pair with the same tag: a candidate too
    many, which the exact check then rejects). 14 bytes an entry plus 4 to 8 bytes of table. A
    place above 65535 is stored as 65535, which only lets a positional filter pass more (never
    fewer) entries."""

    def __init__(self, capacity: int = 0) -> None:
        size = 1024
        while size < capacity:
            size *= 2
        self.heads = array("i", [-1]) * size
        self.mask = size - 1
        self.texts = array("I")
        self.places = array("H")
        self.tags = array("I")
        self.next = array("i")

    def __len__(self) -> int:
        return len(self.texts)

    def add(self, h: int, size: int, text: int, place: int) -> None:
        tag = (h ^ size_mix(size)) & LOW32
        bucket = tag & self.mask
        self.next.append(self.heads[bucket])
        self.heads[bucket] = len(self.texts)
        self.texts.append(text)
        self.places.append(min(place, _MAX_PLACE))
        self.tags.append(tag)

    def fit(self) -> None:
        """Double the table while it has fewer buckets than entries (chains stay short)."""
        size = len(self.heads)
        if len(self.texts) <= size:
            return
        while size < len(self.texts):
            size *= 2
        heads = array("i", [-1]) * size
        mask, nxt = size - 1, self.next
        for e, tag in enumerate(self.tags):  # oldest first: each chain ends newest first
            bucket = tag & mask
            nxt[e] = heads[bucket]
            heads[bucket] = e
        self.heads, self.mask = heads, mask

    def truncate(self, size: int) -> None:
        """Forget the entries from `size` on, newest first (each is its chain's head then)."""
        heads, mask, tags, nxt = self.heads, self.mask, self.tags, self.next
        for e in range(len(tags) - 1, size - 1, -1):
            heads[tags[e] & mask] = nxt[e]
        for column in (self.texts, self.places, self.tags, self.next):
            del column[size:]

    def nbytes(self) -> int:
        """Bytes of content held (the arrays' spare capacity not counted)."""
        columns = (self.heads, self.texts, self.places, self.tags, self.next)
        return sum(len(c) * c.itemsize for c in columns)


def frequent_ranks(hashes: Iterable[int], counters: int) -> dict[int, int]:
    """The shingles seen at least twice among the most frequent ones, ranked rarest first
    (by count, then hash), found with at most `counters` counters (Misra-Gries: every hash
    seen more than len(hashes) / (counters + 1) times is among them; a count is a lower bound).
    Exact when there are at most `counters` distinct hashes."""
    counts: dict[int, int] = {}
    for h in hashes:
        c = counts.get(h)
        if c is not None:
            counts[h] = c + 1
        elif len(counts) < counters:
            counts[h] = 1
        else:
            counts = {x: c - 1 for x, c in counts.items() if c > 1}
    frequent = sorted((c, h) for h, c in counts.items() if c > 1)
    return {h: r for r, (_, h) in enumerate(frequent)}
