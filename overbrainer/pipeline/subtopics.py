"""Stage `subtopics`: per topic, ask the generator for the subtopics still missing, in list
requests of at most ask_list.items_per_request(generator's max_tokens) names each, up to
`concurrency` requests at a time; the processing (the only writing) thread appends each request's
new names to data/subtopics.jsonl as its answer arrives, those that arrived before a stop
included. A topic is the stage's item: done once all its requests came back, failed (once) when
one of them failed."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from overbrainer.dataset.figures import Figures
from overbrainer.dataset.ids import subtopic_id
from overbrainer.dataset.records import Subtopic
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
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.processor import Work
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

STAGE = "subtopics"


def run_subtopics(ctx: StageContext, topics: list, *, force: bool = False) -> StageResult:
    return execute(ctx, STAGE, "generator", lambda run: _body(ctx, run, topics, force))


@dataclass
class _Topic:
    """One topic of the stage: the subtopics it misses, its requests not settled yet (kept or
    failed), the IDs it knows (stored, rejected, appended), what its answers added and cost."""

    topic: object
    missing: int
    unsettled: int
    known: set[str] = field(default_factory=set)
    added: int = 0
    given_up: bool = False  # a request of the topic raised: the workers send no other (worker side)
    failed: bool = False  # the topic was counted as failed (processing thread)
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None


@dataclass(slots=True)
class _Request:
    """One list request of a topic, asking for `count` names."""

    state: _Topic
    count: int


def _requests(topics: list, stored, rejected, per_request: int) -> tuple[dict[str, _Topic], list[_Request]]:
    """The topics short of subtopics, by name, each knowing its stored and rejected IDs, and their
    requests (topic by topic, in order). `stored` is read once, as it streams."""
    selected = {t.name for t in topics}
    have: Counter[str] = Counter()
    known: dict[str, set[str]] = {name: set() for name in selected}
    for r in stored:
        if r.topic in selected:
            have[r.topic] += 1
            known[r.topic].add(r.id)
    states: dict[str, _Topic] = {}
    requests: list[_Request] = []
    for topic in topics:
        if have[topic.name] < topic.subtopics:
            counts = request_counts(topic.subtopics - have[topic.name], per_request)
            state = states[topic.name] = _Topic(topic, topic.subtopics - have[topic.name], len(counts),
                                                known[topic.name])
            requests += [_Request(state, n) for n in counts]
    for r in rejected:
        if r.topic in states:
            states[r.topic].known.add(r.id)
    return states, requests


def _body(ctx: StageContext, run: StageRun, topics: list, force: bool) -> StageResult:
    figures = stage_figures(ctx, force)
    if figures is not None and all(figures.get(t.name).subtopics >= t.subtopics for t in topics):
        run.started(0, skipped=len(topics))  # the saved figures say so: no data file is read
        return finish(run)
    output = Output(ctx.paths.subtopics, Subtopic, {t.name for t in topics} if force else None)
    role = ctx.role("generator")
    states, requests = _requests(topics, output.records(), rejected_of(ctx, "subtopic"),
                                 items_per_request(role.max_tokens))
    run.started(len(states), skipped=len(topics) - len(states))
    if not states:
        return finish(run)

    client = ctx.connect("generator")
    templates = ctx.templates("subtopics.txt")
    proc = processor(ctx, run, tally=_Tally(run, states))

    def send(request: _Request):
        topic = request.state.topic
        if request.state.given_up:  # an earlier request of the topic failed: so has the
            return None             # topic, a rerun asks for the rest
        prompt = templates.render("subtopics.txt", topic=topic.name, description=topic.description,
                                  count=request.count)
        try:
            return ask_list(client, prompt, max_tokens=role.max_tokens, max_retries=ctx.pipeline.max_retries,
                            spend=run.spend, retrying=lambda m: run.retrying(topic.name, m), proc=proc)
        except BaseException:
            request.state.given_up = True
            raise

    def keep(request: _Request, value) -> None:
        state = request.state
        state.unsettled -= 1
        if value is not None:
            names, usage, cost = value
            output.confirm()
            added = _append_new(output, state.known, state.topic.name, names, request.count, figures)
            state.added += added
            run.wrote(added)
            state.usage = state.usage + usage
            if cost is not None:
                state.cost = (state.cost or 0.0) + cost
        if state.unsettled == 0 and not state.failed:
            _done(run, state)

    with keeping_figures(ctx, run, figures), output:
        return process(run, proc, Work(requests, send, keep, ident=lambda request: request.state.topic.name))


def _done(run: StageRun, state: _Topic) -> None:
    """Every request of the topic came back: it is done, whatever number of new names they held."""
    if state.added < state.missing:
        log.info("%s: %s: %d of %d new subtopics; a rerun asks for the rest", STAGE,
                 state.topic.name, state.added, state.missing)
    run.item_done(state.topic.name, state.usage, state.cost)


class _Tally:
    """The processor's tally (support/processor.Tally) for topics of several requests: a topic
    fails once, at the first of its requests that fails, and is then never done."""

    def __init__(self, run: StageRun, states: dict[str, _Topic]):
        self.run, self.states = run, states

    def _first_failure(self, topic: str) -> bool:
        state = self.states[topic]
        state.unsettled -= 1
        first, state.failed = not state.failed, True
        return first

    def item_failed(self, item_id: str, message: str) -> None:
        if self._first_failure(item_id):
            self.run.item_failed(item_id, message)

    def item_stopped(self, item_id: str, error: BaseException) -> None:
        if self._first_failure(item_id):
            self.run.item_stopped(item_id, error)


def _append_new(output, known: set[str], topic: str, names: list[str], count: int,
                figures: Figures | None) -> int:
    """Append up to `count` of `names` whose ID is not `known` yet, in one write; how many were
    appended."""
    new: list[Subtopic] = []
    for name in names:
        if len(new) >= count:
            break
        sid = subtopic_id(topic, name)
        if sid in known:
            continue
        known.add(sid)
        new.append(Subtopic(id=sid, topic=topic, name=name))
    output.append_all(new)
    if figures is not None:
        for record in new:
            figures.note_subtopic(topic, record.name)
    return len(new)
