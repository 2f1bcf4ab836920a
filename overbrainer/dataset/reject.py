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

from overbrainer.errors import OverbrainerError
from overbrainer.support.words import plural

from .jsonl import Appender, StagedRewrite, read_records
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
    paths = ProjectPaths(project_dir)
    item_id = item_id.strip().lower()
    subtopics = read_records(paths.subtopics, Subtopic)
    questions = read_records(paths.questions, Question)
    answers = read_records(paths.answers, Example)
    rejected = read_records(paths.rejected, Rejected)
    already = {(r.kind, r.id) for r in rejected}

    record: Rejected | None = None
    subtopic = next((s for s in subtopics if s.id == item_id), None)
    question = next((q for q in questions if q.id == item_id), None)
    if subtopic is not None:
        gone_questions = {q.id for q in questions if q.subtopic_id == item_id}
        result = Rejection("subtopic", item_id, subtopic.topic, subtopic.name)
        record = Rejected.subtopic(subtopic)
        keep_subtopics = [s for s in subtopics if s.id != item_id]
    elif question is not None:
        gone_questions = {item_id}
        result = Rejection("question", item_id, question.topic, question.text)
        record = Rejected.question(question)
        keep_subtopics = subtopics
    else:
        answer = next((a for a in answers if a.id == item_id), None)
        earlier = next((r for r in rejected if r.id == item_id), None)
        if answer is None and earlier is not None:
            return Rejection(earlier.kind, item_id, earlier.topic, earlier.name or earlier.text or "",
                             dry_run=dry_run, already=True)
        if answer is None:
            raise OverbrainerError(f"no subtopic, question or answer has the ID {item_id} in {paths.data}")
        gone_questions = set()
        result = Rejection("answer", item_id, answer.topic, answer.subtopic)
        keep_subtopics = subtopics
    keep_questions = [q for q in questions if q.id not in gone_questions]
    gone_answers = gone_questions | {item_id}
    keep_answers = [a for a in answers if a.id not in gone_answers]
    result.subtopics = len(subtopics) - len(keep_subtopics)
    result.questions = len(questions) - len(keep_questions)
    result.answers = len({a.id for a in answers}) - len({a.id for a in keep_answers})  # answers, not records
    result.recorded = record is not None and (record.kind, record.id) not in already
    result.dry_run = dry_run
    if dry_run:
        return result

    _apply(paths, result, record, keep_subtopics, keep_questions, keep_answers)
    return result


def _apply(paths: ProjectPaths, result: Rejection, record: Rejected | None, keep_subtopics: list,
           keep_questions: list, keep_answers: list) -> None:
    """Rewrite the files that lose records (all staged, then renamed together) and note the
    rejection in rejected.jsonl; on any failure nothing is renamed."""
    staged = StagedRewrite()
    try:
        if result.subtopics:
            staged.stage(paths.subtopics, keep_subtopics)
        if result.questions:
            staged.stage(paths.questions, keep_questions)
        if result.answers:
            staged.stage(paths.answers, keep_answers)
        if result.recorded:
            with Appender(paths.rejected) as appender:
                appender.append(record)
    except BaseException:
        staged.discard()
        raise
    staged.commit()
