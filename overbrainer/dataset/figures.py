"""The data files in figures: per topic, what the stages need to decide what is missing and what
`--plan` needs to price it, taken by one streaming pass over subtopics.jsonl, questions.jsonl and
answers.jsonl (`scan`). Memory during the pass: a compact key per question and per answer ID and
a count per subtopic, never a record's text; the figures themselves are a few numbers per topic.

The stages keep the figures up to date as they append (`note_*`), so that dataset/state.py can
save them for the next command: a rerun with nothing to do then reads no data file at all.
`exact` says whether such updates stay exact: they do while no question points at a subtopic
that subtopics.jsonl lacks, no answer at a question that questions.jsonl lacks, and no ID stands
twice in subtopics.jsonl or questions.jsonl (a new subtopic then has no question, a new question
no answer). Otherwise a stage that wrote forgets the saved figures and the next command scans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .ids import packed
from .jsonl import iter_records
from .paths import ProjectPaths
from .records import Example, Question, Subtopic


@dataclass
class TopicFigures:
    """One topic's figures. `fill`: how many subtopic records hold each number of questions
    (question records with the subtopic's ID), 0 included. The `distinct` figures count each
    question ID once (its first record), as the answers stage asks it once."""

    subtopics: int = 0
    subtopic_bytes: int = 0
    fill: dict[int, int] = field(default_factory=dict)
    questions: int = 0
    question_bytes: int = 0
    distinct: int = 0
    distinct_bytes: int = 0
    unanswered: int = 0
    unanswered_bytes: int = 0
    retry: int = 0  # distinct questions whose latest answer is excluded
    retry_bytes: int = 0

    def short_of(self, target: int) -> int:
        """Subtopic records holding fewer than `target` questions."""
        return sum(k for n, k in self.fill.items() if n < target)

    def to_json(self) -> dict:
        out: dict[str, Any] = {k: getattr(self, k) for k in _TOPIC_FIELDS}
        out["fill"] = {str(n): k for n, k in sorted(self.fill.items()) if k}
        return out

    @classmethod
    def from_json(cls, data: dict) -> "TopicFigures":
        fill = {int(n): int(k) for n, k in data["fill"].items()}
        return cls(fill=fill, **{k: int(data[k]) for k in _TOPIC_FIELDS})


_TOPIC_FIELDS = ("subtopics", "subtopic_bytes", "questions", "question_bytes", "distinct", "distinct_bytes",
                 "unanswered", "unanswered_bytes", "retry", "retry_bytes")


@dataclass
class Figures:
    """The figures of the whole dataset: per topic (every topic the files name), and over all
    answers: `answers` (distinct IDs), `answer_tokens` (latest answers that used tokens: how
    many, input and output tokens in all), `orphan_answers` (answer IDs no question has)."""

    topics: dict[str, TopicFigures] = field(default_factory=dict)
    answers: int = 0
    answer_tokens: tuple[int, int, int] = (0, 0, 0)
    orphan_answers: int = 0
    orphan_questions: int = 0
    duplicates: int = 0  # records whose ID an earlier record of the same file has

    def get(self, name: str) -> TopicFigures:
        """A topic's figures (empty ones, not kept, for a topic the files do not name)."""
        return self.topics.get(name) or TopicFigures()

    def topic(self, name: str) -> TopicFigures:
        """A topic's figures, made (and kept) when the files do not name it yet."""
        figures = self.topics.get(name)
        if figures is None:
            figures = self.topics[name] = TopicFigures()
        return figures

    @property
    def exact(self) -> bool:
        return not (self.orphan_answers or self.orphan_questions or self.duplicates)

    # --- what the stages appended ------------------------------------------------------

    def note_subtopic(self, topic: str, name: str) -> None:
        t = self.topic(topic)
        t.subtopics += 1
        t.subtopic_bytes += len(name.encode())
        t.fill[0] = t.fill.get(0, 0) + 1

    def note_questions(self, topic: str, before: int, texts: list[str]) -> None:
        """A subtopic that held `before` questions got `texts` (new IDs, not answered)."""
        if not texts:
            return
        t = self.topic(topic)
        left = t.fill.get(before, 0) - 1
        if left:
            t.fill[before] = left
        else:
            t.fill.pop(before, None)
        after = before + len(texts)
        t.fill[after] = t.fill.get(after, 0) + 1
        size = sum(len(text.encode()) for text in texts)
        t.questions += len(texts)
        t.distinct += len(texts)
        t.unanswered += len(texts)
        t.question_bytes += size
        t.distinct_bytes += size
        t.unanswered_bytes += size

    def note_answer(self, topic: str, text: str, meta) -> None:
        """The first answer of a question that had none."""
        t = self.topic(topic)
        size = len(text.encode())
        t.unanswered -= 1
        t.unanswered_bytes -= size
        if meta.excluded is not None:
            t.retry += 1
            t.retry_bytes += size
        self.answers += 1
        if meta.input_tokens or meta.output_tokens:
            n, i, o = self.answer_tokens
            self.answer_tokens = (n + 1, i + meta.input_tokens, o + meta.output_tokens)

    # --- on disk -------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {"topics": {name: t.to_json() for name, t in sorted(self.topics.items())},
                "answers": self.answers, "answer_tokens": list(self.answer_tokens),
                "orphan_answers": self.orphan_answers, "orphan_questions": self.orphan_questions,
                "duplicates": self.duplicates}

    @classmethod
    def from_json(cls, data: dict) -> "Figures":
        n, i, o = (int(v) for v in data["answer_tokens"])
        return cls({name: TopicFigures.from_json(t) for name, t in data["topics"].items()},
                   int(data["answers"]), (n, i, o), int(data["orphan_answers"]),
                   int(data["orphan_questions"]), int(data["duplicates"]))


