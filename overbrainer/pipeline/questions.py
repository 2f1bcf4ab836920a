"""Stage `questions`: fill every subtopic up to `questions_per_subtopic`, up to
`concurrency` subtopics at a time, each subtopic's batches in order, every batch passed through
its topic's deduplicator (serialized per topic) before it is appended."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from overbrainer.errors import Interrupted
from overbrainer.pipeline.ask_list import ask_list
from overbrainer.pipeline.common import (
    FATAL,
    Output,
    execute,
    finish,
    item_error,
    read,
    rejected_of,
)
from overbrainer.pipeline.context import INTERRUPTED, StageContext
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.workqueue import WorkQueue
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

STAGE = "questions"


def topics_without_subtopics(ctx: StageContext, topics: list) -> list:
    from overbrainer.dataset.records import Subtopic

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
    from overbrainer.dataset.records import Question, Subtopic

    output = Output(ctx.paths.questions, Question, {t.name for t in topics} if force else None)
    subtopics = read(ctx.paths.subtopics, Subtopic)
    stored = output.current()
    rejected = rejected_of(ctx, "question")
    by_topic = {t.name: t for t in topics}
    selected = [s for s in subtopics if s.topic in by_topic]
    accepted: dict[str, list[str]] = {}
    for q in stored:
        accepted.setdefault(q.subtopic_id, []).append(q.text)

    run.started(len(selected))
    jobs: list[_Job] = []
    for s in selected:
        have = accepted.get(s.id, [])
        if len(have) >= by_topic[s.topic].questions_per_subtopic:
            run.item_skipped(s.id)
        else:
            jobs.append(_Job(by_topic[s.topic], s, list(have)))
    if not jobs:
        return finish(run)

    client = ctx.client("generator")
    embedder = ctx.client("embedder") if ctx.role("embedder") is not None else None
    templates = ctx.templates("questions.txt")
    pipeline = ctx.pipeline
    role = ctx.role("generator")

    # One deduplicator per topic that has something to fill, seeded with its known texts.
    dedups = {}
    known_ids: dict[str, set[str]] = {}
    for name in dict.fromkeys(j.topic.name for j in jobs):
        from overbrainer.pipeline.topic_dedup import TopicDedup

        seed = [q.text for q in stored if q.topic == name] + [r.text for r in rejected if r.topic == name]
        known_ids[name] = {q.id for q in stored if q.topic == name} | {r.id for r in rejected if r.topic == name}
        embed = None
        if embedder is not None:
            def embed(texts, n=name):
                return embedder.embed(texts, on_retry=lambda m: log.debug("questions: %s: %s", n, m),
                                      stop=ctx.stop_event)
        dedup = TopicDedup(name, pipeline.dedup_threshold, embed, pipeline.embedding_threshold)
        try:
            dedup.seed(seed)
        except Exception as e:  # noqa: BLE001 - classified below
            if item_error(run, name, e) == FATAL:
                return finish(run, e)
            jobs = [j for j in jobs if j.topic.name != name]
            continue
        dedups[name] = dedup
    for j in jobs:
        j.dedup = dedups[j.topic.name]

    def fill(job: _Job):
        topic, sub = job.topic, job.subtopic
        target = topic.questions_per_subtopic
        patience = max(1, pipeline.max_retries)
        stalls = 0
        usage, cost = Usage(), None
        while len(job.accepted) < target and stalls < patience:
            if work.stopped.is_set() or ctx.interrupted():
                raise Interrupted(INTERRUPTED)
            count = min(pipeline.question_batch_size, target - len(job.accepted))
            prompt = templates.render("questions.txt", topic=topic.name, description=topic.description,
                                      subtopic=sub.name, count=count, accepted=list(job.accepted))
            items, u, c = ask_list(client, prompt, max_tokens=role.max_tokens,
                                   max_retries=pipeline.max_retries, spend=run.spend,
                                   retrying=lambda m: run.retrying(sub.id, m), stop=ctx.stop_event)
            output.confirm()
            usage = usage + u
            if c is not None:
                cost = (cost or 0.0) + c
            added = 0
            with job.dedup.lock:
                kept = job.dedup.filter(items[:count])
                if work.stopped.is_set():
                    raise Interrupted(INTERRUPTED)
                for text in kept:
                    q = _question(topic.name, sub, text)
                    if q.id in known_ids[topic.name]:
                        continue
                    known_ids[topic.name].add(q.id)
                    output.append(q)
                    run.wrote()
                    job.accepted.append(text)
                    added += 1
            stalls = 0 if added else stalls + 1
        if len(job.accepted) < target:
            log.warning("subtopic `%s`: stopped at %d of %d questions, the generator kept repeating itself",
                        sub.name, len(job.accepted), target)
        return usage, cost

    try:
        work = WorkQueue(fill, jobs, pipeline.concurrency, interrupt=ctx.stop_event, name=STAGE)
        for outcome in work.results():
            sub = outcome.item.subtopic
            if outcome.error is not None:
                if item_error(run, sub.id, outcome.error) == FATAL:
                    work.stop()
                    return finish(run, outcome.error)
                continue
            usage, cost = outcome.value
            run.item_done(sub.id, usage, cost)
        if work.interrupted:
            work.stop()
            raise Interrupted(INTERRUPTED)
    finally:
        output.close()
    return finish(run)


def _question(topic: str, sub, text: str):
    from overbrainer.dataset.ids import question_id
    from overbrainer.dataset.records import Question

    return Question(id=question_id(sub.id, text), topic=topic, subtopic_id=sub.id, subtopic=sub.name, text=text)

