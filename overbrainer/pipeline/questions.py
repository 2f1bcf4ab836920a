"""Stage `questions`: fill every subtopic up to `questions_per_subtopic`, up to
`concurrency` subtopics at a time, each subtopic's batches in order, every batch passed through
its topic's deduplicator (serialized per topic). A batch asks for min(question_batch_size,
ask_list.items_per_request(generator's max_tokens), still missing). The worker hands each batch's
new questions to the keeping thread (the file's one writer: Processor.hand), which appends them as
they come."""

from __future__ import annotations

import logging
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from overbrainer.config.model import Topic
from overbrainer.config.templates import Templates
from overbrainer.dataset import state as dataset_state
from overbrainer.dataset.figures import Figures, TopicFigures
from overbrainer.dataset.ids import packed, question_id
from overbrainer.dataset.jsonl import iter_records
from overbrainer.dataset.quality.embed_dedup import Embed
from overbrainer.dataset.records import Question, Rejected, Subtopic
from overbrainer.dataset.stalls import Stall
from overbrainer.llm.client import LlmClient
from overbrainer.pipeline.ask_list import ask_list, items_per_request
from overbrainer.pipeline.common import (
    Output,
    execute,
    finish,
    keeping_figures,
    process,
    processor,
    rejected_of,
    stage_figures,
)
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.held import Held, fills
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.pipeline.subtopics import EXISTING_NAMES, existing_names
from overbrainer.pipeline.topic_dedups import TopicDedup, TopicDedups, TopicState
from overbrainer.support.processor import Processor, Work
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

STAGE = "questions"


def topics_without_subtopics(ctx: StageContext, topics: list[Topic]) -> list[Topic]:
    figures = dataset_state.current(ctx.paths)
    return [t for t in topics if not figures.get(t.name).subtopics]


def run_questions(ctx: StageContext, topics: list[Topic], *, force: bool = False) -> StageResult:
    return execute(ctx, STAGE, "generator", lambda run: _body(ctx, run, topics, force))


@dataclass
class _Job:
    """A subtopic to fill: `have` questions so far, `accepted` the last of their texts (read only
    for a subtopic that has some: the prompt lists them, as many as subtopics.existing_names keeps,
    so a prompt and this list stay small at any questions_per_subtopic)."""

    topic: Topic
    subtopic: Subtopic
    have: int = 0
    accepted: deque[str] = field(default_factory=lambda: deque(maxlen=EXISTING_NAMES))
    state: TopicState | None = None  # its topic's deduplicator, while it is filled
    stalled: bool = False  # stopped after max(1, max_retries) batches in a row that added nothing


def short_of(f: TopicFigures, topic: Topic, held: list[Stall]) -> int:
    """The topic's subtopic records short of questions, less those held back (`held`: the
    topic's stalls, matched by the number of questions they held)."""
    kept = fills(held)
    return sum(max(0, k - kept.get(n, 0)) for n, k in f.fill.items() if n < topic.questions_per_subtopic)


def _body(ctx: StageContext, run: StageRun, topics: list[Topic], force: bool) -> StageResult:
    figures = stage_figures(ctx, force)
    held = Held(ctx, STAGE, force)
    if figures is not None and _nothing_to_do(run, figures, topics, held):
        return finish(run)  # the saved figures say so: no data file is read
    forced = {t.name for t in topics} if force else None
    output = Output(ctx.paths.questions, Question, forced)
    jobs, offsets = _pending(ctx, run, topics, forced, held)
    if not jobs:
        return finish(run)

    client = ctx.connect("generator")
    embedder = ctx.client("embedder") if ctx.role("embedder") is not None else None
    templates = ctx.templates("questions.txt")
    rejected: dict[str, list[Rejected]] = {}
    for r in rejected_of(ctx, "question"):
        if r.topic in offsets:
            rejected.setdefault(r.topic, []).append(r)
    pipeline = ctx.pipeline
    dedups = TopicDedups(ctx.paths.questions, jobs, offsets, rejected,
                         lambda name: TopicDedup(name, pipeline.dedup_threshold, _embed(ctx, embedder, name),
                                                 pipeline.embedding_threshold))
    proc = processor(ctx, run)

    def write(topic: str, before: int, new: list[Question]) -> None:  # on the keeping thread
        output.append_all(new)  # the batch in one write
        if figures is not None:
            figures.note_questions(topic, before, [q.text for q in new])
        run.wrote(len(new))

    filler = _Filler(ctx, run, proc, output, client, templates, dedups, write)

    def keep(job: _Job, value: tuple[Usage, float | None]) -> None:
        usage, cost = value
        if job.stalled:
            held.record(job.topic, job.subtopic.id, job.have)
            run.stall(f"`{job.subtopic.name}` ({job.topic.name})")
        else:
            held.clear(job.subtopic.id)
        run.item_done(job.subtopic.id, usage, cost)

    try:
        with keeping_figures(ctx, run, figures), output:
            return process(run, proc, Work(jobs, filler.fill, keep, ident=lambda job: job.subtopic.id))
    finally:
        held.save()


def _nothing_to_do(run: StageRun, figures: Figures, topics: list[Topic], held: Held) -> bool:
    """Every subtopic is full or held back, by the figures: the stage starts with none."""
    stalls = {t.name: held.of_topic(t) for t in topics}
    if any(short_of(figures.get(t.name), t, stalls[t.name]) for t in topics):
        return False
    for t in topics:  # each subtopic record short of questions is a held one (by the count above)
        short = figures.get(t.name).short_of(t.questions_per_subtopic)
        if short:
            held.hold(max(stalls[t.name], key=lambda s: s.at), short)
    run.held_back(held.count, held.latest)
    run.started(0, skipped=sum(figures.get(t.name).subtopics for t in topics) - held.count)
    return True


