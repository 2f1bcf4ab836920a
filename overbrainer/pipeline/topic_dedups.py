"""The deduplicators of the `questions` stage, one per topic, each alive only while the topic has
a subtopic being filled: made by the first of its subtopics to start (seeded then with the
topic's stored and rejected questions, read again at the offsets the stage's counting pass
noted), dropped when its last subtopic ends. The stage sends its subtopics topic by topic, so at
`concurrency` subtopics in flight few topics are alive at once: memory holds their questions,
not the dataset's (docs/stages.md#deduplication).

Seeding runs on the worker that needs it, under the topic's own lock (other topics go on). A
failure to seed (the embedder's request) fails that subtopic, and every later one of the topic
with the same error, without asking the embedder again.

A topic's deduplicator (`TopicDedup`): lexical first, then the optional embedding filter on what
survived. One lock per topic, held by the caller across the whole decision (embedding request
included) and the append, so parallel subtopics never accept the same question twice. A dropped
candidate is logged at debug level with the text it duplicated.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

from overbrainer.dataset.ids import packed
from overbrainer.dataset.jsonl import LineReader
from overbrainer.dataset.quality.dedup import LexicalDedup
from overbrainer.dataset.quality.embed_dedup import Embed, EmbeddingDedup
from overbrainer.dataset.records import Question

log = logging.getLogger(__name__)


class TopicState:
    """A topic being filled: its deduplicator and the IDs of its known questions (stored,
    rejected, appended), both guarded by `dedup.lock`."""

    def __init__(self) -> None:
        self.build_lock = threading.Lock()
        self.dedup: TopicDedup | None = None
        self.known: set[Any] = set()
        self.error: BaseException | None = None


class TopicDedups:
    """`acquire(job)` before a subtopic's first batch (its topic's state, built on first use),
    `release(job)` once it is done, whatever its end. `offsets`: per topic, the byte offsets of
    its stored questions' lines in `questions_path`; `rejected`: per topic, its rejected
    questions; `partial`: the jobs of subtopics that have questions already (their texts are
    read while their topic is seeded: the prompt lists them). `make(topic)` makes an empty
    TopicDedup."""

    def __init__(self, questions_path: Path, jobs: list[Any], offsets: dict[str, array[int]],
                 rejected: dict[str, list[Any]], make: Callable[[str], TopicDedup]) -> None:
        self._path = questions_path
        self._remaining = Counter(j.topic.name for j in jobs)
        self._offsets = offsets
        self._rejected = rejected
        self._partial: dict[str, dict[str, Any]] = {}  # questions' jobs by subtopic id
        for j in jobs:
            if j.have:
                self._partial.setdefault(j.topic.name, {})[j.subtopic.id] = j
        self._make = make
        self._lock = threading.Lock()
        self._states: dict[str, TopicState] = {}

    def acquire(self, job: Any) -> TopicState:
        name = job.topic.name
        with self._lock:
            state = self._states.get(name)
            if state is None:
                state = self._states[name] = TopicState()
        with state.build_lock:
            if state.dedup is None and state.error is None:
                try:
                    self._build(name, state)
                except Exception as e:  # noqa: BLE001 - every subtopic of the topic fails with it
                    state.error = e
            if state.error is not None:
                raise state.error
        return state

    def release(self, job: Any) -> None:
        name = job.topic.name
        with self._lock:
            self._remaining[name] -= 1
            if self._remaining[name] <= 0:
                self._states.pop(name, None)
                self._offsets.pop(name, None)
                self._rejected.pop(name, None)

    def alive(self) -> int:
        """Topics whose deduplicator is held (for tests and benchmarks)."""
        with self._lock:
            return sum(1 for s in self._states.values() if s.dedup is not None)

    def _build(self, name: str, state: TopicState) -> None:
        dedup = self._make(name)
        partial = self._partial.pop(name, {})
        with LineReader(self._path) as reader:
            for offset in self._offsets.get(name, ()):
                q = reader.record_at(offset, Question)
                state.known.add(packed(q.id))
                dedup.remember(q.text)
                job = partial.get(q.subtopic_id)
                if job is not None:
                    job.accepted.append(q.text)
        for r in self._rejected.get(name, ()):
            state.known.add(packed(r.id))
            dedup.remember(r.text)
        dedup.seed_meanings()
        state.dedup = dedup


class TopicDedup:
    """`with dedup.lock: kept = dedup.filter(candidates)`; every known text `remember`ed, then
    `seed_meanings()` once, before first use.

    `embed(texts) -> vectors` (None without an embedder) runs the embedder with its retries."""

    def __init__(self, topic: str, dedup_threshold: float, embed: Embed | None = None,
                 embedding_threshold: float = 0.9):
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

    def _log(self, dropped: Iterable[tuple[str, str]], how: str) -> None:
        for text, dup in dropped:
            log.debug("questions: %s: dropped %r, %s %r", self.topic, text, how, dup)
