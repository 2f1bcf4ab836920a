"""`--plan`: what a command would send and what it would cost, without sending a generation
request (docs/stages.md#plan).

Per LLM stage: the requests still to make (pipeline/needs.py), the tokens expected and their cost,
and an upper bound at `max_tokens`. Expected tokens come from this project's own history when it
has one (the answers on disk for `answers`, history.jsonl's tokens per item for the list stages),
else from the prompts' sizes and stated typical figures: a prompt counts a token per 4 bytes, a
list answer a token per 4 bytes of the items it should hold (32 tokens an item when the project
has none to measure), an answer a typical 1,000 output tokens (`max_tokens` when lower; basis
`typical`). The bound counts every prompt byte as a token (as the spend cap does), plus
`max_tokens` of output per request. Prices are the role's (llm/prices.py: the configuration, the
provider's listing read once per provider, not a generation request, or the genai-prices
database), each stage saying where its role's comes from; a model with no price says so. Under a
spend cap, a role that will send and has no price is refused before anything is printed, exactly
as the command itself refuses it (`refuse_unpriced`). `run` with roles.grader plans the gate's
grader too. An online stage says how long it will take at the rate limits known for its model
(`minutes`): those an earlier command learned from the provider's answers
(dataset/rate_limits.py), lowered by the provider's `max_requests_per_minute` /
`max_tokens_per_minute`, at the pace llm/pacing.py keeps. A role on a served provider brings no
pod up: its cost is its expected output tokens at the $ per million its earlier serves measured,
plus a boot, at most its pods' max_hours at their price (runpod/serve_commands.served_cost). Its
pods are one set, brought up once per command and kept across its stages: each stage on it says
their bound, and the total counts a served provider's boot and bound once (`totals`).
Training, when the command would train: pipeline/plan_train.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer.config.model import RunpodTarget, Topic
from overbrainer.dataset import rate_limits
from overbrainer.dataset import state as dataset_state
from overbrainer.dataset.accounting.history import HistoryEntry, kept_share, read_history
from overbrainer.dataset.figures import Figures
from overbrainer.errors import OverbrainerError
from overbrainer.front.session import Session
from overbrainer.llm.client import PROMPT_FRAMING
from overbrainer.llm.pacing import SAFETY
from overbrainer.llm.price_db import missing, price_fix
from overbrainer.llm.prices import Price
from overbrainer.llm.rate_headers import KINDS as PACED
from overbrainer.pipeline.context import StageContext, role_key
from overbrainer.pipeline.needs import Need, needs
from overbrainer.pipeline.plan_train import TrainPlan, after_plans, dearest_pod, train_plan
from overbrainer.pipeline.questions import topics_without_subtopics
from overbrainer.runpod.serve_commands import ServedCost, served_cost
from overbrainer.support.fmt import duration
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

BYTES_PER_TOKEN = 4
LIST_ITEM_TOKENS = 32
# An answer's output tokens when the project has none to measure yet (its reasoning included):
# a typical figure, not a bound (the bound is max_tokens).
TYPICAL_ANSWER_TOKENS = 1000
# A grader's reply: a JSON object with a score and one sentence.
TYPICAL_GRADE_TOKENS = 100
UNITS = {"subtopics": "topic", "questions": "subtopic", "answers": "question", "gate": "answer"}


@dataclass
class StagePlan:
    need: Need
    model: str = ""
    provider: str = ""
    max_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    basis: str = "prompts"  # history | prompts | typical (answers: prompts and a typical answer size)
    cost: float | None = None
    cost_max: float | None = None
    unpriced: str | None = None  # why the cost is unknown
    price_source: str | None = None  # where the role's price comes from (llm/prices.Price.source)
    mode: str = "online"  # answers: batch mode counts the batch price (docs/batch.md)
    sides: tuple[float, float, float, float] | None = None  # answers: online cost, its bound, batch cost, its bound
    minutes: float | None = None  # online: how long at the known rate limits (None: none known)
    limits: dict[str, float] | None = None  # those limits, a minute's by kind
    served: ServedCost | None = None  # a role on a served provider: its pods (boot and bound), one set a command

    def line(self) -> str:
        n = self.need
        about = "about " if n.estimated else ""
        head = f"{n.stage}: {about}{_count(n.requests, 'request')}"
        if not n.requests:
            return f"{head}: nothing to ask{_held(n)}"
        head += f" to {n.role} {self.model}"
        if n.estimated:
            head += " (estimated from the configured counts: earlier stages have not run yet)"
        basis = "from this project's history" if self.basis == "history" else "from the prompts' sizes"
        if self.basis == "typical":
            basis += f" and a typical {self.output_tokens // max(1, n.requests)} tokens an answer: no answer yet"
        if self.basis == "typical" and n.stage == "gate":
            basis = f"from the prompts' sizes and a typical {TYPICAL_GRADE_TOKENS} tokens a grade: none yet"
        tokens = f"expected tokens {self.input_tokens} in, {self.output_tokens} out ({basis})"
        if self.unpriced:
            return f"{head}; {tokens}; cost unknown ({self.unpriced}){self._duration()}{_held(n)}"
        bound = (f"the pods of provider {self.served.provider}, counted once in the total whatever stages "
                 "use them" if self.served is not None else f"at max_tokens {self.max_tokens}")
        return (f"{head}; {tokens}, ${self.cost:.4f}; at most ${self.cost_max:.4f} "
                f"({bound}){self._sides()}; price from {self.price_source}"
                f"{self._duration()}{_held(n)}")

    def _duration(self) -> str:
        if self.minutes is None or not self.limits:
            return ""
        at = ", ".join(f"{v:,.0f} {k.replace('_', ' ')}" for k, v in self.limits.items())
        return f"; about {duration(60 * self.minutes, words=True)} at the rate limits known ({at} a minute)"

    def _sides(self) -> str:
        if self.sides is None:
            return ""
        o, om, b, bm = self.sides
        return (f"; online ${o:.4f} (at most ${om:.4f}), batch ${b:.4f} (at most ${bm:.4f}); "
                f"{self.mode} mode counted")

    def data(self) -> dict[str, Any]:
        n = self.need
        return {"stage": n.stage, "requests": n.requests, "estimated": n.estimated, "role": n.role,
                "provider": self.provider or None, "model": self.model or None,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "basis": self.basis,
                "cost_usd": _rounded(self.cost), "cost_max_usd": _rounded(self.cost_max),
                "price_known": self.unpriced is None, "price_source": self.price_source, "held": n.held,
                **self._sides_data(), "minutes": None if self.minutes is None else round(self.minutes, 2),
                "rate_limits": self.limits, **({"served_by": self.served.provider} if self.served else {})}

    def _sides_data(self) -> dict[str, Any]:
        if self.sides is None:
            return {"mode": self.mode} if self.need.stage == "answers" else {}
        o, om, b, bm = (_rounded(x) for x in self.sides)
        return {"mode": self.mode, "online_cost_usd": o, "online_cost_max_usd": om, "batch_cost_usd": b,
                "batch_cost_max_usd": bm}


def _held(need: Need) -> str:
    """`; 1 topic(s) held back: …` (pipeline/held.py): items not asked, their last round added nothing."""
    if not need.held:
        return ""
    return (f"; {need.held} {UNITS[need.stage]}(s) held back: no new items at the last try; "
            "change the prompt or the config to ask again")


def stage_plans(ctx: StageContext, stages: list[str], topics: list[Topic], *, force: bool = False,
                retry_excluded: bool = False) -> list[StagePlan]:
    history = read_history(ctx.project_dir)
    figures = dataset_state.current(ctx.paths)
    plans = [_priced(ctx, need, history, figures)
             for need in needs(ctx, stages, topics, force=force, retry_excluded=retry_excluded, figures=figures)]
    known = rate_limits.read(ctx.paths)
    for plan in plans:
        _timed(ctx, plan, known)
    return plans


def _timed(ctx: StageContext, plan: StagePlan, known: rate_limits.Known) -> None:
    """How long an online stage with requests takes at its model's known rate limits: its
    requests and expected tokens at the pacer's pace, by the limit that binds."""
    if not plan.need.requests or ctx.pipeline.stage_mode(plan.need.stage) != "online":
        return
    provider = ctx.config.providers.get(plan.provider)
    configured = {"requests": provider.max_requests_per_minute if provider else None,
                  "tokens": provider.max_tokens_per_minute if provider else None}
    limits = {k: v for k, v in known.get((plan.provider, plan.model), {}).items() if k in PACED}
    for kind, value in configured.items():
        if value:
            limits[kind] = min(limits.get(kind, value), float(value))
    if not limits:
        return
    demand = {"requests": plan.need.requests, "tokens": plan.input_tokens + plan.output_tokens,
              "input_tokens": plan.input_tokens, "output_tokens": plan.output_tokens}
    plan.limits = dict(sorted(limits.items()))
    plan.minutes = max(demand[kind] / (SAFETY * value) for kind, value in limits.items())


