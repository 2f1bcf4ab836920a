"""Stage `answers`: the parent answers every pending question, `concurrency`
requests in flight, each answer appended by the processing (the only writing) thread as it
completes.

A question counts as done once any answer with its ID exists, excluded ones included. With
`retry_excluded` the pending questions are those whose latest answer is excluded: the new answer
is appended and supersedes it (dataset.records.latest); nothing is removed. A stop (a fatal
provider error, the user's interrupt, the spend cap) sends nothing new, and keeps every answer
received, those in flight within the grace included (support/processor.py).
"""

from __future__ import annotations

import dataclasses
import logging

from overbrainer.config.ready import refuse_hidden_reasoning
from overbrainer.dataset.records import Example, Message, Meta, Question, latest
from overbrainer.llm.hidden import hides
from overbrainer.llm.types import ChatRequest
from overbrainer.pipeline.common import Output, ask, execute, finish, process, processor, read
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.processor import Work

log = logging.getLogger(__name__)

STAGE = "answers"


def run_answers(ctx: StageContext, topics: list, *, force: bool = False,
                retry_excluded: bool = False) -> StageResult:
    refuse_hidden_reasoning(ctx.config)  # before anything is removed or spent
    return execute(ctx, STAGE, "parent", lambda run: _body(ctx, run, topics, force, retry_excluded))


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
    return dataclasses.replace(response, reasoning_kind=kind)


def _body(ctx: StageContext, run: StageRun, topics: list, force: bool, retry_excluded: bool) -> StageResult:
    names = {t.name for t in topics}
    output = Output(ctx.paths.answers, Example, names if force else None)
    questions = [q for q in read(ctx.paths.questions, Question) if q.topic in names]
    pending = pending_questions(questions, output.current(), retry_excluded)
    run.started(len(pending), skipped=len(questions) - len(pending))
    if not pending:
        return finish(run)
    client = ctx.connect("parent")
    role = ctx.role("parent")
    hides = _hides(client.protocol, client.model)
    if role.reasoning and hides:
        log.warning("parent %s: this model does not return its raw reasoning; every answer will be "
                    "excluded from training", client.model)
    systems = _system_prompts(ctx, [t for t in topics if any(q.topic == t.name for q in pending)])
    include_system = bool(ctx.pipeline.include_system_prompt)
    proc = processor(ctx, run)

    def send(q):
        return ask(proc, client, ChatRequest(user=q.text, system=systems[q.topic]),
                   lambda m: run.retrying(q.id, m))

    def keep(q, value) -> None:
        response, spent = value
        example = build_example(q, response, model=client.model,
                                system=systems[q.topic] if include_system else None,
                                reasoning=bool(role.reasoning), hides=hides)
        output.append(example)
        run.wrote()
        if response.flagged is not None:
            log.warning("answers: %s: the provider's moderation flagged the question (%s); "
                        "excluded as refused", q.id, response.flagged)
        run.spend(response.usage, spent.cost, spent.estimate, spent.billed)
        run.item_done(q.id, response.usage, spent.cost, excluded=example.meta.excluded is not None)

    with output:
        return process(run, proc, Work(pending, send, keep, ident=lambda q: q.id))


def pending_questions(questions: list, answers: list, retry_excluded: bool = False) -> list:
    """The questions to ask (each once, in file order): those with no answer yet, or with
    `retry_excluded` those whose latest answer is excluded."""
    if retry_excluded:
        wanted = {e.id for e in latest(answers) if e.meta.excluded is not None}
        ask_for = wanted.__contains__
    else:
        answered = {e.id for e in answers}
        ask_for = lambda qid: qid not in answered  # noqa: E731
    pending, seen = [], set()
    for q in questions:
        if ask_for(q.id) and q.id not in seen:
            seen.add(q.id)
            pending.append(q)
    return pending


def _hides(protocol: str, model: str) -> bool:
    return hides(protocol, model)


def _system_prompts(ctx: StageContext, topics: list) -> dict[str, str]:
    templates = ctx.templates("answer_system.txt")
    return {t.name: templates.render("answer_system.txt", topic=t.name, description=t.description)
            for t in topics}
