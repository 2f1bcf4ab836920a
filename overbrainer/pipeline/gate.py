"""Stage `gate`: the quality gate on the answers, between `answers` and `split`
(docs/stages.md#gate).

Each usable answer (the latest of its question, of a selected topic, not excluded by
`answers`) goes through the rule checks of `[gate]` (free; dataset/quality/gate_rules.py), then, when
`roles.grader` is set and the rules kept it, through the grader: one request with the rubric
prompts/grader.txt, the answer kept when its score reaches `[gate] grader_threshold`. Every
verdict is appended to data/gate.jsonl (dataset/quality/verdicts.py) as it is reached; answers.jsonl
is never touched, and `split` leaves out the answers whose verdict is drop.

An answer judged by a check with the current settings is never judged again by it: a rerun
sends nothing for the answers graded already, unless the rubric, the grader's provider or
model, or the threshold changed (their digest is the verdicts' `settings`). The grader's
requests go through the stage's request processor, so their cost is counted in the history
and capped by `--max-cost` / `max_cost_usd` like any stage's. The early stop
(pipeline/early_stop.py) watches the verdicts in the order they come.

Memory: the answer index (dataset/answer_index.py), a 64-bit key per verdict with the current
settings, the gated answers' IDs, and 4 bytes per answer to judge; never the answers' text but
that of the answers being graded.
"""

from __future__ import annotations

import json
import logging
import os
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from overbrainer.config.model import Config, Topic
from overbrainer.config.templates import load_templates
from overbrainer.dataset import state as dataset_state
from overbrainer.dataset.answer_index import AnswerIndex, index_answers
from overbrainer.dataset.ids import packed
from overbrainer.dataset.jsonl import LineReader, iter_records
from overbrainer.dataset.quality.gate_rules import Rules
from overbrainer.dataset.quality.verdicts import (
    Verdict,
    answer_digest,
    answer_text,
    gate_drops,
    judged,
    judged_key,
    settings_digest,
)
from overbrainer.dataset.records import Example
from overbrainer.llm.spend import Spend
from overbrainer.llm.types import ChatRequest, ChatResponse
from overbrainer.pipeline.common import Output, ask, execute, finish, process, processor
from overbrainer.pipeline.context import StageContext
from overbrainer.pipeline.early_stop import EarlyStop, StoppedEarly
from overbrainer.pipeline.stage import StageResult, StageRun
from overbrainer.support.processor import Work
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

STAGE = "gate"
TEMPLATE = "grader.txt"
NO_SCORE = "the grader's reply holds no score from 0 to 10; the answer is graded again on the next run"
_OBJECT = re.compile(r"\{.*\}", re.S)
_SCORE = re.compile(r'"score"\s*:\s*"?(\d+(?:\.\d+)?)')


def gate_settings(config: Config, project_dir: Path) -> dict[str, str]:
    """check -> digest of what decides its verdicts, for the configured checks only: `rules`
    when a rule of [gate] is set, `grader` when roles.grader is (its rubric, provider, model
    and the threshold)."""
    out = {}
    rules = Rules(config.gate)
    if rules.active:
        out["rules"] = settings_digest(rules.settings())
    role = config.roles.grader
    if role is not None:
        rubric = load_templates(project_dir, [TEMPLATE]).source(TEMPLATE)
        out["grader"] = settings_digest({"rubric": rubric, "provider": role.provider, "model": role.model,
                                         "threshold": config.gate.grader_threshold})
    return out


def gate_configured(config: Config) -> bool:
    """Whether `gate` has any check to make (`run` leaves it out otherwise)."""
    return Rules(config.gate).active or config.roles.grader is not None


def run_gate(ctx: StageContext, topics: list[Topic]) -> StageResult:
    role = "grader" if ctx.config.roles.grader is not None else None
    return execute(ctx, STAGE, role, lambda run: _body(ctx, run, {t.name for t in topics}))


