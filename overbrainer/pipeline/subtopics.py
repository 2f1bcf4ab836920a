"""Stage `subtopics`: per topic, up to `concurrency` topics at a time, ask the generator for the
subtopics still missing; the processing (the only writing) thread appends the new ones to
data/subtopics.jsonl as each topic's answer arrives, those that arrived before a stop included."""

from __future__ import annotations

import logging

from overbrainer.dataset.figures import Figures
from overbrainer.dataset.ids import subtopic_id
from overbrainer.dataset.records import Subtopic
from overbrainer.pipeline.ask_list import ask_list
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

log = logging.getLogger(__name__)

STAGE = "subtopics"


def run_subtopics(ctx: StageContext, topics: list, *, force: bool = False) -> StageResult:
    return execute(ctx, STAGE, "generator", lambda run: _body(ctx, run, topics, force))


def _body(ctx: StageContext, run: StageRun, topics: list, force: bool) -> StageResult:
    figures = stage_figures(ctx, force)
    if figures is not None and all(figures.get(t.name).subtopics >= t.subtopics for t in topics):
        run.started(0, skipped=len(topics))  # the saved figures say so: no data file is read
        return finish(run)
    output = Output(ctx.paths.subtopics, Subtopic, {t.name for t in topics} if force else None)
    known = _known(ctx, output, topics)
    pending = []
    for topic in topics:
        have = known[topic.name][0]
        if have < topic.subtopics:
            pending.append((topic, topic.subtopics - have))
    run.started(len(pending), skipped=len(topics) - len(pending))
    if not pending:
        return finish(run)

    client = ctx.connect("generator")
    templates = ctx.templates("subtopics.txt")
    role = ctx.role("generator")
    proc = processor(ctx, run)

    def send(job):
        topic, missing = job
        prompt = templates.render("subtopics.txt", topic=topic.name, description=topic.description,
                                  count=missing)
        return ask_list(client, prompt, max_tokens=role.max_tokens, max_retries=ctx.pipeline.max_retries,
                        spend=run.spend, retrying=lambda m: run.retrying(topic.name, m), proc=proc)

    def keep(job, value) -> None:
        topic, missing = job
        names, usage, cost = value
        output.confirm()
        added = _append_new(output, known[topic.name][1], topic.name, names, missing, figures)
        run.wrote(added)
        if added < missing:
            log.info("%s: %s: %d of %d new subtopics; a rerun asks for the rest", STAGE,
                     topic.name, added, missing)
        run.item_done(topic.name, usage, cost)

    with keeping_figures(ctx, run, figures), output:
        return process(run, proc, Work(pending, send, keep, ident=lambda job: job[0].name))


def _known(ctx: StageContext, output, topics: list) -> dict[str, tuple[int, set[str]]]:
    """Per selected topic: its stored subtopics' count, and the IDs it must not append again
    (stored and rejected subtopics), in one streaming pass."""
    known: dict[str, tuple[int, set[str]]] = {t.name: (0, set()) for t in topics}
    counts = dict.fromkeys(known, 0)
    for s in output.records():
        if s.topic in known:
            counts[s.topic] += 1
            known[s.topic][1].add(s.id)
    for r in rejected_of(ctx, "subtopic"):
        if r.topic in known:
            known[r.topic][1].add(r.id)
    return {name: (counts[name], ids) for name, (_, ids) in known.items()}


def _append_new(output, known: set[str], topic: str, names: list[str], missing: int,
                figures: Figures | None) -> int:
    """Append up to `missing` of `names` whose ID is not `known` yet; how many were appended."""
    added = 0
    for name in names:
        if added >= missing:
            break
        sid = subtopic_id(topic, name)
        if sid in known:
            continue
        known.add(sid)
        output.append(Subtopic(id=sid, topic=topic, name=name))
        if figures is not None:
            figures.note_subtopic(topic, name)
        added += 1
    return added
