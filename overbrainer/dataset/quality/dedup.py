"""Lexical deduplication: word-pair Jaccard against everything accepted (docs/stages.md#deduplication).

A candidate is a duplicate when Jaccard(shingles) >= threshold against any remembered text
(seeded accepted and rejected texts, texts kept earlier) or any earlier kept candidate of the
same batch. The answer is exactly the one of the all-pairs rule (tests/fixtures/oracles.py), including
which earlier text a candidate duplicated (the first one in memory order), but the cost is
near-linear and the memory compact:

- a shingle is kept as the 64-bit xxh3 hash of its UTF-8, a text's hashes in one flat array
  (8 bytes a shingle). Two different shingles count as one only when their hashes collide:
  about 2^-64 for a pair, under 1e-7 that any pair collides among a million distinct shingles;
  only then can a Jaccard come out higher than the rule's (a false match). Nothing else differs;
- the texts in one UTF-8 buffer (`TextStore`), to name the one a candidate duplicated;
- an inverted index (`Postings`: chains in flat arrays), so only texts that share a
  shingle are compared;
- prefix filtering: with shingles in one global order, two sets with Jaccard >= t share a
  shingle among the first `|A| - ceil(t|A|) + 1` of each, so only those are indexed and probed.
  Any fixed order keeps the answer exact; for speed, the frequent shingles come last, rarest
  first (the at most 16,384 found by Misra-Gries counters at the last build), and all the
  others first, by hash. The order is rebuilt whenever memory doubled (amortized linear);
- a size filter (Jaccard <= min/max) and a positional filter (as in PPJoin: the first shared
  shingle must leave room for the overlap the two sizes require): postings are keyed by shingle
  and size of the text, and keep the shingle's place, so only the sizes and places that can
  still match are read before each exact check.

Memory, measured by scripts/bench_dedup.py on questions of 8-20 words (17 on average, 16
shingles) at threshold 0.8, 90% of them kept: 30.6 MB per 100k questions put through at 100k
(340 bytes a remembered one: its UTF-8 + 8, its shingle hashes 8 each + 8, about 75 of
postings; the fixed tables make it 38 MB per 100k at 10k), against 229 MB per 100k for the
str/frozenset/dict index before it, at the same speed or better (0.65-0.88x its CPU time per
text in our runs).

Edge cases follow the rule exactly: two empty shingle sets have Jaccard 1.0, an empty and a
non-empty one 0.0; with a threshold <= 0 every candidate duplicates the first remembered text.
"""

from __future__ import annotations

from array import array
from typing import Iterable

import xxhash

from overbrainer.dataset.quality.textstore import TextStore

_hash = xxhash.xxh3_64_intdigest


class _FoldTable(dict):
    """str.translate table: alphanumeric -> its (first) lowercase char, anything else -> space."""

    def __missing__(self, code: int) -> str:
        c = chr(code)
        value = c.lower()[0] if c.isalnum() else " "
        self[code] = value
        return value


_FOLD = _FoldTable()


def shingle_hashes(text: str) -> set[int]:
    """The text's shingles, each as the xxh3_64 of its UTF-8 (the folded text has no surrogates):
    its adjacent word pairs "w1 w2" once folded (each alphanumeric character lower-cased, any
    other a space); with fewer than 2 words, the words."""
    words = text.translate(_FOLD).split()
    if len(words) < 2:
        return {_hash(w.encode()) for w in words}
    return {_hash(f"{a} {b}".encode()) for a, b in zip(words, words[1:])}