@dataclass
class _Gate:
    """One execution's state: what is judged already, and what this one judges."""

    ctx: StageContext
    run: StageRun
    settings: dict[str, str]
    rules: Rules
    index: AnswerIndex
    output: Output
    watch: EarlyStop
    done: set[int] = field(default_factory=set)  # judged_key of the verdicts with the current settings
    todo: array[int] = field(default_factory=lambda: array("I"))
    to_grade: array[int] = field(default_factory=lambda: array("I"))

    def verdict(self, ex: Example, digest: str, check: str, drop: tuple[str, str] | None, *,
                detail: str | None = None, score: float | None = None, model: str | None = None,
                usage: Usage | None = None, cost: float | None = None) -> None:
        reason, text = drop if drop is not None else (None, detail)
        usage = usage or Usage()
        self.output.append(Verdict(ex.id, digest, check, "drop" if drop else "keep", reason, text, score,
                                   self.settings[check], model, usage.input_tokens, usage.output_tokens, cost))
        self.run.wrote()


def _body(ctx: StageContext, run: StageRun, names: set[str]) -> StageResult:
    settings = gate_settings(ctx.config, ctx.project_dir)
    if not settings:
        log.info("gate: no check is configured ([gate] rules, roles.grader): every usable answer goes to split")
        run.started(0)
        return finish(run)
    judged_before = dataset_state.unchanged_gate(ctx.paths, dataset_state.gate_key(ctx.paths, settings, names))
    if judged_before is not None:  # nothing changed since the last complete gate: nothing is read
        run.started(0, skipped=judged_before)
        return finish(run)
    index = index_answers(ctx.paths.answers)
    with Output(ctx.paths.gate, Verdict) as output:
        g = _Gate(ctx, run, settings, Rules(ctx.config.gate), index, output, EarlyStop(STAGE, ctx.config.gate))
        skipped = _pending(g, names)
        run.started(len(g.todo), skipped=skipped)
        stop = _apply_rules(g)
        result = finish(run, stop) if stop is not None or not g.to_grade else _grade(g)
    st = result.stats
    if result.error is None and not st.failed:
        dataset_state.save_gate(ctx.paths, dataset_state.gate_key(ctx.paths, settings, names),
                                st.skipped + st.done + st.excluded)
    return result


def _selected(answers: Path, index: AnswerIndex, names: set[str],
              drops: dict[Any, tuple[str, str]]) -> Iterator[tuple[int, Example, str, bool]]:
    """(number, answer, digest, dropped) of each latest answer of the topics `names` that
    `answers` kept; `dropped`: a check dropped it with the current settings."""
    for offset, ex in iter_records(answers, Example, offsets=True):
        n = index.number[packed(ex.id)]
        if index.offset[n] != offset or ex.topic not in names or ex.excluded is not None:
            continue  # superseded, not selected, or excluded by `answers` already
        digest = answer_digest(ex)
        dropped = drops.get(packed(ex.id))
        yield n, ex, digest, dropped is not None and dropped[0] == digest


def _pending(g: _Gate, names: set[str]) -> int:
    """Fill g.todo with the numbers of the answers some check has to judge; the count of the
    others (judged already by every check, or dropped)."""
    done = g.done = judged(g.ctx.paths.gate, g.settings)
    skipped = 0
    for n, ex, digest, dropped in _selected(g.ctx.paths.answers, g.index, names,
                                            gate_drops(g.ctx.paths.gate, g.settings)):
        if dropped or all(judged_key(ex.id, digest, check, s) in done for check, s in g.settings.items()):
            skipped += 1
        else:
            g.todo.append(n)
    return skipped


def to_grade(ctx: StageContext, names: set[str]) -> tuple[int, int]:
    """(answers, the bytes of their questions and answers): the answers of topics `names` that
    `gate` would send the grader (roles.grader), at most: those it has not graded with the current
    settings and no check dropped (the rule checks may still keep some from it). `--plan` prices
    them; (0, 0) without a grader or when nothing changed since the last complete gate."""
    settings = gate_settings(ctx.config, ctx.project_dir)
    if "grader" not in settings or not os.path.exists(ctx.paths.answers):
        return 0, 0
    if dataset_state.unchanged_gate(ctx.paths, dataset_state.gate_key(ctx.paths, settings, names)) is not None:
        return 0, 0
    done, count, size = judged(ctx.paths.gate, settings), 0, 0
    for _, ex, digest, dropped in _selected(ctx.paths.answers, index_answers(ctx.paths.answers), names,
                                            gate_drops(ctx.paths.gate, settings)):
        if not dropped and judged_key(ex.id, digest, "grader", settings["grader"]) not in done:
            count += 1
            size += len(_question(ex).encode()) + len(answer_text(ex).encode())
    return count, size


