"""Embedding deduplication: cosine against accepted vectors (docs/stages.md#deduplication).

Runs after the lexical filter, on its survivors only. The vectors come from an `embed`
callable (`texts -> list of vectors`), which the pipeline builds on its LLM client (with the
retry policy); this module does no HTTP. Candidates are embedded in chunks of at most 256.
"""

from __future__ import annotations

import math
from operator import mul
from typing import Callable, Iterable, Sequence

CHUNK = 256

Embed = Callable[[list[str]], Sequence[Sequence[float]]]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """dot / (|a||b|), 0.0 when either vector is zero."""
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(x * x for x in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return sum(map(mul, a, b)) / (na * nb)


def embed_chunked(embed: Embed, texts: list[str], chunk: int = CHUNK) -> list[list[float]]:
    vectors: list[list[float]] = []
    for start in range(0, len(texts), chunk):
        part = texts[start:start + chunk]
        got = embed(part)
        if len(got) != len(part):
            raise ValueError(f"the embedder returned {len(got)} vectors for {len(part)} texts")
        vectors.extend(list(v) for v in got)
    return vectors


class EmbeddingDedup:
    """Remembers accepted texts' vectors; a candidate is a duplicate when its cosine with any
    of them (or with a candidate kept earlier in the same batch) is >= threshold."""

    def __init__(self, threshold: float, embed: Embed):
        self.threshold = float(threshold)
        self._embed = embed
        self._texts: list[str] = []
        self._vectors: list[list[float]] = []
        self._norms: list[float] = []

    def __len__(self) -> int:
        return len(self._texts)

    def _remember(self, text: str, vector: list[float]) -> None:
        self._texts.append(text)
        self._vectors.append(vector)
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
        t = self.threshold
        for text, vector in zip(candidates, vectors):
            norm = math.sqrt(math.fsum(x * x for x in vector))
            dup = None
            for i, other in enumerate(self._vectors):
                other_norm = self._norms[i]
                score = 0.0 if norm == 0.0 or other_norm == 0.0 else sum(map(mul, vector, other)) / (norm * other_norm)
                if score >= t:
                    dup = self._texts[i]
                    break
            if dup is None:
                kept.append(text)
                self._remember(text, vector)
            else:
                dropped.append((text, dup))
        return kept, dropped
