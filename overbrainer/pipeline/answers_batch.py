"""Stage `answers` in batch mode (`[pipeline] mode = "batch"`, docs/batch.md): each call settles
what a crashed command left half-sent, collects the batches that ended into answers.jsonl (the
same records as online: same body, same parser, same `build_example`; cost at the batch price),
sends what is missing (items back without an answer once are sent once more; twice, they are
failed items; a batch refused whole because the model's batch queue was full counts for neither:
its limit is learned and kept, dataset/rate_limits.py), and returns with what is still pending.
`wait`: poll until nothing is pending (backing off, interruptible), collecting as batches end.
"""

from __future__ import annotations

import itertools
import logging
from typing import Iterator

from overbrainer.config.model import Topic
from overbrainer.config.ready import refuse_hidden_reasoning
from overbrainer.dataset import rate_limits
from overbrainer.dataset.records import Example, Question
from overbrainer.dataset.batch_journal import COLLECTED, SUBMITTED, Journal, Submission, failures, in_flight
from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.llm.batch_anthropic import AnthropicBatches
from overbrainer.llm.batch_openai import OpenAIBatches
from overbrainer.llm.batch_types import ANTHROPIC, OPENAI, BatchStatus, batch_api
from overbrainer.llm.client import LlmClient
from overbrainer.llm.errors import LlmError
from overbrainer.llm.types import ChatResponse
from overbrainer.pipeline.answers import build_example, parent_client, system_prompts
from overbrainer.pipeline.batch_submit import BatchApi, queue_of, recover, submit
from overbrainer.pipeline.common import Output, execute, finish, keeping_figures, stage_figures
from overbrainer.pipeline.context import INTERRUPTED, StageContext
from overbrainer.pipeline.pending import PendingQuestions
from overbrainer.pipeline.stage import StageResult, StageRun, some

log = logging.getLogger(__name__)

STAGE = "answers"
POLL_FIRST, POLL_MAX = 2.0, 60.0  # --wait: seconds between looks, growing ×1.5 to the cap


def batches_for(client: LlmClient) -> BatchApi:
    """The batch API of a connected client (ConfigError-free: config/build.py refused the rest)."""
    api = batch_api(client.protocol, client.dialect)
    if api is None:
        raise OverbrainerError(f"provider {client.provider_name} has no batch API")
    return AnthropicBatches(client) if api == ANTHROPIC else OpenAIBatches(client)


def run_answers_batch(ctx: StageContext, topics: list[Topic], *, wait: bool = False) -> StageResult:
    refuse_hidden_reasoning(ctx.config)
    return execute(ctx, STAGE, "parent", lambda run: BatchAnswers(ctx, run, topics).run(wait))


