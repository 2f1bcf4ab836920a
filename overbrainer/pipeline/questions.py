"""Stage `questions`: fill every subtopic up to `questions_per_subtopic`, up to
`concurrency` subtopics at a time, each subtopic's batches in order, every batch passed through
its topic's deduplicator (serialized per topic) before it is appended. A batch asks for
min(question_batch_size, ask_list.items_per_request(generator's max_tokens), still missing)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from overbrainer.dataset.ids import question_id
from overbrainer.dataset.records import Question, Subtopic
from overbrainer.pipeline.ask_list import ask_list, items_per_request
from overbrainer.pipeline.common import (
    Output,
    execute,
    failed_before,
    finish,
    process,
    processor,
    read,
    rejected_of,
)
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.pipeline.topic_dedup import TopicDedup
from overbrainer.support.processor import Work
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

STAGE = "questions"


def topics_without_subtopics(ctx: StageContext, topics: list) -> list:
    have = {s.topic for s in read(ctx.paths.subtopics, Subtopic)}
    return [t for t in topics if t.name not in have]


def run_questions(ctx: StageContext, topics: list, *, force: bool = False) -> StageResult:
    return execute(ctx, STAGE, "generator", lambda run: _body(ctx, run, topics, force))


@dataclass
class _Job:
    topic: object
    subtopic: object
    accepted: list[str] = field(default_factory=list)
    dedup: object = None


def _body(ctx: StageContext, run: StageRun, topics: list, force: bool) -> StageResult:
    output = Output(ctx.paths.questions, Question, {t.name for t in topics} if force else None)
    subtopics = read(ctx.paths.subtopics, Subtopic)
    stored = output.current()
    rejected = rejected_of(ctx, "question")
    jobs = _pending(run, topics, subtopics, stored)
    if not jobs:
        return finish(run)

    client = ctx.connect("generator")
    embedder = ctx.client("embedder") if ctx.role("embedder") is not None else None
    templates = ctx.templates("questions.txt")
    known: dict[str, set[str]] = {}
    jobs, stopped = _seed(ctx, run, jobs, stored + rejected, known, embedder)
    if stopped is not None:
        return stopped
    proc = processor(ctx, run)
    filler = _Filler(ctx, run, proc, output, client, templates, known)

    def keep(job: _Job, value) -> None:
        usage, cost = value
        run.item_done(job.subtopic.id, usage, cost)

    with output:
        return process(run, proc, Work(jobs, filler.fill, keep, ident=lambda job: job.subtopic.id))


def _pending(run: StageRun, topics: list, subtopics: list, stored: list) -> list[_Job]:
    """The selected topics' subtopics still short of questions (the stage's items; full ones are
    skipped), each with the questions it has."""
    by_topic = {t.name: t for t in topics}
    selected = [s for s in subtopics if s.topic in by_topic]
    accepted: dict[str, list[str]] = {}
    for q in stored:
        accepted.setdefault(q.subtopic_id, []).append(q.text)
    jobs: list[_Job] = []
    for s in selected:
        have = accepted.get(s.id, [])
        if len(have) < by_topic[s.topic].questions_per_subtopic:
            jobs.append(_Job(by_topic[s.topic], s, list(have)))
    run.started(len(jobs), skipped=len(selected) - len(jobs))
    return jobs


def _seed(ctx: StageContext, run: StageRun, jobs: list[_Job], known_records: list, known: dict[str, set[str]],
          embedder) -> tuple[list[_Job], StageResult | None]:
    """One deduplicator per topic that has something to fill, seeded with its known texts (stored
    and rejected questions); `known` gets each topic's known question IDs. A topic whose seeding
    fails is one failed item (its jobs dropped), or the stage's end on a fatal error."""
    pipeline = ctx.pipeline
    dedups = {}
    for name in dict.fromkeys(j.topic.name for j in jobs):
        mine = [r for r in known_records if r.topic == name]
        known[name] = {r.id for r in mine}
        embed = None
        if embedder is not None:
            def embed(texts, n=name):
                return embedder.embed(texts, on_retry=lambda m: log.debug("questions: %s: %s", n, m),
                                      stop=ctx.stop_event)
        dedup = TopicDedup(name, pipeline.dedup_threshold, embed, pipeline.embedding_threshold)
        try:
            dedup.seed([r.text for r in mine])
        except Exception as e:  # noqa: BLE001 - taken as the processor takes a worker's error
            stopped = failed_before(run, name, e)
            if stopped is not None:
                return jobs, stopped
            continue
        dedups[name] = dedup
    jobs = [j for j in jobs if j.topic.name in dedups]
    for j in jobs:
        j.dedup = dedups[j.topic.name]
    return jobs, None


class _Filler:
    """Fills one subtopic (a worker's item): its batches in order until it is full or the
    generator stalls, each batch's survivors appended under its topic's deduplicator lock."""

    def __init__(self, ctx: StageContext, run: StageRun, proc, output, client, templates,
                 known: dict[str, set[str]]):
        self.run, self.proc, self.output = run, proc, output
        self.client, self.templates, self.known = client, templates, known
        self.pipeline = ctx.pipeline
        self.role = ctx.role("generator")
        self.batch = min(self.pipeline.question_batch_size, items_per_request(self.role.max_tokens))

    def fill(self, job: _Job) -> tuple[Usage, float | None]:
        target = job.topic.questions_per_subtopic
        patience = max(1, self.pipeline.max_retries)
        stalls = 0
        usage, cost = Usage(), None
        while len(job.accepted) < target and stalls < patience:
            items, u, c = self._ask(job, min(self.batch, target - len(job.accepted)))
            usage = usage + u
            if c is not None:
                cost = (cost or 0.0) + c
            stalls = 0 if self._accept(job, items) else stalls + 1
        if len(job.accepted) < target:
            log.warning("subtopic `%s`: stopped at %d of %d questions, the generator kept repeating itself",
                        job.subtopic.name, len(job.accepted), target)
        return usage, cost

    def _ask(self, job: _Job, count: int):
        topic, sub = job.topic, job.subtopic
        prompt = self.templates.render("questions.txt", topic=topic.name, description=topic.description,
                                       subtopic=sub.name, count=count, accepted=list(job.accepted))
        out = ask_list(self.client, prompt, max_tokens=self.role.max_tokens,
                       max_retries=self.pipeline.max_retries, spend=self.run.spend,
                       retrying=lambda m: self.run.retrying(sub.id, m), proc=self.proc)
        self.output.confirm()
        return out[0][:count], out[1], out[2]

    def _accept(self, job: _Job, candidates: list[str]) -> int:
        """The batch's new questions appended (after the deduplicator); how many."""
        topic = job.topic.name
        added = 0
        with job.dedup.lock:
            kept = job.dedup.filter(candidates)
            self.proc.check_keeping()
            for text in kept:
                q = _question(topic, job.subtopic, text)
                if q.id in self.known[topic]:
                    continue
                self.known[topic].add(q.id)
                self.output.append(q)
                self.run.wrote()
                job.accepted.append(text)
                added += 1
        return added


def _question(topic: str, sub, text: str):
    return Question(id=question_id(sub.id, text), topic=topic, subtopic_id=sub.id, subtopic=sub.name, text=text)

