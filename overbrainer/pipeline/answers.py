"""Stage `answers`: the parent answers every pending question, `concurrency`
requests in flight, each answer appended by this (the only writing) thread as it completes.

A question counts as done once any answer with its ID exists, excluded ones included. A fatal
provider error stops the stage at once, after every answer already received was saved.
"""

from __future__ import annotations

import logging

from overbrainer.errors import Interrupted
from overbrainer.pipeline.common import FATAL, Output, execute, finish, item_error, read
from overbrainer.pipeline.context import INTERRUPTED, StageContext
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.workqueue import WorkQueue

log = logging.getLogger(__name__)

STAGE = "answers"


def run_answers(ctx: StageContext, topics: list, *, force: bool = False) -> StageResult:
    from overbrainer.config.ready import refuse_hidden_reasoning

    refuse_hidden_reasoning(ctx.config)  # before anything is removed or spent
    return execute(ctx, STAGE, "parent", lambda run: _body(ctx, run, topics, force))


def classify(response, reasoning: bool) -> str | None:
    """The exclusion reason of an answer, or None when it is usable (the order matters)."""
    finish_reason = response.finish_reason
    if finish_reason == "length":
        return "truncated"
    if finish_reason in ("refusal", "content_filter"):
        return "refused"
    if not (response.content or "").strip():
        return "empty"
    if reasoning and response.reasoning_kind != "raw":
        return "no_raw_reasoning"
    return None


def build_example(question, response, *, model: str, system: str | None, reasoning: bool, hides: bool):
    from overbrainer.dataset.records import Example, Message, Meta

    kind = response.reasoning_kind
    if hides and kind == "raw":
        kind = "summary"  # a parent that hides its thoughts is never trusted to return them
    if kind != response.reasoning_kind:
        response = _with_kind(response, kind)
    excluded = classify(response, reasoning)
    thought = response.reasoning if response.reasoning and (kind == "raw" or excluded) else None
    messages = []
    if system is not None:
        messages.append(Message("system", system))
    messages.append(Message("user", question.text))
    messages.append(Message("assistant", response.content or "", thought))
    meta = Meta(model=model, input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens, finish_reason=response.finish_reason,
                reasoning_kind=kind, excluded=excluded)
    return Example(question.id, question.topic, question.subtopic, messages, meta)


def _with_kind(response, kind: str):
    import dataclasses

    return dataclasses.replace(response, reasoning_kind=kind)


def _body(ctx: StageContext, run: StageRun, topics: list, force: bool) -> StageResult:
    from overbrainer.dataset.records import Example, Question

    names = {t.name for t in topics}
    output = Output(ctx.paths.answers, Example, names if force else None)
    questions = [q for q in read(ctx.paths.questions, Question) if q.topic in names]
    answered = {e.id for e in output.current()}
    pending, seen = [], set()
    for q in questions:
        if q.id not in answered and q.id not in seen:
            seen.add(q.id)
            pending.append(q)
    run.add_skipped(len(questions) - len(pending))
    run.started(len(pending))
    if not pending:
        return finish(run)

    client = ctx.client("parent")
    role = ctx.role("parent")
    pipeline = ctx.pipeline
    hides = _hides(client.protocol, client.model)
    if role.reasoning and hides:
        log.warning("parent %s: this model does not return its raw reasoning; every answer will be "
                    "excluded from training", client.model)
    systems = _system_prompts(ctx, [t for t in topics if any(q.topic == t.name for q in pending)])
    include_system = bool(pipeline.include_system_prompt)

    def ask(q):
        from overbrainer.llm.types import ChatRequest

        if ctx.interrupted():
            raise Interrupted(INTERRUPTED)
        return client.chat(ChatRequest(user=q.text, system=systems[q.topic]),
                           on_retry=lambda m: run.retrying(q.id, m))

    fatal: BaseException | None = None
    with output:
        work = WorkQueue(ask, pending, pipeline.concurrency, interrupt=ctx.stop_event, name=STAGE)

        def save(outcome) -> None:
            nonlocal fatal
            q = outcome.item
            if outcome.error is not None:
                if isinstance(outcome.error, Interrupted) and fatal is not None:
                    return  # a request abandoned after the fatal error
                if item_error(run, q.id, outcome.error) == FATAL and fatal is None:
                    fatal = outcome.error
                    work.stop()
                return
            response = outcome.value
            example = build_example(q, response, model=client.model,
                                    system=systems[q.topic] if include_system else None,
                                    reasoning=bool(role.reasoning), hides=hides)
            output.append(example)
            run.wrote()
            if response.flagged is not None:
                log.warning("answers: %s: the provider's moderation flagged the question (%s); "
                            "excluded as refused", q.id, response.flagged)
            spent = client.spend(response)
            run.spend(response.usage, spent.cost, spent.estimate, spent.billed)
            run.item_done(q.id, response.usage, spent.cost, excluded=example.meta.excluded is not None)

        for outcome in work.results():
            save(outcome)
            if fatal is not None:
                break
        if fatal is not None:
            # Every answer received by now was paid for: save it before stopping.
            try:
                for outcome in work.drain():
                    if outcome.error is None or not isinstance(outcome.error, Interrupted):
                        try:
                            save(outcome)
                        except Interrupted:
                            pass
            except Exception:
                # The disk error is what the command reports; the provider's must not be lost.
                log.error("answers: stopped by the provider: %s", fatal)
                raise
            return finish(run, fatal)
        if work.interrupted:
            for outcome in work.drain():
                if outcome.error is None:
                    save(outcome)
            raise Interrupted(INTERRUPTED)
    return finish(run)


def _hides(protocol: str, model: str) -> bool:
    from overbrainer.llm.hidden import hides

    return hides(protocol, model)


def _system_prompts(ctx: StageContext, topics: list) -> dict[str, str]:
    templates = ctx.templates("answer_system.txt")
    return {t.name: templates.render("answer_system.txt", topic=t.name, description=t.description)
            for t in topics}
