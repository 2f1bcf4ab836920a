"""Lexical deduplication: word-pair Jaccard against everything accepted (docs/stages.md#deduplication).

A candidate is a duplicate when Jaccard(shingles) >= threshold against any remembered text
(seeded accepted and rejected texts, texts kept earlier) or any earlier kept candidate of the
same batch. The answer is exactly the one of the all-pairs rule (`filter_all_pairs`), including
which earlier text a candidate duplicated (the first one in memory order), but the cost is
near-linear:

- an inverted index over shingles, so only texts that share one are compared;
- prefix filtering: with shingles in one global order, two sets with Jaccard >= t share a
  shingle among the first `|A| - ceil(t|A|) + 1` of each, so only those are indexed and probed.
  The order is rarest first, from shingle counts taken when the index is (re)built; the index
  is rebuilt whenever memory doubled, so the cost stays amortized linear;
- a size filter (Jaccard <= min/max) and a positional filter (as in PPJoin: the first shared
  shingle must leave room for the overlap the two sizes require), both applied through how the
  postings are keyed, before each exact check.

Edge cases follow the rule exactly: two empty shingle sets have Jaccard 1.0, an empty and a
non-empty one 0.0; with a threshold <= 0 every candidate duplicates the first remembered text.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable


def _key(m: int, j: int) -> int:
    return (m << 32) | j


class _FoldTable(dict):
    """str.translate table: alphanumeric -> its (first) lowercase char, anything else -> space."""

    def __missing__(self, code: int) -> str:
        c = chr(code)
        value = c.lower()[0] if c.isalnum() else " "
        self[code] = value
        return value


_FOLD = _FoldTable()


def shingles(text: str) -> frozenset[str]:
    """Adjacent word pairs "w1 w2" of the folded text; with fewer than 2 words, the words."""
    words = text.translate(_FOLD).split()
    if len(words) < 2:
        return frozenset(words)
    return frozenset([f"{a} {b}" for a, b in zip(words, words[1:])])


def jaccard(a: frozenset | set, b: frozenset | set) -> float:
    """|A∩B| / |A∪B|; two empty sets are identical (1.0)."""
    union = len(a | b)
    if union == 0:
        return 1.0
    return len(a & b) / union


def filter_all_pairs(memory: Iterable[str], candidates: Iterable[str], threshold: float):
    """The exact O(n²) rule, for tests and benchmarks. Returns (kept, dropped[(text, dup_of)])."""
    texts = list(memory)
    sets = [shingles(t) for t in texts]
    kept, dropped = [], []
    for text in candidates:
        s = shingles(text)
        dup = next((texts[i] for i, other in enumerate(sets) if jaccard(s, other) >= threshold), None)
        if dup is None:
            kept.append(text)
            texts.append(text)
            sets.append(s)
        else:
            dropped.append((text, dup))
    return kept, dropped


class LexicalDedup:
    """Remembers texts and tells whether new ones duplicate them. Not thread-safe: the caller
    serializes calls per topic (the pipeline holds a lock per topic)."""

    _MIN_BUILD = 64

    def __init__(self, threshold: float):
        self.threshold = float(threshold)
        self._texts: list[str] = []
        self._sets: list[frozenset[str]] = []
        self._sizes: list[int] = []
        self._plans: dict[int, list[list[int]]] = {}
        self._prefixes: list[list[str]] = []
        # shingle -> {_key(set size, position of the shingle in the set's order): [text index]}
        self._postings: dict[str, dict[tuple[int, int], list[int]]] = {}
        self._empty: list[int] = []
        self._rank: dict[str, int] = {}  # global order of the shingles seen at the last build
        self._built_at = 0
        self._alphas: dict[int, int | None] = {}
        self.comparisons = 0  # exact Jaccard checks made (for benchmarks)

    def __len__(self) -> int:
        return len(self._texts)

    # --- public ----------------------------------------------------------------------------

    def seed(self, texts: Iterable[str]) -> None:
        """Remember `texts` (stored and rejected ones) without filtering them."""
        self.record(texts)

    def record(self, texts: Iterable[str]) -> None:
        """Remember `texts` as accepted."""
        for text in texts:
            self._add(text, shingles(text), rebuild=True)

    def check(self, candidates: Iterable[str]) -> list[str | None]:
        """For each candidate, the earlier text it duplicates, or None if it is new (compared with
        memory and with the earlier new candidates of this batch). Remembers nothing."""
        size = len(self._texts)
        out: list[str | None] = []
        try:
            for text in candidates:
                s = shingles(text)
                hit = self._find(s)
                if hit is None:
                    self._add(text, s, rebuild=False)
                    out.append(None)
                else:
                    out.append(self._texts[hit])
        finally:
            self._truncate(size)
        return out

    def filter(self, candidates: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
        """Keep the new candidates and remember them. Returns (kept, dropped[(text, dup_of)])."""
        kept: list[str] = []
        dropped: list[tuple[str, str]] = []
        for text in candidates:
            s = shingles(text)
            hit = self._find(s)
            if hit is None:
                self._add(text, s, rebuild=True)
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

    def _prefix(self, s: frozenset[str]) -> list[str]:
        """The first |s| - alpha + 1 shingles of `s` in the global order: by count at the last
        build (unseen shingles first), then by text."""
        n = len(s)
        alpha = self._alpha(n)
        if alpha is None:
            return []
        rank = self._rank
        unseen = [tok for tok in s if tok not in rank]
        if unseen:
            unseen.sort()
            if len(unseen) < n:
                unseen += sorted([tok for tok in s if tok in rank], key=rank.__getitem__)
            ordered = unseen
        else:
            ordered = sorted(s, key=rank.__getitem__)
        return ordered[: n - alpha + 1]

    def _plan(self, n: int) -> list[list[int]]:
        """For a probe of size n, per prefix position i: the posting keys (m, j) to read.

        m: every size that passes the size filter (min/max >= threshold, as floats); r: the least
        overlap o with o / (n + m - o) >= threshold; the first shared shingle of a match sits at
        position i here and j there with the r shared shingles still ahead in both, so
        i <= n - r and j <= m - r."""
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
            plan = [[_key(m, j) for m, r in pairs if i <= n - r for j in range(m - r + 1)] for i in range(n)]
            self._plans[n] = plan
        return plan

    def _find(self, s: frozenset[str]) -> int | None:
        t = self.threshold
        if not self._texts:
            return None
        if t <= 0:
            return 0  # every Jaccard is >= 0: the first remembered text matches
        n = len(s)
        if n == 0:
            return self._empty[0] if self._empty and 1.0 >= t else None
        probe = self._prefix(s)
        if not probe:
            return None  # threshold above 1: nothing matches
        # The first shared shingle of a match sits at position i here and j there with at least
        # the required overlap r still ahead in both: i <= n - r and j <= m - r. Only postings
        # of such (size m, position j) are read (a positional filter, as in PPJoin).
        plan = self._plan(n)
        found: set[int] = set()
        postings = self._postings
        for i, tok in enumerate(probe):
            buckets = postings.get(tok)
            if not buckets:
                continue
            for key in plan[i]:
                ids = buckets.get(key)
                if ids:
                    found.update(ids)
        sets = self._sets
        for k in sorted(found):
            other = sets[k]
            self.comparisons += 1
            inter = len(s & other)
            if inter / (n + len(other) - inter) >= t:
                return k
        return None

    def _add(self, text: str, s: frozenset[str], *, rebuild: bool) -> None:
        i = len(self._texts)
        self._texts.append(text)
        self._sets.append(s)
        self._sizes.append(len(s))
        if not s:
            self._empty.append(i)
            self._prefixes.append([])
        else:
            prefix = self._prefix(s)
            self._prefixes.append(prefix)
            m = len(s)
            for j, tok in enumerate(prefix):
                self._postings.setdefault(tok, {}).setdefault(_key(m, j), []).append(i)
        if rebuild and len(self._texts) >= max(self._MIN_BUILD, 2 * self._built_at):
            self._rebuild()

    def _truncate(self, size: int) -> None:
        """Forget the texts added after `size` (the overlay of `check`), newest first."""
        while len(self._texts) > size:
            i = len(self._texts) - 1
            m = len(self._sets[i])
            for j, tok in enumerate(self._prefixes[i]):
                buckets = self._postings[tok]
                ids = buckets[_key(m, j)]
                ids.pop()
                if not ids:
                    del buckets[_key(m, j)]
                    if not buckets:
                        del self._postings[tok]
            if self._empty and self._empty[-1] == i:
                self._empty.pop()
            self._texts.pop()
            self._sets.pop()
            self._sizes.pop()
            self._prefixes.pop()

    def _rebuild(self) -> None:
        counts: Counter[str] = Counter()
        for s in self._sets:
            counts.update(s)
        self._rank = {tok: r for r, tok in enumerate(sorted(counts, key=lambda tok: (counts[tok], tok)))}
        self._postings = {}
        self._prefixes = []
        for i, s in enumerate(self._sets):
            prefix = self._prefix(s) if s else []
            self._prefixes.append(prefix)
            m = len(s)
            for j, tok in enumerate(prefix):
                self._postings.setdefault(tok, {}).setdefault(_key(m, j), []).append(i)
        self._built_at = len(self._sets)
