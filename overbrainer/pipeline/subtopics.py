"""Stage `subtopics`: per topic, ask the generator for the subtopics still missing, in list
requests of at most ask_list.items_per_request(generator's max_tokens) names each. A topic is the
stage's item: up to `concurrency` topics at a time, each topic's requests one after another, so
that each prompt lists the names the earlier ones added (`existing`: the topic's names, at most
the last EXISTING_NAMES of them within EXISTING_BYTES). Each answer's new names are handed by the
worker to the keeping thread (the file's one writer: Processor.hand), which appends them to
data/subtopics.jsonl as they come. An answer with no new name stops its topic for this run, and
records it (pipeline/held.py): it is not asked again until its prompt's settings change. A topic
fails (once) when one of its requests failed; its later requests are not sent."""

from __future__ import annotations

import functools
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from overbrainer.config.model import Topic
from overbrainer.dataset.ids import subtopic_id
from overbrainer.dataset.records import Rejected, Subtopic
from overbrainer.pipeline.ask_list import ask_list, items_per_request, request_counts
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
from overbrainer.pipeline.held import Held
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.processor import Processor, Work
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

STAGE = "subtopics"
# The prompt's `existing`: the topic's last names (stored, then those of this run), at most this
# many, and at most this many bytes of names in all, so that a prompt stays small at any count
# (the questions prompt's `accepted`, a subtopic's questions so far, is bounded alike).
EXISTING_NAMES = 200
EXISTING_BYTES = 16_000


def run_subtopics(ctx: StageContext, topics: list[Topic], *, force: bool = False) -> StageResult:
    return execute(ctx, STAGE, "generator", lambda run: _body(ctx, run, topics, force))


def existing_names(names: Iterable[str]) -> list[str]:
    """The names a prompt lists (oldest first): the last EXISTING_NAMES of `names` whose bytes
    (each with 3 for its quoting) fit EXISTING_BYTES."""
    out: list[str] = []
    size = 0
    for name in reversed(list(names)):
        size += len(name.encode()) + 3
        if len(out) >= EXISTING_NAMES or size > EXISTING_BYTES:
            break
        out.append(name)
    out.reverse()
    return out


@dataclass
class _Topic:
    """One topic of the stage: the counts of its requests, the IDs it knows (stored, rejected,
    appended), its last names (for the prompt), what its answers added."""

    topic: Topic
    have: int
    counts: list[int]
    known: set[str] = field(default_factory=set)
    names: deque[str] = field(default_factory=lambda: deque(maxlen=EXISTING_NAMES))
    added: int = 0
    stalled: bool = False  # an answer held no new name: the topic stops (worker side)

    @property
    def missing(self) -> int:
        return sum(self.counts)


def _states(topics: list[Topic], stored: Iterable[Subtopic], rejected: Iterable[Rejected],
            per_request: int) -> dict[str, _Topic]:
    """The topics short of subtopics, by name, each knowing its stored and rejected IDs and its
    last stored names. `stored` is read once, as it streams."""
    states = {t.name: _Topic(t, 0, []) for t in topics}
    for r in stored:
        state = states.get(r.topic)
        if state is not None:
            state.have += 1
            state.known.add(r.id)
            state.names.append(r.name)
    for name, state in list(states.items()):
        if state.have >= state.topic.subtopics:
            del states[name]
        else:
            state.counts = request_counts(state.topic.subtopics - state.have, per_request)
    for rej in rejected:
        if rej.topic in states:
            states[rej.topic].known.add(rej.id)
    return states


def _open(topics: list[Topic], held: Held, run: StageRun) -> list[Topic]:
    """The topics not held back (their last round added nothing, and its prompt is the same)."""
    out = []
    for t in topics:
        stall = held.stall(t)
        if stall is None:
            out.append(t)
        else:
            held.hold(stall)
    run.held_back(held.count, held.latest)
    return out


