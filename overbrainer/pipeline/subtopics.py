"""Stage `subtopics`: per topic, up to `concurrency` topics at a time, ask the generator for the
subtopics still missing; the processing (the only writing) thread appends the new ones to
data/subtopics.jsonl as each topic's answer arrives, those that arrived before a stop included."""

from __future__ import annotations

import logging

from overbrainer.dataset.ids import subtopic_id
from overbrainer.dataset.records import Subtopic
from overbrainer.pipeline.ask_list import ask_list
from overbrainer.pipeline.common import Output, execute, finish, process, processor, rejected_of
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.processor import Work

log = logging.getLogger(__name__)

STAGE = "subtopics"


def run_subtopics(ctx: StageContext, topics: list, *, force: bool = False) -> StageResult:
    return execute(ctx, STAGE, "generator", lambda run: _body(ctx, run, topics, force))


def _body(ctx: StageContext, run: StageRun, topics: list, force: bool) -> StageResult:
    output = Output(ctx.paths.subtopics, Subtopic, {t.name for t in topics} if force else None)
    stored = output.current()
    rejected = rejected_of(ctx, "subtopic")
    pending = []
    for topic in topics:
        have = sum(1 for s in stored if s.topic == topic.name)
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
        known = {s.id for s in stored if s.topic == topic.name} | {r.id for r in rejected if r.topic == topic.name}
        added = _append_new(output, stored, known, topic.name, names, missing)
        run.wrote(added)
        if added < missing:
            log.info("%s: %s: %d of %d new subtopics; a rerun asks for the rest", STAGE,
                     topic.name, added, missing)
        run.item_done(topic.name, usage, cost)

    with output:
        return process(run, proc, Work(pending, send, keep, ident=lambda job: job[0].name))


def _append_new(output, stored: list, known: set[str], topic: str, names: list[str], missing: int) -> int:
    """Append up to `missing` of `names` whose ID is not `known` yet; how many were appended."""
    added = 0
    for name in names:
        if added >= missing:
            break
        sid = subtopic_id(topic, name)
        if sid in known:
            continue
        known.add(sid)
        record = Subtopic(id=sid, topic=topic, name=name)
        output.append(record)
        stored.append(record)
        added += 1
    return added