def _apply_rules(g: _Gate) -> StoppedEarly | None:
    """The rules on every answer to judge; those they keep go to the grader (when it is set
    and has not graded them). The early stop's error, or None."""
    done, rules_on = g.done, "rules" in g.settings
    with LineReader(g.ctx.paths.answers) as source:
        for n in g.todo:
            g.ctx.check()  # the user's interrupt
            ex = source.record_at(g.index.offset[n], Example)
            digest = answer_digest(ex)
            drop = None
            if rules_on and judged_key(ex.id, digest, "rules", g.settings["rules"]) not in done:
                drop = g.rules.check(ex)
                g.verdict(ex, digest, "rules", drop)
            if drop is None and "grader" in g.settings and (
                    judged_key(ex.id, digest, "grader", g.settings["grader"]) not in done):
                g.to_grade.append(n)  # (graded already with these settings: kept, never paid twice)
                continue
            g.run.item_done(ex.id, Usage(), None, excluded=drop is not None)
            stop = g.watch.note(drop[0] if drop else None)
            if stop is not None:
                return stop
    return None


def _grade(g: _Gate) -> StageResult:
    ctx, run = g.ctx, g.run
    client = ctx.connect("grader")
    templates = ctx.templates(TEMPLATE)
    threshold = ctx.config.gate.grader_threshold
    proc = processor(ctx, run)

    def items() -> Iterator[Example]:
        with LineReader(ctx.paths.answers) as source:
            for n in g.to_grade:
                yield source.record_at(g.index.offset[n], Example)

    def send(ex: Example) -> tuple[ChatResponse, Spend]:
        prompt = templates.render(TEMPLATE, topic=ex.topic, subtopic=ex.subtopic, question=_question(ex),
                                  answer=answer_text(ex))
        return ask(proc, client, ChatRequest(user=prompt), lambda m: run.retrying(ex.id, m))

    def keep(ex: Example, value: tuple[ChatResponse, Spend]) -> None:
        response, spent = value
        run.spend(response.usage, spent.cost, spent.estimate, spent.billed)
        score, why = parse_grade(response.content or "")
        if score is None:
            run.item_failed(ex.id, NO_SCORE)
            return
        drop = ("grader", f"score {score:g} < {threshold:g}: {why}") if score < threshold else None
        g.verdict(ex, answer_digest(ex), "grader", drop, score=score, detail=why, model=client.model,
                  usage=response.usage, cost=None if spent.cost is None else round(spent.cost, 8))
        run.item_done(ex.id, response.usage, spent.cost, excluded=drop is not None)
        stop = g.watch.note("grader" if drop else None)
        if stop is not None:
            proc.halt(stop)

    return process(run, proc, Work(items(), send, keep, ident=lambda ex: ex.id, count=len(g.to_grade)))


def _question(ex: Example) -> str:
    return next((m.content for m in ex.messages if m.role == "user"), "")


def parse_grade(text: str) -> tuple[float | None, str | None]:
    """(score, reason) of a grader's reply: its first JSON object's `score` (0 to 10) and
    `reason`, else a `"score": N` anywhere in it; (None, None) when there is none."""
    found = _OBJECT.search(text)
    if found is not None:
        try:
            obj = json.loads(found.group(0))
        except ValueError:
            obj = None
        if isinstance(obj, dict) and _valid(obj.get("score")):
            reason = obj.get("reason")
            return float(obj["score"]), reason if isinstance(reason, str) else None
    m = _SCORE.search(text)
    if m is not None and _valid(float(m.group(1))):
        return float(m.group(1)), None
    return None, None


def _valid(score: object) -> bool:
    return isinstance(score, (int, float)) and not isinstance(score, bool) and 0 <= score <= 10
