"""What the Dataset view shows: the topic → subtopic → question tree of the data files, each
question marked by its answer, and the answer (with its reasoning) of the one selected.

Markers: `[a]` answered and usable, `[x]` answered but excluded (the reason beside it), `[ ]` not
answered yet. Topics come in the configuration's order, then topics found only in the files.
An answer whose question is gone (an orphan) is listed under its subtopic's name as `[o]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from overbrainer.dataset.jsonl import read_records
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.dataset.records import Example, Question, Subtopic

ANSWERED, EXCLUDED, PENDING, ORPHAN = "[a]", "[x]", "[ ]", "[o]"


@dataclass
class QuestionNode:
    id: str
    text: str
    answer: Any = None  # dataset.records.Example, or None

    @property
    def marker(self) -> str:
        if self.answer is None:
            return PENDING
        return ANSWERED if self.answer.meta.excluded is None else EXCLUDED

    def label(self) -> str:
        reason = f" ({self.answer.meta.excluded})" if self.marker == EXCLUDED else ""
        return f"{self.marker} {one_line(self.text)}{reason}"


@dataclass
class SubtopicNode:
    id: str | None  # None: a subtopic known only from orphaned answers
    name: str
    questions: list[QuestionNode] = field(default_factory=list)
    orphans: list[Any] = field(default_factory=list)  # answers without a question

    def label(self) -> str:
        answered = sum(q.answer is not None for q in self.questions)
        return f"{self.name} ({answered}/{len(self.questions)} answered)"


@dataclass
class TopicNode:
    name: str
    subtopics: list[SubtopicNode] = field(default_factory=list)

    def label(self) -> str:
        questions = sum(len(s.questions) for s in self.subtopics)
        return f"{self.name} ({len(self.subtopics)} subtopics, {questions} questions)"


def one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def build(project_dir: Path, topic_names: Iterable[str] = ()) -> list[TopicNode]:
    """The tree of the project's data files now (reads only)."""
    paths = ProjectPaths(project_dir)
    topics: dict[str, TopicNode] = {n: TopicNode(n) for n in topic_names}
    subtopics: dict[str, SubtopicNode] = {}
    node: SubtopicNode | None
    for s in read_records(paths.subtopics, Subtopic):
        node = subtopics[s.id] = SubtopicNode(s.id, s.name)
        topics.setdefault(s.topic, TopicNode(s.topic)).subtopics.append(node)
    answers = {a.id: a for a in read_records(paths.answers, Example)}
    asked = set()
    for q in read_records(paths.questions, Question):
        asked.add(q.id)
        node = subtopics.get(q.subtopic_id)
        if node is None:  # its subtopic was rejected or lost: keep it visible under its name
            node = subtopics[q.subtopic_id] = SubtopicNode(q.subtopic_id, q.subtopic)
            topics.setdefault(q.topic, TopicNode(q.topic)).subtopics.append(node)
        node.questions.append(QuestionNode(q.id, q.text, answers.get(q.id)))
    for a in answers.values():
        if a.id not in asked:
            _orphan_home(topics, a).orphans.append(a)
    return list(topics.values())


def _orphan_home(topics: dict[str, TopicNode], answer: Any) -> SubtopicNode:
    topic = topics.setdefault(answer.topic, TopicNode(answer.topic))
    for s in topic.subtopics:
        if s.name == answer.subtopic:
            return s
    node = SubtopicNode(None, answer.subtopic)
    topic.subtopics.append(node)
    return node


def question_of(example: Any) -> str:
    return next((m.content for m in example.messages if m.role == "user"), "")


def detail(item: Any) -> str:
    """The text beside the tree for a selected node: a question with its answer and reasoning, an
    orphaned answer, a subtopic or a topic."""
    if isinstance(item, QuestionNode):
        head = [f"question {item.id}", "", item.text, ""]
        return "\n".join(head + (answer_text(item.answer) if item.answer is not None else ["not answered yet"]))
    if isinstance(item, SubtopicNode):
        what = f"subtopic {item.id}" if item.id else "subtopic (no longer in subtopics.jsonl)"
        return "\n".join([what, "", item.name, "", f"{len(item.questions)} questions, "
                          f"{sum(q.answer is not None for q in item.questions)} answered, "
                          f"{len(item.orphans)} orphaned answers"])
    if isinstance(item, TopicNode):
        return "\n".join([f"topic {item.name}", "", f"{len(item.subtopics)} subtopics"])
    if item is not None:  # an orphaned answer
        return "\n".join([f"answer {item.id} (its question is gone)", "", question_of(item), ""] + answer_text(item))
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
        return item.id, (f"subtopic {item.id} ({item.name}) with its {len(item.questions)} questions and "
                         "their answers; the next `subtopics` run writes another in its place (a paid request)")
    if item is not None and not isinstance(item, (SubtopicNode, TopicNode)):
        return item.id, f"orphaned answer {item.id} (its question is gone)"
    return None