def _priced(ctx: StageContext, need: Need, history: list[HistoryEntry], figures: Figures) -> StagePlan:
    role = ctx.role(need.role)
    if role is None:  # needs() names only the roles the stages use, configured
        raise ValueError(f"roles.{need.role} is not configured")
    plan = StagePlan(need, model=role.model, provider=role.provider,
                     max_tokens=role.max_tokens)
    if not need.requests:
        plan.cost = plan.cost_max = 0.0
        return plan
    _expect(plan, history, figures)
    provider, _ = ctx.config.provider_for(need.role)
    if provider.serve is not None:  # its pods are its cost; the plan brings none up
        _served(ctx, plan, provider.name)
        return plan
    price, why = _price(ctx, need.role)
    if price is None:
        plan.unpriced = why
        return plan
    plan.price_source = price.source
    plan.cost, plan.cost_max = _costs(price, plan)
    if need.stage == "answers":
        plan.sides = (plan.cost, plan.cost_max, *_costs(price.batched(), plan))
        plan.mode = ctx.pipeline.stage_mode("answers")
        if plan.mode == "batch":
            plan.cost, plan.cost_max = plan.sides[2], plan.sides[3]
    return plan


def _served(ctx: StageContext, plan: StagePlan, provider: str) -> None:
    """A role on a served provider: its expected output tokens at the $ per million output
    tokens its earlier serves measured, plus a boot; at most its pods' max_hours at the price of the
    dearest GPU type they may land on (Runpod's catalog, read: nothing is rented)."""
    config = ctx.config
    serve = config.providers[provider].serve
    target = config.target(serve.target) if serve is not None else None
    if not isinstance(target, RunpodTarget):  # the configuration allows only a runpod one
        raise ValueError(f"provider {provider} is not served on a runpod target")
    _, rate, _ = dearest_pod(config, target)
    sc = served_cost(config, provider, ctx.paths.serves, rate)
    expected = sc.expected(plan.output_tokens)
    if expected is None or sc.at_most is None:
        plan.unpriced = sc.unknown() if expected is None else \
            f"served by provider {provider}: the price of its pods is unknown (Runpod's catalog)"
        return
    assert sc.per_million is not None  # expected is known
    plan.cost, plan.cost_max, plan.served = expected, sc.at_most, sc
    plan.price_source = (f"the pods of provider {provider}: ${sc.per_million:,.2f} per million output tokens "
                         "measured, plus a boot; at most their max_hours")


