"""The per-topic deduplicator of `questions`: lexical first, then the optional
embedding filter on what survived. One lock per topic, held by the caller across the whole
decision (embedding request included) and the append, so parallel subtopics never accept the
same question twice. A dropped candidate is logged at debug level with the text it duplicated."""

from __future__ import annotations

import logging
import threading

from overbrainer.dataset.quality.dedup import LexicalDedup
from overbrainer.dataset.quality.embed_dedup import EmbeddingDedup

log = logging.getLogger(__name__)


class TopicDedup:
    """`with dedup.lock: kept = dedup.filter(candidates)`; every known text `remember`ed, then
    `seed_meanings()` once, before first use.

    `embed(texts) -> vectors` (None without an embedder) runs the embedder with its retries."""

    def __init__(self, topic: str, dedup_threshold: float, embed=None, embedding_threshold: float = 0.9):
        self.topic = topic
        self.lock = threading.Lock()
        self.lexical = LexicalDedup(dedup_threshold)
        self.semantic = EmbeddingDedup(embedding_threshold, embed) if embed is not None else None
        self._unembedded: list[str] = []

    def remember(self, text: str) -> None:
        """A known text (a stored or rejected question): remembered, never filtered. Its meaning
        is embedded by `seed_meanings`, once every known text is remembered."""
        self.lexical.record((text,))
        if self.semantic is not None:
            self._unembedded.append(text)

    def seed_meanings(self) -> None:
        """Embed the known texts (with an embedder; raises what the embedder raises)."""
        if self.semantic is not None and self._unembedded:
            texts, self._unembedded = self._unembedded, []
            self.semantic.seed(texts)

    def filter(self, candidates: list[str]) -> list[str]:
        """The candidates to keep, in order. Call with `self.lock` held."""
        if self.semantic is None:
            kept, dropped = self.lexical.filter(candidates)
            self._log(dropped, "a near-copy of")
            return kept
        # Only lexically novel candidates are embedded; the lexical memory records only the
        # finally kept texts.
        dups = self.lexical.check(candidates)
        novel = [c for c, d in zip(candidates, dups) if d is None]
        self._log([(c, d) for c, d in zip(candidates, dups) if d is not None], "a near-copy of")
        if not novel:
            return []
        kept, dropped = self.semantic.filter(novel)
        self._log(dropped, "too close in meaning to")
        self.lexical.record(kept)
        return kept

    def _log(self, dropped, how: str) -> None:
        for text, dup in dropped:
            log.debug("questions: %s: dropped %r, %s %r", self.topic, text, how, dup)
