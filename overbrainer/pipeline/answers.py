"""Stage `answers`: the parent answers every pending question, `concurrency`
requests in flight, each answer appended by the processing (the only writing) thread as it
completes.

A question counts as done once any answer with its ID exists, excluded ones included. With
`retry_excluded` the pending questions are those whose latest answer is excluded: the new answer
is appended and supersedes it (dataset.records.latest); nothing is removed. A stop (a fatal
provider error, the user's interrupt, the spend cap) sends nothing new, and keeps every answer
received, those in flight within the grace included (support/processor.py). So does the early
stop (pipeline/early_stop.py): too many of the first answers excluded or breaking a rule of
[gate].
"""

from __future__ import annotations

import dataclasses
import logging

from overbrainer.config.model import Role, Topic
from overbrainer.config.ready import refuse_hidden_reasoning
from overbrainer.dataset.quality.gate_rules import Rules
from overbrainer.dataset.records import Example, Message, Meta, Question
from overbrainer.llm.client import LlmClient
from overbrainer.llm.hidden import hides
from overbrainer.llm.spend import Spend
from overbrainer.llm.types import ChatRequest, ChatResponse
from overbrainer.pipeline.common import (
    Output,
    ask,
    execute,
    finish,
    keeping_figures,
    process,
    processor,
    stage_figures,
)
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.early_stop import EarlyStop
from overbrainer.pipeline.pending import PendingQuestions, pending_count
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.processor import Work

log = logging.getLogger(__name__)

STAGE = "answers"


def run_answers(ctx: StageContext, topics: list[Topic], *, force: bool = False,
                retry_excluded: bool = False) -> StageResult:
    refuse_hidden_reasoning(ctx.config)  # before anything is removed or spent
    return execute(ctx, STAGE, "parent", lambda run: _body(ctx, run, topics, force, retry_excluded))


def classify(response: ChatResponse, reasoning: bool) -> str | None:
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


def build_example(question: Question, response: ChatResponse, *, model: str, system: str | None, reasoning: bool,
                  hides: bool) -> Example:
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


def _with_kind(response: ChatResponse, kind: str) -> ChatResponse:
    return dataclasses.replace(response, reasoning_kind=kind)


def _body(ctx: StageContext, run: StageRun, topics: list[Topic], force: bool, retry_excluded: bool) -> StageResult:
    names = {t.name for t in topics}
    figures = stage_figures(ctx, force)
    if figures is not None:
        count, total = pending_count(figures, names, retry_excluded)
        if not count:  # nothing to ask: the saved figures say so, no data file is read
            run.started(0, skipped=total)
            return finish(run)
    output = Output(ctx.paths.answers, Example, names if force else None)
    pending = PendingQuestions(ctx.paths, names, output.records(), retry_excluded,
                               unique=figures is not None and not figures.duplicates)
    count, total = pending.count(figures)
    run.started(count, skipped=total - count)
    if not count:
        return finish(run)
    client, role, hides = parent_client(ctx)
    systems = system_prompts(ctx, topics)
    include_system = bool(ctx.pipeline.include_system_prompt)
    proc = processor(ctx, run)
    noting = figures if not retry_excluded else None
    rules, watch = Rules(ctx.config.gate), EarlyStop(STAGE, ctx.config.gate)

    def send(q: Question) -> tuple[ChatResponse, Spend]:
        return ask(proc, client, ChatRequest(user=q.text, system=systems[q.topic]),
                   lambda m: run.retrying(q.id, m))

    def keep(q: Question, value: tuple[ChatResponse, Spend]) -> None:
        response, spent = value
        example = build_example(q, response, model=client.model,
                                system=systems[q.topic] if include_system else None,
                                reasoning=bool(role.reasoning), hides=hides)
        output.append(example)
        if noting is not None:
            noting.note_answer(q.topic, q.text, example.meta)
        run.wrote()
        if response.flagged is not None:
            log.warning("answers: %s: the provider's moderation flagged the question (%s); "
                        "excluded as refused", q.id, response.flagged)
        run.spend(response.usage, spent.cost, spent.estimate, spent.billed)
        run.item_done(q.id, response.usage, spent.cost, excluded=example.excluded is not None)
        stop = watch.note(rejection(example, rules))
        if stop is not None:
            proc.halt(stop)

    with keeping_figures(ctx, run, noting), output:
        return process(run, proc, Work(pending, send, keep, ident=lambda q: q.id, count=count))


def parent_client(ctx: StageContext) -> tuple[LlmClient, Role, bool]:
    """The parent's client and role, and whether it hides its raw reasoning (said once)."""
    client = ctx.connect("parent")
    role = ctx.role("parent")
    hides = _hides(client.protocol, client.model)
    if role.reasoning and hides:
        log.warning("parent %s: this model does not return its raw reasoning; every answer will be "
                    "excluded from training", client.model)
    return client, role, hides


def rejection(example: Example, rules: Rules) -> str | None:
    """Why the early stop counts `example` as rejected: its exclusion, or the first rule of
    [gate] it breaks (the `gate` stage records that verdict later); None when it is kept."""
    if example.excluded is not None:
        return example.excluded
    broken = rules.check(example) if rules.active else None
    return broken[0] if broken is not None else None


def _hides(protocol: str, model: str) -> bool:
    return hides(protocol, model)


def system_prompts(ctx: StageContext, topics: list[Topic]) -> dict[str, str]:
    templates = ctx.templates("answer_system.txt")
    return {t.name: templates.render("answer_system.txt", topic=t.name, description=t.description)
            for t in topics}
