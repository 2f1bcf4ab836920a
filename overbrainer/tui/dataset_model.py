"""What the Dataset view shows: the topic → subtopic → question tree of the data files, each
question marked by its answer, and the answer (with its reasoning) of the one selected.

Markers: `[a]` answered and usable, `[x]` answered but excluded (the reason beside it), `[ ]` not
answered yet. Topics come in the configuration's order, then topics found only in the files.
An answer whose question is gone (an orphan) is listed under its subtopic's name as `[o]`; a
subtopic known only from questions or orphans (its record gone) is listed after the others (a
topic known only from answers, its questions and subtopics all gone, is not listed).

Memory stays flat in the dataset's size: nothing holds the records. The topics are counted in
one streaming pass; a topic's subtopics and a subtopic's questions are read when the view opens
them, `PAGE` at a time (a `More` node brings the next page), each read a streaming pass of the
files that keeps the page and the IDs of one topic's subtopics or of one subtopic's questions.
An answer is kept as the byte offset of its line (the latest line of its question wins) and read
again, alone, when its question is selected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from overbrainer.dataset.ids import packed
from overbrainer.dataset.jsonl import LineReader, iter_records
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.dataset.records import Example, Question, Subtopic

ANSWERED, EXCLUDED, PENDING, ORPHAN = "[a]", "[x]", "[ ]", "[o]"
PAGE = 100  # the children a node shows at once; a `More` node brings the next ones


@dataclass
class TopicNode:
    name: str
    subtopics: int = 0
    questions: int = 0

    def label(self) -> str:
        return f"{self.name} ({self.subtopics} subtopics, {self.questions} questions)"


@dataclass
class SubtopicNode:
    topic: str
    id: str | None  # None: a subtopic known only from orphaned answers
    name: str
    questions: int = 0
    answered: int = 0
    orphans: int = 0  # answers without a question

    def label(self) -> str:
        return f"{self.name} ({self.answered}/{self.questions} answered)"


@dataclass
class QuestionNode:
    id: str
    text: str
    answer: int | None = None  # the byte offset of its answer's line in answers.jsonl
    excluded: str | None = None  # why its answer is excluded

    @property
    def marker(self) -> str:
        if self.answer is None:
            return PENDING
        return ANSWERED if self.excluded is None else EXCLUDED

    def label(self) -> str:
        reason = f" ({self.excluded})" if self.marker == EXCLUDED else ""
        return f"{self.marker} {one_line(self.text)}{reason}"


@dataclass
class OrphanNode:
    """An answer whose question is gone."""
    id: str
    question: str  # the text its user message holds
    answer: int  # the byte offset of its line in answers.jsonl

    def label(self) -> str:
        return f"{ORPHAN} {one_line(self.question)}"


@dataclass
class More:
    """The rest of `parent`'s children, from `start` of `total`."""
    parent: Any  # a TopicNode or a SubtopicNode
    start: int
    total: int

    def label(self) -> str:
        return f"… {self.total - self.start} more (Enter shows the next {min(PAGE, self.total - self.start)})"


@dataclass
class Page:
    """Children of a node from `start`: `items`, then `more` when some are left."""
    items: list[Any] = field(default_factory=list)
    more: More | None = None


def one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def topics(project_dir: Path, topic_names: Iterable[str] = ()) -> list[TopicNode]:
    """Every topic with its counts (one streaming pass of subtopics.jsonl and questions.jsonl)."""
    paths = ProjectPaths(project_dir)
    found: dict[str, TopicNode] = {n: TopicNode(n) for n in topic_names}
    for s in iter_records(paths.subtopics, Subtopic):
        found.setdefault(s.topic, TopicNode(s.topic)).subtopics += 1
    for q in iter_records(paths.questions, Question):
        found.setdefault(q.topic, TopicNode(q.topic)).questions += 1
    return list(found.values())


class _Listing:
    """A node's children as they are found, in order: their count, and those of the page that
    starts at `start`, by key."""

    def __init__(self, start: int) -> None:
        self.start, self.total = start, 0
        self.page: dict[Any, Any] = {}

    def add(self, key: Any, node: Any) -> None:
        if self.start <= self.total < self.start + PAGE:
            self.page[key] = node
        self.total += 1


def subtopics(project_dir: Path, topic: TopicNode, start: int = 0) -> Page:
    """`topic`'s subtopics from `start` (at most PAGE), with their counts: its subtopic records in
    file order, then those known only from questions, then only from orphaned answers."""
    paths = ProjectPaths(project_dir)
    name = topic.name
    ids: set[str] = set()  # the topic's subtopic IDs and names: bounded by its subtopics, not the dataset
    names: set[str] = set()
    listing = _Listing(start)  # the page's subtopics by ID (or name, for one known only from answers)
    for s in iter_records(paths.subtopics, Subtopic):
        if s.topic == name and s.id not in ids:
            ids.add(s.id)
            names.add(s.name)
            listing.add(s.id, SubtopicNode(name, s.id, s.name))
    asked: dict[int | str, SubtopicNode] = {}  # the page's question IDs
    for q in iter_records(paths.questions, Question):
        if q.topic != name:
            continue
        if q.subtopic_id not in ids:  # its subtopic record is gone: keep it visible under its name
            ids.add(q.subtopic_id)
            names.add(q.subtopic)
            listing.add(q.subtopic_id, SubtopicNode(name, q.subtopic_id, q.subtopic))
        node = listing.page.get(q.subtopic_id)
        if node is not None:
            node.questions += 1
            asked[packed(q.id)] = node
    _count_answers(paths, name, names, listing, asked)
    return _page(topic, list(listing.page.values()), start, listing.total)