class LexicalDedup:
    """Remembers texts and tells whether new ones duplicate them. Not thread-safe: the caller
    serializes calls per topic (the pipeline holds a lock per topic)."""

    _MIN_BUILD = 64
    _COUNTERS = 16384  # counters for the frequent shingles (and the most ranked)

    def __init__(self, threshold: float):
        self.threshold = float(threshold)
        self._indexed = 0 < self.threshold <= 1  # else the answer needs no index
        self._texts = TextStore()
        self._hashes = array("Q")  # every text's shingle hashes (in no particular order)
        self._starts = array("Q", [0])  # text k's are _hashes[_starts[k]:_starts[k + 1]]
        self._postings = Postings()  # each text's prefix: (text, place) by (shingle hash, size)
        self._first_empty = -1  # the first text without shingles
        self._rank: dict[int, int] = {}  # frequent shingles at the last build, rarest first
        self._built_at = 0
        self._alphas: dict[int, int | None] = {}
        self._plans: dict[int, list[list[tuple[int, int]]]] = {}
        self.comparisons = 0  # exact Jaccard checks made (for benchmarks)

    def __len__(self) -> int:
        return len(self._texts)

    def nbytes(self) -> int:
        """Bytes of the texts, shingle hashes and postings held (not counting the arrays' spare
        capacity, the frequent-shingle ranks and the per-size plans, all small)."""
        arrays = len(self._hashes) * 8 + len(self._starts) * 8
        return self._texts.nbytes() + arrays + self._postings.nbytes()

    # --- public ----------------------------------------------------------------------------

    def seed(self, texts: Iterable[str]) -> None:
        """Remember `texts` (stored and rejected ones) without filtering them."""
        self.record(texts)

    def record(self, texts: Iterable[str]) -> None:
        """Remember `texts` as accepted."""
        for text in texts:
            self._add(text, self._ordered(shingle_hashes(text)), rebuild=True)

    def check(self, candidates: Iterable[str]) -> list[str | None]:
        """For each candidate, the earlier text it duplicates, or None if it is new (compared with
        memory and with the earlier new candidates of this batch). Remembers nothing."""
        size, entries = len(self._texts), len(self._postings)
        out: list[str | None] = []
        try:
            for text in candidates:
                hs = self._ordered(shingle_hashes(text))
                hit = self._find(hs)
                if hit is None:
                    self._add(text, hs, rebuild=False)
                    out.append(None)
                else:
                    out.append(self._texts[hit])
        finally:
            self._truncate(size, entries)
        return out

    def filter(self, candidates: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
        """Keep the new candidates and remember them. Returns (kept, dropped[(text, dup_of)])."""
        kept: list[str] = []
        dropped: list[tuple[str, str]] = []
        for text in candidates:
            hs = self._ordered(shingle_hashes(text))
            hit = self._find(hs)
            if hit is None:
                self._add(text, hs, rebuild=True)
                kept.append(text)
            else:
                dropped.append((text, self._texts[hit]))
        return kept, dropped

    # --- index -----------------------------------------------------------------------------

    def _alpha(self, n: int) -> int | None:
        """Least overlap k with k/n >= threshold (as floats), None if none; n > 0."""
        if n in self._alphas:
            return self._alphas[n]
        t = self.threshold
        k = None
        for candidate in range(max(0, int(t * n) - 1), n + 1):
            if candidate / n >= t:
                k = candidate
                break
        self._alphas[n] = k
        return k

    def _ordered(self, hs: set[int]) -> list[int]:
        """`hs` in the global order: shingles not frequent at the last build first, by hash,
        then the frequent ones, rarest first."""
        common = self._rank.keys() & hs
        if common:
            return sorted(hs - common) + sorted(common, key=self._rank.__getitem__)
        return sorted(hs)

    def _plan(self, n: int) -> list[list[tuple[int, int]]]:
        """For a probe of size n, per prefix place i: (size_mix(m), j) for every size m of an
        indexed text whose postings are worth reading, up to their place j.

        m: every size that passes the size filter (min/max >= threshold, as floats); r: the least
        overlap o with o / (n + m - o) >= threshold; the first shared shingle of a match sits at
        place i here and j there with the r shared shingles still ahead in both, so
        i <= n - r and j <= m - r (a positional filter, as in PPJoin)."""
        plan = self._plans.get(n)
        if plan is None:
            t = self.threshold
            pairs = []
            for m in range(1, int(n / t) + 2):
                if (m / n if m < n else n / m) < t:
                    continue
                for o in range(max(1, int(t / (1 + t) * (n + m)) - 1), min(n, m) + 1):
                    if o / (n + m - o) >= t:
                        pairs.append((m, o))
                        break
            alpha = self._alpha(n)
            assert alpha is not None  # the callers checked it (a probe with no alpha matches nothing)
            plan = [[(size_mix(m), m - r) for m, r in pairs if i <= n - r] for i in range(n - alpha + 1)]
            self._plans[n] = plan
        return plan

    def _find(self, hs: list[int]) -> int | None:
        t = self.threshold
        if not len(self._texts):
            return None
        if t <= 0:
            return 0  # every Jaccard is >= 0: the first remembered text matches
        n = len(hs)
        if n == 0:
            return self._first_empty if self._first_empty >= 0 and 1.0 >= t else None
        if not self._indexed or self._alpha(n) is None:
            return None  # threshold above 1: nothing matches
        probe, starts = set(hs), self._starts
        with memoryview(self._hashes) as hashes:  # its slices copy nothing
            for k in sorted(self._candidates(hs)):
                a, b = starts[k], starts[k + 1]
                self.comparisons += 1
                inter = len(probe.intersection(hashes[a:b]))
                if inter / (n + (b - a) - inter) >= t:
                    return k
        return None

    def _candidates(self, hs: list[int]) -> set[int]:
        """The texts with a posting of a prefix shingle of `hs` that the plan lets through."""
        p = self._postings
        heads, mask, texts, places, tags, nxt = p.heads, p.mask, p.texts, p.places, p.tags, p.next
        found: set[int] = set()
        for h, sizes in zip(hs, self._plan(len(hs))):
            low = h & LOW32
            for mix, limit in sizes:
                tag = low ^ mix
                e = heads[tag & mask]
                while e >= 0:
                    if tags[e] == tag and places[e] <= limit:
                        found.add(texts[e])
                    e = nxt[e]
        return found

    def _index(self, k: int, hs: list[int]) -> None:
        """Post the prefix of text k (`hs`, its shingle hashes in order)."""
        alpha = self._alpha(len(hs))
        if alpha is not None:
            add, m = self._postings.add, len(hs)
            for j in range(m - alpha + 1):
                add(hs[j], m, k, j)

    def _add(self, text: str, hs: list[int], *, rebuild: bool) -> None:
        k = len(self._texts)
        self._texts.append(text)
        self._hashes.extend(hs)
        self._starts.append(len(self._hashes))
        if not hs:
            if self._first_empty < 0:
                self._first_empty = k
        elif self._indexed:
            self._index(k, hs)
            if rebuild:
                self._postings.fit()
        if rebuild and self._indexed and k + 1 >= max(self._MIN_BUILD, 2 * self._built_at):
            self._rebuild()

    def _truncate(self, size: int, entries: int) -> None:
        """Forget the texts from `size` on and the postings from `entries` on (the overlay of
        `check`, which neither rebuilds nor grows the table)."""
        self._postings.truncate(entries)
        self._texts.truncate(size)
        del self._hashes[self._starts[size]:]
        del self._starts[size + 1:]
        if self._first_empty >= size:
            self._first_empty = -1

    def _rebuild(self) -> None:
        """A new global order from the shingle counts, every text's prefix in it posted again:
        done whenever memory doubled, so the cost stays amortized linear."""
        self._rank = frequent_ranks(self._hashes, self._COUNTERS)
        hashes, starts = self._hashes, self._starts
        self._postings = Postings(len(self._postings))
        for k in range(len(starts) - 1):
            a, b = starts[k], starts[k + 1]
            if a < b:
                self._index(k, self._ordered(set(hashes[a:b])))
        self._postings.fit()
        self._built_at = len(self._texts)


# --- The flat structures behind LexicalDedup: postings of shingle hashes in arrays, and the
# frequent shingles of a memory found in bounded space.

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
