"""`dataset reject ID`: delete a subtopic or a question with what depends on it, and record it in
rejected.jsonl so no stage generates it again.

- subtopic ⇒ the subtopic, its questions and their answers go; the subtopic is recorded;
- question ⇒ the question and its answer go; the question is recorded;
- an ID found only in answers.jsonl (an orphaned answer) ⇒ only the answer goes.

Touched files are staged (`.<name>.staged.tmp`), the rejection is appended, then the staged
files are renamed back to back. train.jsonl/eval.jsonl are left to the next `split`.
The caller holds the project lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from overbrainer.errors import UsageError
from overbrainer.support.fmt import plural

from .jsonl import Appender, StagedRewrite, iter_records
from .paths import ProjectPaths
from .records import Example, Question, Rejected, Subtopic


@dataclass
class Rejection:
    kind: str  # subtopic | question | answer
    id: str
    topic: str
    label: str  # the subtopic name or the question text
    subtopics: int = 0
    questions: int = 0
    answers: int = 0
    recorded: bool = False  # a line was appended to rejected.jsonl
    dry_run: bool = False
    already: bool = False  # rejected before: nothing was left to remove or record

    def line(self) -> str:
        if self.already:
            return f"{self.kind} {self.id} of topic {self.topic} was already rejected: nothing to do"
        verb = "would reject" if self.dry_run else "rejected"
        if self.kind == "answer":
            verb = "would remove" if self.dry_run else "removed"
            return f"{verb} answer {self.id} of topic {self.topic}"
        removed = ", ".join((plural(self.subtopics, "subtopic"), plural(self.questions, "question"),
                             plural(self.answers, "answer")))
        return (f"{verb} {self.kind} {self.id} of topic {self.topic}: removed {removed}; "
                "run split to update train and eval")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "id": self.id, "topic": self.topic, "label": self.label,
                "subtopics": self.subtopics, "questions": self.questions, "answers": self.answers,
                "recorded": self.recorded, "dry_run": self.dry_run, "already_rejected": self.already}


def reject(project_dir, item_id: str, *, dry_run: bool = False) -> Rejection:
    """Reject `item_id` (see the module). Every file is streamed: memory holds the IDs that go
    (a subtopic's questions), never the records."""
    paths = ProjectPaths(project_dir)
    item_id = item_id.strip().lower()
    subtopic, subtopic_lines = _first(paths.subtopics, Subtopic, item_id)
    question, under = _scan_questions(paths, item_id)
    record: Rejected | None = None
    if subtopic is not None:
        gone_questions = under
        result = Rejection("subtopic", item_id, subtopic.topic, subtopic.name, subtopics=subtopic_lines)
        record = Rejected.subtopic(subtopic)
    elif question is not None:
        gone_questions = {item_id}
        result = Rejection("question", item_id, question.topic, question.text)
        record = Rejected.question(question)
    else:
        gone_questions = set()
    gone_answers = gone_questions | {item_id}
    answer, answered = _scan_answers(paths, item_id, gone_answers)
    earlier, recorded_before = _scan_rejected(paths, item_id, record)
    if record is None:
        if answer is None and earlier is not None:
            return Rejection(earlier.kind, item_id, earlier.topic, earlier.name or earlier.text or "",
                             dry_run=dry_run, already=True)
        if answer is None:
            raise UsageError(f"no subtopic, question or answer has the ID {item_id} in {paths.data}")
        result = Rejection("answer", item_id, answer.topic, answer.subtopic)
    if gone_questions:
        result.questions = sum(1 for q in iter_records(paths.questions, Question) if q.id in gone_questions)
    result.answers = answered  # answers, not lines
    result.recorded = record is not None and not recorded_before
    result.dry_run = dry_run
    if dry_run:
        return result
    _apply(paths, result, record, item_id, gone_questions, gone_answers)
    return result


def _first(path, cls, item_id: str) -> tuple[Any, int]:
    """The first record of `path` with the ID, and how many lines have it."""
    first, lines = None, 0
    for r in iter_records(path, cls):
        if r.id == item_id:
            lines += 1
            if first is None:
                first = r
    return first, lines


def _scan_questions(paths: ProjectPaths, item_id: str) -> tuple[Question | None, set[str]]:
    """The first question with the ID, and the IDs of the questions of subtopic `item_id`."""
    first, under = None, set()
    for q in iter_records(paths.questions, Question):
        if q.id == item_id and first is None:
            first = q
        if q.subtopic_id == item_id:
            under.add(q.id)
    return first, under


def _scan_answers(paths: ProjectPaths, item_id: str, gone: set[str]) -> tuple[Example | None, int]:
    """The first answer with the ID, and how many of the `gone` IDs have an answer."""
    first, answered = None, set()
    for a in iter_records(paths.answers, Example):
        if a.id in gone:
            answered.add(a.id)
            if first is None and a.id == item_id:
                first = a
    return first, len(answered)


def _scan_rejected(paths: ProjectPaths, item_id: str, record: Rejected | None) -> tuple[Rejected | None, bool]:
    """The first rejection of the ID, and whether `record` is already in rejected.jsonl."""
    first, recorded = None, False
    for r in iter_records(paths.rejected, Rejected):
        if r.id == item_id and first is None:
            first = r
        recorded = recorded or (record is not None and (r.kind, r.id) == (record.kind, record.id))
    return first, recorded


def _apply(paths: ProjectPaths, result: Rejection, record: Rejected | None, item_id: str,
           gone_questions: set[str], gone_answers: set[str]) -> None:
    """Rewrite the files that lose records (each streamed into its staged file, all renamed
    together) and note the rejection in rejected.jsonl; on any failure nothing is renamed."""
    staged = StagedRewrite()
    try:
        if result.subtopics:
            _stage_without(staged, paths.subtopics, Subtopic, {item_id})
        if result.questions:
            _stage_without(staged, paths.questions, Question, gone_questions)
        if result.answers:
            _stage_without(staged, paths.answers, Example, gone_answers)
        if result.recorded:
            with Appender(paths.rejected) as appender:
                appender.append(record)
    except BaseException:
        staged.discard()
        raise
    staged.commit()


def _stage_without(staged: StagedRewrite, path, cls, gone: set[str]) -> None:
    with staged.staging(path) as out:
        for r in iter_records(path, cls):
            if r.id not in gone:
                out.append(r)