def _count_answers(paths: ProjectPaths, topic: str, names: set[str], listing: _Listing,
                   asked: dict[int | str, SubtopicNode]) -> None:
    """The page's answered questions and orphaned answers (one of each ID), and the subtopics known
    only from orphaned answers, added to `listing` (and `names`)."""
    answered: set[int | str] = set()
    orphans: set[tuple[str, int | str]] = set()  # (subtopic name, answer ID) of the page's orphans
    by_name = {n.name: n for n in listing.page.values()}
    for a in iter_records(paths.answers, Example):
        if a.topic != topic:
            continue
        key = packed(a.id)
        node = asked.get(key)
        if node is not None:
            if key not in answered:
                answered.add(key)
                node.answered += 1
            continue
        if a.subtopic not in names:  # only orphaned answers know this subtopic
            names.add(a.subtopic)
            listing.add(a.subtopic, SubtopicNode(topic, None, a.subtopic))
            by_name = {n.name: n for n in listing.page.values()}
        node = by_name.get(a.subtopic)
        if node is not None and (a.subtopic, key) not in orphans:
            orphans.add((a.subtopic, key))
            node.orphans += 1


def questions(project_dir: Path, subtopic: SubtopicNode, start: int = 0) -> Page:
    """`subtopic`'s questions from `start` (at most PAGE) with their answers' state, then its
    orphaned answers (answers of its name whose question is gone)."""
    paths = ProjectPaths(project_dir)
    ids: set[int | str] = set()  # the subtopic's question IDs: bounded by its questions, not the dataset
    listing = _Listing(start)  # the page's questions, then orphans, by packed ID
    if subtopic.id is not None:
        for q in iter_records(paths.questions, Question):
            key = packed(q.id)
            if q.subtopic_id == subtopic.id and q.topic == subtopic.topic and key not in ids:
                ids.add(key)
                listing.add(key, QuestionNode(q.id, q.text))
    orphans: set[int | str] = set()
    for offset, a in iter_records(paths.answers, Example, offsets=True):
        if a.topic != subtopic.topic:
            continue
        key = packed(a.id)
        node = listing.page.get(key)
        if isinstance(node, QuestionNode):  # the latest line of a question is its answer
            node.answer, node.excluded = offset, a.excluded
        elif key in ids or a.subtopic != subtopic.name:
            continue
        elif node is not None:
            node.answer = offset
        elif key not in orphans:
            orphans.add(key)
            listing.add(key, OrphanNode(a.id, question_of(a), offset))
    return _page(subtopic, list(listing.page.values()), start, listing.total)


def _page(parent: Any, items: list[Any], start: int, total: int) -> Page:
    end = start + len(items)
    return Page(items, More(parent, end, total) if end < total else None)


def question_of(example: Any) -> str:
    return next((m.content for m in example.messages if m.role == "user"), "")


def answer_of(project_dir: Path, item: QuestionNode | OrphanNode) -> Example | None:
    """The answer of a question (or an orphan), read again at its line; None: not answered."""
    if item.answer is None:
        return None
    with LineReader(ProjectPaths(project_dir).answers) as reader:
        return reader.record_at(item.answer, Example)


def detail(project_dir: Path, item: Any) -> str:
    """The text beside the tree for a selected node: a question with its answer and reasoning, an
    orphaned answer, a subtopic or a topic."""
    if isinstance(item, QuestionNode):
        head = [f"question {item.id}", "", item.text, ""]
        example = answer_of(project_dir, item)
        return "\n".join(head + (answer_text(example) if example is not None else ["not answered yet"]))
    if isinstance(item, OrphanNode):
        example = answer_of(project_dir, item)
        assert example is not None
        return "\n".join([f"answer {item.id} (its question is gone)", "", item.question, ""] + answer_text(example))
    if isinstance(item, SubtopicNode):
        what = f"subtopic {item.id}" if item.id else "subtopic (no longer in subtopics.jsonl)"
        return "\n".join([what, "", item.name, "", f"{item.questions} questions, {item.answered} answered, "
                          f"{item.orphans} orphaned answers"])
    if isinstance(item, TopicNode):
        return "\n".join([f"topic {item.name}", "", f"{item.subtopics} subtopics, {item.questions} questions"])
    if isinstance(item, More):
        return item.label()
    return ""


def answer_text(example: Any) -> list[str]:
    meta = example.meta
    facts = f"{meta.model}, {meta.input_tokens} in / {meta.output_tokens} out, finish {meta.finish_reason}, " \
            f"reasoning {meta.reasoning_kind}"
    if meta.excluded:
        facts += f"; excluded: {meta.excluded}"
    reply = next((m for m in reversed(example.messages) if m.role == "assistant"), None)
    out = [facts, ""]
    if reply is not None and reply.reasoning_content:
        out += ["── reasoning ──", reply.reasoning_content, ""]
    out += ["── answer ──", reply.content if reply is not None else "(no answer)"]
    return out


def rejectable(item: Any) -> tuple[str, str] | None:
    """(ID, what rejecting it removes) for a subtopic, a question or an orphaned answer; None for
    a topic."""
    if isinstance(item, QuestionNode):
        return item.id, (f"question {item.id} and its answer; the next `questions` run writes another "
                         "in its place (a paid request)")
    if isinstance(item, SubtopicNode) and item.id is not None:
        return item.id, (f"subtopic {item.id} ({item.name}) with its {item.questions} questions and "
                         "their answers; the next `subtopics` run writes another in its place (a paid request)")
    if isinstance(item, OrphanNode):
        return item.id, f"orphaned answer {item.id} (its question is gone)"
    return None