def _pending(ctx: StageContext, run: StageRun, topics: list[Topic], forced: set[str] | None,
             held: Held) -> tuple[list[_Job], dict[str, array[int]]]:
    """The selected topics' subtopics still short of questions (the stage's items, topic by
    topic; full ones are skipped, held ones held back), each with how many it has, and per
    selected topic the byte offsets of its stored questions (its deduplicator's seed, read when
    it is made); two streaming passes, counts and offsets only."""
    by_topic = {t.name: t for t in topics}
    counts: dict[str, int] = {}
    offsets: dict[str, array[int]] = {name: array("Q") for name in by_topic}
    for offset, q in iter_records(ctx.paths.questions, Question, offsets=True):
        if forced is not None and q.topic in forced:
            continue
        counts[q.subtopic_id] = counts.get(q.subtopic_id, 0) + 1
        if q.topic in offsets:
            offsets[q.topic].append(offset)
    jobs: list[_Job] = []
    selected = 0
    for s in iter_records(ctx.paths.subtopics, Subtopic):
        topic = by_topic.get(s.topic)
        if topic is None:
            continue
        have = counts.get(s.id, 0)
        stall = held.stall(topic, s.id) if have < topic.questions_per_subtopic else None
        if stall is not None:
            held.hold(stall)
            continue
        selected += 1
        if have < topic.questions_per_subtopic:
            jobs.append(_Job(topic, s, have))
    run.held_back(held.count, held.latest)
    run.started(len(jobs), skipped=selected - len(jobs))
    order = {name: i for i, name in enumerate(by_topic)}
    jobs.sort(key=lambda j: order[j.topic.name])  # topic by topic: few deduplicators alive at once
    return jobs, offsets


def _embed(ctx: StageContext, embedder: LlmClient | None, name: str) -> Embed | None:
    if embedder is None:
        return None

    def embed(texts: list[str]) -> list[list[float]]:
        return embedder.embed(texts, on_retry=lambda m: log.debug("questions: %s: %s", name, m), stop=ctx.stop_event)
    return embed


class _Filler:
    """Fills one subtopic (a worker's item): its batches in order until it is full or the
    generator stalls, each batch's survivors (after its topic's deduplicator) handed to the keeping
    thread's `write(topic, before, questions)`."""

    def __init__(self, ctx: StageContext, run: StageRun, proc: Processor, output: Output, client: LlmClient,
                 templates: Templates, dedups: TopicDedups, write: Callable[[str, int, list[Question]], None]):
        self.run, self.proc, self.output = run, proc, output
        self.client, self.templates, self.dedups = client, templates, dedups
        self.write = write
        self.pipeline = ctx.pipeline
        self.role = ctx.role("generator")
        self.batch = min(self.pipeline.question_batch_size, items_per_request(self.role.max_tokens))

    def fill(self, job: _Job) -> tuple[Usage, float | None]:
        try:
            job.state = self.dedups.acquire(job)
            return self._fill(job)
        finally:
            job.state = None
            job.accepted.clear()  # the subtopic is done: its texts live on in the file and the deduplicator
            self.dedups.release(job)

    def _fill(self, job: _Job) -> tuple[Usage, float | None]:
        target = job.topic.questions_per_subtopic
        patience = max(1, self.pipeline.max_retries)
        stalls = 0
        usage, cost = Usage(), None
        while job.have < target and stalls < patience:
            items, u, c = self._ask(job, min(self.batch, target - job.have))
            usage = usage + u
            if c is not None:
                cost = (cost or 0.0) + c
            stalls = 0 if self._accept(job, items) else stalls + 1
        if job.have < target:
            job.stalled = True
            log.warning("subtopic `%s`: stopped at %d of %d questions, the generator kept repeating itself; "
                        "held back until its prompt changes", job.subtopic.name, job.have, target)
        return usage, cost

    def _ask(self, job: _Job, count: int) -> tuple[list[str], Usage, float | None]:
        topic, sub = job.topic, job.subtopic
        prompt = self.templates.render("questions.txt", topic=topic.name, description=topic.description,
                                       subtopic=sub.name, count=count, accepted=existing_names(job.accepted))
        out = ask_list(self.client, prompt, max_tokens=self.role.max_tokens,
                       max_retries=self.pipeline.max_retries, spend=self.run.spend,
                       retrying=lambda m: self.run.retrying(sub.id, m), proc=self.proc,
                       refused=self.run.item_refused)
        self.output.confirm()
        return out[0][:count], out[1], out[2]

    def _accept(self, job: _Job, candidates: list[str]) -> int:
        """The batch's new questions (after the deduplicator) handed to the keeping thread; how many."""
        topic = job.topic.name
        new: list[Question] = []
        state = job.state
        dedup = state.dedup if state is not None else None
        if state is None or dedup is None:  # fill() holds it: built, or acquire() raised
            raise RuntimeError(f"subtopic {job.subtopic.id}: its topic's deduplicator is not held")
        with dedup.lock:
            for text in dedup.filter(candidates):
                q = _question(topic, job.subtopic, text)
                key = packed(q.id)
                if key not in state.known:
                    state.known.add(key)
                    new.append(q)
        if new:
            before, topic = job.have, job.topic.name
            self.proc.hand(lambda: self.write(topic, before, new))
            job.accepted.extend(q.text for q in new)
            job.have += len(new)
        return len(new)


def _question(topic: str, sub: Subtopic, text: str) -> Question:
    return Question(id=question_id(sub.id, text), topic=topic, subtopic_id=sub.id, subtopic=sub.name, text=text)