def _body(ctx: StageContext, run: StageRun, topics: list[Topic], force: bool) -> StageResult:
    figures = stage_figures(ctx, force)
    held = Held(ctx, STAGE, force)
    topics = _open(topics, held, run)
    if figures is not None and all(figures.get(t.name).subtopics >= t.subtopics for t in topics):
        run.started(0, skipped=len(topics))  # the saved figures say so: no data file is read
        return finish(run)
    output = Output(ctx.paths.subtopics, Subtopic, {t.name for t in topics} if force else None)
    role = ctx.role("generator")
    states = _states(topics, output.records(), rejected_of(ctx, "subtopic"), items_per_request(role.max_tokens))
    run.started(len(states), skipped=len(topics) - len(states))
    if not states:
        return finish(run)
    proc = processor(ctx, run)

    def write(new: list[Subtopic]) -> None:  # on the keeping thread
        output.append_all(new)  # the answer's names in one write
        if figures is not None:
            for record in new:
                figures.note_subtopic(record.topic, record.name)
        run.wrote(len(new))

    asker = _Asker(ctx, run, proc, output, write)

    def keep(state: _Topic, value: tuple[Usage, float | None]) -> None:
        _done(run, held, state, *value)

    try:
        with keeping_figures(ctx, run, figures), output:
            return process(run, proc, Work(list(states.values()), asker.fill, keep,
                                           ident=lambda state: state.topic.name))
    finally:
        held.save()


def _done(run: StageRun, held: Held, state: _Topic, usage: Usage, cost: float | None) -> None:
    """The topic's requests came back: done, whatever number of new names they held; one that
    held none records the topic as stalled."""
    name = state.topic.name
    if state.stalled:
        held.record(state.topic, name, state.have)
        run.stall(name)
        log.warning("%s: %s: stopped at %d of %d subtopics, the generator gave no new one; held back until "
                    "its prompt changes", STAGE, name, state.have, state.topic.subtopics)
    else:
        held.clear(name)
        if state.added < state.missing:
            log.info("%s: %s: %d of %d new subtopics; a rerun asks for the rest", STAGE, name,
                     state.added, state.missing)
    run.item_done(name, usage, cost)


class _Asker:
    """Asks one topic's requests in order (a worker's item), each prompt listing the names so
    far, and hands each answer's new names to the keeping thread's `write(names)`."""

    def __init__(self, ctx: StageContext, run: StageRun, proc: Processor, output: Output,
                 write: Callable[[list[Subtopic]], None]):
        self.run, self.proc, self.output, self.write = run, proc, output, write
        self.client = ctx.connect("generator")
        self.templates = ctx.templates("subtopics.txt")
        self.role = ctx.role("generator")
        self.max_retries = ctx.pipeline.max_retries
        if "existing" not in self.templates.source("subtopics.txt"):
            log.warning("%s: prompts/subtopics.txt does not use `existing` (the names the topic has): the "
                        "requests of one topic may get the same answer", STAGE)

    def fill(self, state: _Topic) -> tuple[Usage, float | None]:
        topic = state.topic
        usage, cost = Usage(), None
        for count in state.counts:
            prompt = self.templates.render("subtopics.txt", topic=topic.name, description=topic.description,
                                           count=count, existing=existing_names(state.names))
            names, u, c = ask_list(self.client, prompt, max_tokens=self.role.max_tokens,
                                   max_retries=self.max_retries, spend=self.run.spend,
                                   retrying=lambda m: self.run.retrying(topic.name, m), proc=self.proc,
                                   refused=self.run.item_refused)
            usage = usage + u
            if c is not None:
                cost = (cost or 0.0) + c
            self.output.confirm()
            new = _new_names(state, names, count)
            if new:
                self.proc.hand(functools.partial(self.write, new))
            else:
                state.stalled = True  # the same prompt would bring nothing new either
                break
        return usage, cost


def _new_names(state: _Topic, names: list[str], count: int) -> list[Subtopic]:
    """Up to `count` of `names` whose ID is not known to the topic yet (one batch, to be written),
    now known to it."""
    topic = state.topic.name
    new: list[Subtopic] = []
    for name in names:
        if len(new) >= count:
            break
        sid = subtopic_id(topic, name)
        if sid in state.known:
            continue
        state.known.add(sid)
        new.append(Subtopic(id=sid, topic=topic, name=name))
    state.names.extend(record.name for record in new)
    state.added += len(new)
    state.have += len(new)
    return new