class BatchAnswers:
    def __init__(self, ctx: StageContext, run: StageRun, topics: list[Topic]):
        self.ctx, self.run_, self.names = ctx, run, {t.name for t in topics}
        self.journal = Journal(ctx.paths.batches)
        self.client, self.role, self.hides = parent_client(ctx)
        self.api = batches_for(self.client)
        self.systems = system_prompts(ctx, topics)
        self.include_system = bool(ctx.pipeline.include_system_prompt)
        self.answered: set[str] = set()
        self.failed: list[str] = []
        self.statuses: dict[str, BatchStatus] = {}  # by submission id: the provider's last word
        self.looked = False  # a look announced what it collects (StageRun.collecting)
        self.submitted = 0
        self.capped = 0
        self.capped_bound = 0.0
        self.reserved: dict[str, float] = {}  # what this command holds under the cap, by submission
        self.lost: list[str] = []  # the last look's creates whose answer was lost, not settled
        self.queued = 0  # questions the last look left out: no room in the model's batch queue
        self.queue_limit = self._known_queue()  # OpenAI's batch queue limit of the model (None: unknown)

    def run(self, wait: bool) -> StageResult:
        figures = stage_figures(self.ctx, False)
        output = Output(self.ctx.paths.answers, Example)
        with keeping_figures(self.ctx, self.run_, figures), output:
            self.output, self.figures = output, figures
            try:
                problems = self.step()
                delay = POLL_FIRST
                while wait and self.open():
                    self.ctx.check()
                    log.info("answers: waiting for %s; next look in %.0fs", self.pending_text(), delay)
                    if self.ctx.stop_event.wait(delay):
                        raise Interrupted(INTERRUPTED)
                    delay = min(delay * 1.5, POLL_MAX)
                    problems = self.step()
            except LlmError as e:
                return self.result(finish(self.run_, e), [])
        return self.result(finish(self.run_), problems)

    # --- one look: recover, collect, submit ------------------------------------------------------

    def step(self) -> list[str]:
        subs = self.journal.all(STAGE)
        problems = recover(self.api, self.journal, subs)
        ended = [s for s in subs if s.state == SUBMITTED and self._ended(s)]
        if ended or not self.looked:  # the first look says what it collects, even nothing
            self.run_.collecting(sum(len(s.items) for s in ended))
            self.looked = True
        if ended:
            self.collect(ended)
        self.send()
        return problems + self.lost

    def open(self) -> list[Submission]:
        return [s for s in self.journal.all(STAGE) if s.open]

    def _ended(self, sub: Submission) -> bool:
        status: BatchStatus = self.api.status(sub)
        if status.status != sub.status:
            sub.status = status.status
            self.journal.write(sub)
        self.statuses[sub.id] = status  # kept for collect
        return status.ended

    def _pending(self, names: set[str] | None = None) -> Iterator[Question]:
        """The questions with no answer (of `names`, default the selected topics)."""
        return (q for q in PendingQuestions(self.ctx.paths, names or self.names, self.output.records())
                if q.id not in self.answered)

    def collect(self, ended: list[Submission]) -> None:
        wanted = {i for s in ended for i in s.items}
        every = {t.name for t in self.ctx.config.topics}  # a batch holds the topics it was sent with
        questions = {q.id: q for q in self._pending(every) if q.id in wanted}
        for sub in ended:
            self._collect(sub, questions)

    def _collect(self, sub: Submission, questions: dict[str, Question]) -> None:
        """Its results, read twice a line at a time (never whole in memory): every custom_id
        checked first (one it never sent: nothing is collected), then each answer appended."""
        cost, errors = 0.0, {}
        with self.api.results(sub, self.statuses[sub.id]) as results:
            sent = set(sub.items)
            foreign = (custom for custom, _ in results.lines() if sub.item_of(custom) not in sent)
            shown = list(itertools.islice(foreign, 5))
            if shown:
                log.error("answers: batch %s holds requests submission %s never sent (%s among them); not collected",
                          sub.batch_id, sub.id, ", ".join(shown))
                sub.state, sub.status = "lost", "results of another batch"
                self.journal.write(sub)
                return
            for o in results.outcomes():
                item = sub.item_of(o.custom_id) or o.custom_id
                if o.response is None:
                    errors[item] = o.error or "no answer"
                elif item in questions and item not in self.answered:
                    spent = self._keep(questions[item], o.response)
                    cost += spent or 0.0
        sub.unresolved = [i for i in sub.items if i not in self.answered and i in questions]
        if self.statuses[sub.id].queue_full:
            self._queue_full(sub, self.statuses[sub.id])
        why = f"no result (batch {sub.status}" + (f": {reason})" if (reason := self.statuses[sub.id].reason) else ")")
        sub.errors = {i: errors.get(i, why) for i in sub.unresolved}
        sub.state, sub.cost = COLLECTED, round(cost, 8)
        self.journal.write(sub)
        held = self.reserved.pop(sub.id, None)
        budget = self.ctx.budget
        if held is not None and budget is not None:  # sent by this command (--wait): its bound gives way to its cost
            budget.settle(held, cost)

    def _known_queue(self) -> int | None:
        """The model's batch queue limit: the provider's `batch_queue_tokens`, lowered by what a
        refused batch stated (dataset/rate_limits.py)."""
        if self.api.api != OPENAI:
            return None
        provider = self.ctx.config.providers.get(self.client.provider_name)
        recorded = rate_limits.read(self.ctx.paths).get((self.client.provider_name, self.client.model), {})
        configured = provider.batch_queue_tokens if provider is not None else None
        known = [v for v in (configured, recorded.get(rate_limits.QUEUE)) if v]
        return int(min(known)) if known else None

    def _queue_full(self, sub: Submission, status: BatchStatus) -> None:
        """`sub` was refused whole, the model's batch queue full: not a failure of its items; the
        limit its error states is kept for the next submissions."""
        sub.queue_full = True
        limit = status.queue_limit
        log.warning("answers: batch %s refused: the batch queue of %s is full (%s); its %d question(s) are sent "
                    "again once there is room", sub.batch_id, self.client.model, status.reason, len(sub.items))
        if limit is not None:
            self.queue_limit = min(limit, self.queue_limit or limit)
            rate_limits.record(self.ctx.paths, {(self.client.provider_name, self.client.model):
                                                {rate_limits.QUEUE: float(limit)}})

    def _keep(self, q: Question, response: ChatResponse) -> float | None:
        example = build_example(q, response, model=self.client.model,
                                system=self.systems[q.topic] if self.include_system else None,
                                reasoning=bool(self.role.reasoning), hides=self.hides)
        self.output.append(example)
        self.answered.add(q.id)
        if self.figures is not None:
            self.figures.note_answer(q.topic, q.text, example.meta)
        run = self.run_
        run.wrote()
        cost = self.client.spend(response, batch=True).cost  # at the batch price (llm/prices.Price.batched)
        run.spend(response.usage, cost)
        run.item_done(q.id, response.usage, cost, excluded=example.excluded is not None)
        return cost

    def send(self) -> None:
        subs = self.journal.all(STAGE)
        busy, tries = in_flight(subs), failures(subs)
        reasons = {i: e for s in subs for i, e in s.errors.items()}
        budget = self.ctx.budget

        def fresh() -> Iterator[Question]:
            for q in self._pending():
                if q.id in busy:
                    continue
                if tries[q.id] >= 2:
                    if q.id not in self.failed:
                        self.failed.append(q.id)
                        self.run_.item_failed(q.id, f"no answer from two batches ({reasons.get(q.id)})")
                    continue
                yield q

        queue = queue_of(self.queue_limit, subs, self.api.api, self.client.model)
        sent = submit(self.api, self.client, self.journal, fresh(), stage=STAGE, systems=self.systems,
                      room=None if budget is None else budget.room(), round_of=lambda q: min(tries[q.id], 1),
                      queue=queue)
        self.submitted += sent.items
        self.lost = sent.lost
        self.queued = sent.queued
        if sent.queued:
            log.info("answers: %d question(s) wait for room in the batch queue of %s (%s enqueued tokens)",
                     sent.queued, self.client.model, f"{self.queue_limit:,}")
        self.capped = sent.capped
        self.capped_bound = sent.capped_bound
        for sub in sent.submissions if budget is not None else ():
            if budget is not None and budget.reserve(sub.reserved_usd or 0.0, lambda: True):
                self.reserved[sub.id] = sub.reserved_usd or 0.0
        if sent.capped:
            log.warning("answers: %d question(s) not submitted: their bounds would pass the spend cap "
                        "(max_cost_usd); a later run sends them", sent.capped)

    # --- the result -------------------------------------------------------------------------

    def pending_text(self) -> str:
        subs = self.open()
        items = sum(len(s.items) for s in subs)
        return f"{items} question(s) in {len(subs)} batch(es)"

    def result(self, result: StageResult, problems: list[str]) -> StageResult:
        subs = self.open()
        items = sum(len(s.items) for s in subs)
        since = min((s.since() for s in subs), default=None)
        note = ""
        if self.submitted:
            note += f"; {self.submitted} question(s) submitted"
        if items:
            note += (f"; {items} question(s) pending in {len(subs)} batch(es) since {since}: "
                     "run the command again to collect them")
        if self.capped:
            note += f"; {self.capped} not submitted: spend cap"
        if self.queued:
            note += (f"; {self.queued} not submitted yet: the batch queue of {self.client.model} is full "
                     f"({self.queue_limit:,} enqueued tokens): a later run sends them")
        if self.failed:
            note += f"; no answer from two batches, not sent again: {some(self.failed)}"
        for p in problems:
            log.error("answers: %s", p)
        if self.capped and not items and result.error is None and self.ctx.budget is not None:
            result.error = self.ctx.budget.reached(self.capped_bound)  # nothing could be sent: exit 1
        if self.lost and result.error is None:  # failed now, settled by the next call: exit 1
            result.error = OverbrainerError(f"answers: the provider's answer to {len(self.lost)} batch create(s) "
                                            "was lost; run the command again: it finds them before sending anything")
        result.batch = {"pending": items, "batches": len(subs), "pending_since": since,
                        "submitted": self.submitted, "capped": self.capped, "queued": self.queued, "note": note,
                        "unsettled": len(problems)}
        return result

