"""Embedding deduplication: cosine against accepted vectors (docs/stages.md#deduplication).

Runs after the lexical filter, on its survivors only. The vectors come from an `embed`
callable (`texts -> list of vectors`), which the pipeline builds on its LLM client (with the
retry policy); this module does no HTTP. Candidates are embedded in chunks of at most 256.

Memory: the remembered vectors lie end to end in one array of float64 (8 bytes a component,
the value the embedder gave as a Python float, unchanged), with their norms and end offsets
(8 bytes each) and the texts in a `TextStore` (UTF-8 + 8 bytes): 8 * dim + 16 bytes a vector
plus its text and the arrays' spare capacity (up to 1/16). Measured by scripts/bench_dedup.py:
about 650 MB per 100k vectors of dimension 768, against 2.47 GB as Python lists of floats. The
cosine is the same arithmetic on the same float64 values as with lists, so the answers are
identical; it stays all-pairs, O(remembered * dim) per candidate.
"""

from __future__ import annotations

import math
from array import array
from operator import mul
from typing import Callable, Iterable, Sequence

from overbrainer.dataset.quality.textstore import TextStore

CHUNK = 256

Embed = Callable[[list[str]], Sequence[Sequence[float]]]


def embed_chunked(embed: Embed, texts: list[str], chunk: int = CHUNK) -> list[list[float]]:
    """The vectors of `texts`, as lists of float (float64)."""
    vectors: list[list[float]] = []
    for start in range(0, len(texts), chunk):
        part = texts[start:start + chunk]
        got = embed(part)
        if len(got) != len(part):
            raise ValueError(f"the embedder returned {len(got)} vectors for {len(part)} texts")
        vectors.extend(list(map(float, v)) for v in got)
    return vectors


class EmbeddingDedup:
    """Remembers accepted texts' vectors; a candidate is a duplicate when its cosine with any
    of them (or with a candidate kept earlier in the same batch) is >= threshold."""

    def __init__(self, threshold: float, embed: Embed):
        self.threshold = float(threshold)
        self._embed = embed
        self._texts = TextStore()
        self._values = array("d")  # every vector's components, end to end
        self._ends = array("Q")  # vector i is _values[_ends[i - 1]:_ends[i]] (from 0 for i == 0)
        self._norms = array("d")

    def __len__(self) -> int:
        return len(self._texts)

    def nbytes(self) -> int:
        """Bytes of content held (the buffers' spare capacity not counted)."""
        return self._texts.nbytes() + 8 * (len(self._values) + len(self._ends) + len(self._norms))

    def _remember(self, text: str, vector: list[float]) -> None:
        self._texts.append(text)
        self._values.extend(vector)
        self._ends.append(len(self._values))
        self._norms.append(math.sqrt(math.fsum(x * x for x in vector)))

    def seed(self, texts: Iterable[str]) -> None:
        """Embed and remember `texts` without filtering them."""
        texts = list(texts)
        for text, vector in zip(texts, embed_chunked(self._embed, texts)):
            self._remember(text, vector)

    def filter(self, candidates: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
        """Embed the candidates; keep and remember the new ones. Returns (kept, dropped[(text, dup_of)])."""
        candidates = list(candidates)
        vectors = embed_chunked(self._embed, candidates) if candidates else []
        kept: list[str] = []
        dropped: list[tuple[str, str]] = []
        for text, vector in zip(candidates, vectors):
            hit = self._find(vector)
            if hit is None:
                kept.append(text)
                self._remember(text, vector)
            else:
                dropped.append((text, self._texts[hit]))
        return kept, dropped

    def _find(self, vector: list[float]) -> int | None:
        """The first remembered vector whose cosine with `vector` is >= threshold."""
        t, norms, ends = self.threshold, self._norms, self._ends
        norm = math.sqrt(math.fsum(x * x for x in vector))
        start = 0
        with memoryview(self._values) as values:  # its slices copy nothing
            for i, end in enumerate(ends):
                other_norm = norms[i]
                other = values[start:end]
                score = 0.0 if norm == 0.0 or other_norm == 0.0 else sum(map(mul, vector, other)) / (norm * other_norm)
                if score >= t:
                    return i
                start = end
        return None