# An answer's latest line, packed in one int: excluded (1 bit), then input and output tokens.
_TOKEN_BITS = 48


def _pack(meta) -> int:
    return (((meta.input_tokens << _TOKEN_BITS) | meta.output_tokens) << 1) | (meta.excluded is not None)


def scan(paths: ProjectPaths) -> Figures:
    """The figures of the project's data files, in one streaming pass over each (strict: a bad
    record is the same error as any reader's)."""
    figures = Figures()
    latest = _answers(paths, figures)
    per_subtopic = _questions(paths, figures, latest)
    _subtopics(paths, figures, per_subtopic)
    return figures


def _answers(paths: ProjectPaths, figures: Figures) -> dict:
    latest: dict = {}
    for ex in iter_records(paths.answers, Example):
        latest[packed(ex.id)] = _pack(ex.meta)
    figures.answers = len(latest)
    n = i = o = 0
    mask = (1 << _TOKEN_BITS) - 1
    for line in latest.values():
        tokens = line >> 1
        if tokens:
            n += 1
            i += tokens >> _TOKEN_BITS
            o += tokens & mask
    figures.answer_tokens = (n, i, o)
    return latest


def _questions(paths: ProjectPaths, figures: Figures, latest: dict) -> dict:
    """Question figures; returns the number of question records per subtopic ID."""
    per_subtopic: dict[str, int] = {}
    seen: set = set()
    matched = 0
    for q in iter_records(paths.questions, Question):
        t = figures.topic(q.topic)
        size = len(q.text.encode())
        t.questions += 1
        t.question_bytes += size
        per_subtopic[q.subtopic_id] = per_subtopic.get(q.subtopic_id, 0) + 1
        key = packed(q.id)
        if key in seen:
            figures.duplicates += 1
            continue
        seen.add(key)
        t.distinct += 1
        t.distinct_bytes += size
        line = latest.get(key)
        if line is None:
            t.unanswered += 1
            t.unanswered_bytes += size
            continue
        matched += 1
        if line & 1:
            t.retry += 1
            t.retry_bytes += size
    figures.orphan_answers = len(latest) - matched
    return per_subtopic


def _subtopics(paths: ProjectPaths, figures: Figures, per_subtopic: dict) -> None:
    seen: set = set()
    held = 0
    for s in iter_records(paths.subtopics, Subtopic):
        t = figures.topic(s.topic)
        t.subtopics += 1
        t.subtopic_bytes += len(s.name.encode())
        have = per_subtopic.get(s.id, 0)
        t.fill[have] = t.fill.get(have, 0) + 1
        if s.id in seen:
            figures.duplicates += 1
            continue
        seen.add(s.id)
        held += have
    figures.orphan_questions = sum(per_subtopic.values()) - held
