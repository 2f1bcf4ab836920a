"""Stage `subtopics`: per topic, up to `concurrency` topics at a time, ask the generator for the
subtopics still missing; this (the only writing) thread appends the new ones to
data/subtopics.jsonl as each topic's answer arrives."""

from __future__ import annotations

import logging

from overbrainer.errors import Interrupted
from overbrainer.pipeline.ask_list import ask_list
from overbrainer.pipeline.common import FATAL, Output, execute, finish, item_error, rejected_of
from overbrainer.pipeline.context import INTERRUPTED, StageContext
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.workqueue import WorkQueue

log = logging.getLogger(__name__)

STAGE = "subtopics"


def run_subtopics(ctx: StageContext, topics: list, *, force: bool = False) -> StageResult:
    return execute(ctx, STAGE, "generator", lambda run: _body(ctx, run, topics, force))


def _body(ctx: StageContext, run: StageRun, topics: list, force: bool) -> StageResult:
    from overbrainer.dataset.ids import subtopic_id
    from overbrainer.dataset.records import Subtopic

    output = Output(ctx.paths.subtopics, Subtopic, {t.name for t in topics} if force else None)
    stored = output.current()
    rejected = rejected_of(ctx, "subtopic")

    run.started(len(topics))
    pending = []
    for topic in topics:
        have = sum(1 for s in stored if s.topic == topic.name)
        if have >= topic.subtopics:
            run.item_skipped(topic.name)
        else:
            pending.append((topic, topic.subtopics - have))
    if not pending:
        return finish(run)

    client = ctx.client("generator")
    templates = ctx.templates("subtopics.txt")
    role = ctx.role("generator")
    pipeline = ctx.pipeline

    def ask(job):
        topic, missing = job
        prompt = templates.render("subtopics.txt", topic=topic.name, description=topic.description,
                                  count=missing)
        return ask_list(client, prompt, max_tokens=role.max_tokens, max_retries=pipeline.max_retries,
                        spend=run.spend, retrying=lambda m: run.retrying(topic.name, m),
                        stop=ctx.stop_event)

    try:
        work = WorkQueue(ask, pending, pipeline.concurrency, interrupt=ctx.stop_event, name=STAGE)
        for outcome in work.results():
            topic, missing = outcome.item
            if outcome.error is not None:
                if item_error(run, topic.name, outcome.error) == FATAL:
                    work.stop()
                    return finish(run, outcome.error)
                continue
            names, usage, cost = outcome.value
            output.confirm()
            known = {s.id for s in stored if s.topic == topic.name}
            known |= {r.id for r in rejected if r.topic == topic.name}
            added = 0
            for name in names:
                if added >= missing:
                    break
                sid = subtopic_id(topic.name, name)
                if sid in known:
                    continue
                known.add(sid)
                record = Subtopic(id=sid, topic=topic.name, name=name)
                output.append(record)
                stored.append(record)
                added += 1
            run.wrote(added)
            if added < missing:
                log.info("%s: %s: %d of %d new subtopics; a rerun asks for the rest", STAGE,
                         topic.name, added, missing)
            run.item_done(topic.name, usage, cost)
        if work.interrupted:
            raise Interrupted(INTERRUPTED)
    finally:
        output.close()
    return finish(run)
