"""What the LLM stages still have to ask, read from the data files without sending anything: the
requests, the items they are for, the size of their prompts. `--plan` prices it
(pipeline/plan.py), and a command under a spend cap learns from it which roles will send.

A stage whose input an earlier stage of the same command has not generated yet (questions of
subtopics still to come, answers of questions still to come) counts from the configured numbers
(`subtopics`, `questions_per_subtopic`, `question_batch_size`): such a count is `estimated`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from overbrainer.dataset.records import Example, Question, Subtopic
from overbrainer.pipeline.answers import pending_questions
from overbrainer.pipeline.common import read

ROLES = {"subtopics": "generator", "questions": "generator", "answers": "parent"}
# A question's size in bytes when the project has none to measure yet.
QUESTION_BYTES = 100


@dataclass
class Need:
    """`requests` still to send for `items` items (topics, subtopics, questions), their prompts'
    bytes in all, and for the list stages the items their answers should hold."""

    stage: str
    requests: int = 0
    items: int = 0
    prompt_bytes: int = 0
    list_items: int = 0
    estimated: bool = False

    @property
    def role(self) -> str:
        return ROLES[self.stage]


@dataclass
class _Coming:
    """What the earlier stages of the command will add, per topic (configured counts)."""

    subtopics: dict[str, int] = field(default_factory=dict)
    questions: dict[str, int] = field(default_factory=dict)


def needs(ctx, stages: list[str], topics: list, *, force: bool = False,
          retry_excluded: bool = False) -> list[Need]:
    """The needs of `stages` (in order; `split` has none) for `topics`, each counting what the
    stages before it in the list will add. `force`: as if the selected topics' output of each
    stage were gone."""
    coming = _Coming()
    out = []
    for stage in stages:
        if stage == "subtopics":
            out.append(_subtopics(ctx, topics, force, coming))
        elif stage == "questions":
            out.append(_questions(ctx, topics, force, coming))
        elif stage == "answers":
            out.append(_answers(ctx, topics, force, retry_excluded, coming))
    return out


def _kept(records: list, topics: list, force: bool) -> list:
    names = {t.name for t in topics}
    return [r for r in records if not (force and r.topic in names)]


def _subtopics(ctx, topics: list, force: bool, coming: _Coming) -> Need:
    stored = _kept(read(ctx.paths.subtopics, Subtopic), topics, force)
    need = Need("subtopics")
    templates = None
    for t in topics:
        missing = t.subtopics - sum(1 for s in stored if s.topic == t.name)
        if missing <= 0:
            continue
        templates = templates or ctx.templates("subtopics.txt")
        prompt = templates.render("subtopics.txt", topic=t.name, description=t.description, count=missing)
        need.requests += 1
        need.items += 1
        need.prompt_bytes += len(prompt.encode())
        need.list_items += missing
        coming.subtopics[t.name] = missing
    return need


def _questions(ctx, topics: list, force: bool, coming: _Coming) -> Need:
    names = {t.name for t in topics}
    subtopics = [s for s in read(ctx.paths.subtopics, Subtopic) if s.topic in names]
    stored = _kept(read(ctx.paths.questions, Question), topics, force)
    size = _mean([len(q.text.encode()) for q in stored], QUESTION_BYTES) + 3  # "- " and a newline
    batch = max(1, ctx.pipeline.question_batch_size)
    need = Need("questions")
    templates = None
    for t in topics:
        jobs = [sum(1 for q in stored if q.subtopic_id == s.id) for s in subtopics if s.topic == t.name]
        jobs += [0] * coming.subtopics.get(t.name, 0)
        need.estimated |= t.name in coming.subtopics
        for have in jobs:
            missing = t.questions_per_subtopic - have
            if missing <= 0:
                continue
            templates = templates or ctx.templates("questions.txt")
            base = len(templates.render("questions.txt", topic=t.name, description=t.description, subtopic="",
                                        count=min(batch, missing), accepted=[]).encode())
            for k in range(-(-missing // batch)):  # each batch's prompt lists the questions so far
                need.prompt_bytes += base + (have + k * batch) * size
                need.requests += 1
            need.items += 1
            need.list_items += missing
            coming.questions[t.name] = coming.questions.get(t.name, 0) + missing
    return need


def _answers(ctx, topics: list, force: bool, retry_excluded: bool, coming: _Coming) -> Need:
    names = {t.name for t in topics}
    questions = [q for q in read(ctx.paths.questions, Question) if q.topic in names]
    answers = _kept(read(ctx.paths.answers, Example), topics, force)
    pending = pending_questions(questions, answers, retry_excluded)
    need = Need("answers", estimated=any(coming.questions.get(n) for n in names))
    if not pending and not need.estimated:
        return need
    templates = ctx.templates("answer_system.txt")
    systems = {t.name: len(templates.render("answer_system.txt", topic=t.name, description=t.description).encode())
               for t in topics}
    size = _mean([len(q.text.encode()) for q in questions], QUESTION_BYTES)
    need.requests = need.items = len(pending) + sum(coming.questions.get(n, 0) for n in names)
    need.prompt_bytes = sum(systems[q.topic] + len(q.text.encode()) for q in pending)
    need.prompt_bytes += sum((systems[n] + size) * coming.questions.get(n, 0) for n in names)
    return need


def _mean(values: list[int], default: int) -> int:
    return sum(values) // len(values) if values else default