def _costs(price: Price, plan: StagePlan) -> tuple[float, float]:
    """(expected cost, upper bound) of the plan's requests at `price` (a long-context tier: that
    of the mean request)."""
    need = plan.need
    cost = price.cost(Usage(plan.input_tokens, plan.output_tokens), requests=need.requests)
    bound = price.bound(need.prompt_bytes + need.requests * PROMPT_FRAMING, need.requests * plan.max_tokens,
                        requests=need.requests)
    return cost, bound


def _expect(plan: StagePlan, history: list[HistoryEntry], figures: Figures) -> None:
    """The expected tokens: the project's own figures per item, else the prompts' sizes."""
    need = plan.need
    per = _measured(need.stage, history, figures)
    if per is not None:
        plan.basis = "history"
        plan.input_tokens, plan.output_tokens = round(per[0] * need.items), round(per[1] * need.items)
        return
    plan.input_tokens = -(-need.prompt_bytes // BYTES_PER_TOKEN)
    if need.stage in ("answers", "gate"):
        plan.basis = "typical"
        typical = TYPICAL_ANSWER_TOKENS if need.stage == "answers" else TYPICAL_GRADE_TOKENS
        plan.output_tokens = need.requests * min(typical, plan.max_tokens)
    else:
        plan.output_tokens = need.list_items * _item_tokens(need.stage, figures)


def _measured(stage: str, history: list[HistoryEntry], figures: Figures) -> tuple[float, float] | None:
    """(input, output) tokens per item as this project spent them, or None."""
    if stage == "answers":
        n, i, o = figures.answer_tokens  # the latest answer of each question that used tokens
        if n:
            return i / n, o / n
    lines = [e for e in history if e.stage == stage and e.done + e.excluded > 0
             and (e.input_tokens or e.output_tokens)]
    items = sum(e.done + e.excluded for e in lines)
    if not items:
        return None
    return sum(e.input_tokens for e in lines) / items, sum(e.output_tokens for e in lines) / items


def _item_tokens(stage: str, figures: Figures) -> int:
    topics = figures.topics.values()
    if stage == "subtopics":
        size, count = sum(t.subtopic_bytes for t in topics), sum(t.subtopics for t in topics)
    else:
        size, count = sum(t.question_bytes for t in topics), sum(t.questions for t in topics)
    if not count:
        return LIST_ITEM_TOKENS
    return -(-size // (count * BYTES_PER_TOKEN)) + 2  # quotes and a comma


def _price(ctx: StageContext, role_name: str) -> tuple[Price | None, str | None]:
    """(Price, None), or (None, why it is unknown and how to give one)."""
    try:
        client = ctx.client(role_name)
    except OverbrainerError as e:
        return None, str(e)
    price = client.price
    if price is None:
        provider, _ = ctx.config.provider_for(role_name)
        key = role_key(ctx.config, role_name)
        return None, f"no price for {client.model} on provider {client.provider_name}: {missing(provider)}; " \
                     f"{price_fix(key)}"
    return price, None


def totals(plans: list[StagePlan], train: TrainPlan | None = None) -> dict[str, Any]:
    """The total line's figures: unknown parts leave the sums partial (`complete` false). A served
    provider's pods are one set a command brings up once: their boot and bound count once, with
    the first stage on them."""
    known = [p for p in plans if p.unpriced is None]
    cost = cost_max = 0.0
    pods: set[str] = set()
    for p in known:  # known: priced
        cost += p.cost or 0.0
        if p.served is not None and p.served.provider in pods:
            cost -= p.served.boot or 0.0
            continue
        cost_max += p.cost_max or 0.0
        if p.served is not None:
            pods.add(p.served.provider)
    complete = len(known) == len(plans)
    if train is not None:
        cost += train.cost or 0.0
        if train.cost_max is None:
            complete = False
        else:
            cost_max += train.cost_max
    timed = [p.minutes for p in plans if p.minutes is not None]
    untimed = any(p.need.requests and p.minutes is None and (p.need.stage != "answers" or p.mode == "online")
                  for p in plans)
    return {"stage": "total", "requests": sum(p.need.requests for p in plans),
            "estimated": any(p.need.estimated for p in plans), "cost_usd": _rounded(cost),
            "cost_max_usd": _rounded(cost_max), "complete": complete,
            "minutes": round(sum(timed), 2) if timed else None, "minutes_complete": bool(timed) and not untimed}


def total_line(total: dict[str, Any], cap: float | None) -> str:
    about = "about " if total["estimated"] else ""
    plus = "" if total["complete"] else " + what is unknown above"
    line = (f"total: {about}{_count(total['requests'], 'request')}; expected ${total['cost_usd']:.4f}{plus}; "
            f"at most ${total['cost_max_usd']:.4f}{plus}")
    if total.get("minutes") is not None:
        more = "" if total.get("minutes_complete") else " + the stages whose rate limits are unknown"
        line += f"; online about {duration(60 * total['minutes'], words=True)} at the rate limits known{more}"
    if cap is not None:
        line += f"; max_cost_usd ${cap:.4f} stops the LLM stages before a request that would pass it"
    return line


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 8)


# The stages each command plans: `questions` asks first for the subtopics of topics with none;
# `gate` only with roles.grader (needs.py).
COMMAND_STAGES = {"subtopics": ["subtopics"], "questions": ["subtopics", "questions"], "answers": ["answers"],
                  "run": ["subtopics", "questions", "answers", "gate", "split"]}


def plan_flow(session: Session, command: str, *, topic: str | None = None, force: bool = False,
              retry_excluded: bool = False, max_cost: float | None = None, retrain: bool = False) -> dict[str, Any]:
    """`<command> --plan`: one line per stage (training too when `run` has [training]: whether it
    would train, and what that may cost), then the total; nothing is sent but the providers' model
    listings (and Runpod's GPU catalog). `retrain`: `run --retrain`'s plan."""
    with StageContext(session.project_dir, session.config, max_cost=max_cost) as ctx:
        return _plan(ctx, session, command, topic=topic, force=force, retry_excluded=retry_excluded,
                     retrain=retrain)


def _plan(ctx: StageContext, session: Session, command: str, *, topic: str | None, force: bool,
          retry_excluded: bool, retrain: bool) -> dict[str, Any]:
    config = ctx.config
    topics = ctx.select_topics(topic)
    # Under a cap, what the command would refuse the plan refuses, with the same line (exit 2).
    refuse_unpriced(ctx, COMMAND_STAGES[command], topics, force=force, retry_excluded=retry_excluded)
    plans = command_plans(ctx, command, topics, force=force, retry_excluded=retry_excluded)
    for p in plans:
        session.report(p.line(), p.data())
    if command == "run":
        session.report(*_split_line(session.project_dir))
    train = None
    if command == "run" and config.training is not None:
        train = train_plan(session.project_dir, config, retrain=retrain,
                           data_changes=any(p.need.requests for p in plans))
        session.report(train.line(), train.data())
        for line, data in after_plans(config):
            session.report(line, data)
    total = totals(plans, train)
    session.report(total_line(total, ctx.budget.cap if ctx.budget is not None else None), total)
    return total


def command_plans(ctx: StageContext, command: str, topics: list[Topic], *, force: bool = False,
                  retry_excluded: bool = False) -> list[StagePlan]:
    """The plans of the LLM stages `command` runs (`questions`: the subtopics of topics with none
    first); `totals(plans)` sums them (the TUI's start dialog says it)."""
    stages = [s for s in COMMAND_STAGES[command] if s != "split"]
    plans = []
    if command == "questions":
        plans = stage_plans(ctx, ["subtopics"], topics_without_subtopics(ctx, topics))
        stages = ["questions"]
    return plans + stage_plans(ctx, stages, topics, force=force, retry_excluded=retry_excluded)


def _split_line(project_dir: Path) -> tuple[str, dict[str, Any]]:
    """`split: no request`, and the kept share so far (history.kept_share) once a split counted it."""
    data = {"stage": "split", "requests": 0, "cost_usd": 0, "cost_max_usd": 0}
    share = kept_share(read_history(project_dir))
    if share is None:
        return "split: no request", data
    return f"split: no request; so far {share.text()}", {**data, **share.data()}


def refuse_unpriced(ctx: StageContext, stages: list[str], topics: list[Topic], **kw: Any) -> None:
    """Under a spend cap, before anything is sent: every role that will send (its stage has
    requests to make; the gate's grader whenever it is set) must have a known price, else
    ConfigError (exit 2) naming the role and its `price` key. `run` and `run --plan` both call it."""
    if ctx.budget is None:
        return
    roles = {n.role for n in needs(ctx, [s for s in stages if s != "gate"], topics, **kw) if n.requests}
    if "gate" in stages and ctx.config.roles.grader is not None:
        roles.add("grader")
    for role in sorted(roles):
        if ctx.config.provider_for(role)[0].serve is None:  # a served one costs its pods (their own caps)
            ctx.connect(role)
