"""Batch mode's sending side (docs/batch.md): the submissions a crashed command left
`submitting` are looked for on the provider before anything new is sent, then the questions
still missing go out in batches that fit the provider's limits and the spend cap, each recorded
in the journal before it is sent.

The limits: a batch's requests and bytes (llm/batch_types.LIMITS: OpenAI's 50,000 requests and
200 MB a file, Anthropic's 100,000 requests or 256 MB a batch), and, where known, OpenAI's batch
queue of the model (`Queue`: the input tokens its batches in progress may hold, estimated as the
pacing estimates them, llm/pacing.prompt_tokens). What does not fit in the queue waits for the
next call, once batches in progress have ended: never sent for the provider to refuse it.

A create is never sent twice: when its answer is lost (llm/errors.AnswerLost) it is settled as a
crash is — OpenAI's found by its metadata at once, Anthropic's left `submitting` for a later
look's proof — and nothing more is sent in that pass."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from overbrainer.dataset.batch_journal import LOST, SUBMITTED, SUBMITTING, Journal, Submission, new_id
from overbrainer.dataset.records import Question
from overbrainer.llm.batch_anthropic import Ambiguous
from overbrainer.llm.batch_types import custom_id, tag_of
from overbrainer.llm.client import LlmClient
from overbrainer.llm.errors import AnswerLost
from overbrainer.llm.pacing import prompt_tokens
from overbrainer.llm.types import ChatRequest

log = logging.getLogger(__name__)

BatchApi = Any  # llm.batch_anthropic.AnthropicBatches or llm.batch_openai.OpenAIBatches (their `send` differ)


def recover(api: BatchApi, journal: Journal, subs: list[Submission]) -> list[str]:
    """Settle every submission left `submitting`: the file or batch a crashed command sent is
    found and recorded (never sent again); one the provider never got is `lost` (its items are
    free again). Returns the problems of those that could not be settled (still `submitting`:
    their items stay held)."""
    problems = []
    taken = {s.batch_id for s in subs if s.batch_id}
    for sub in subs:
        if sub.state != SUBMITTING:
            continue
        try:
            if api.api == "anthropic":
                api.send(sub, None, journal.write, taken)
            else:
                api.send(sub, None, journal.write)
        except Ambiguous as e:
            problems.append(f"submission {sub.id}: {e}; it is looked for again on the next call, its items held "
                            f"meanwhile (`overbrainer batches cancel {sub.id}` gives up on it: its items are sent "
                            "again, paid twice if its batch does exist)")
            continue
        except AnswerLost as e:  # OpenAI: the batch it found no trace of, created again: no answer either
            problems.append(unsettled(sub, e))
            continue
        sub.state = SUBMITTED if sub.batch_id else LOST
        if sub.state == LOST:
            sub.status = "never reached the provider"
        journal.write(sub)
        log.info("batch submission %s: %s", sub.id, f"found batch {sub.batch_id}" if sub.batch_id
                 else "the provider never got it; its items will be sent again")
    return problems


@dataclass
class Sent:
    """What one submitting pass did."""

    submissions: list[Submission] = field(default_factory=list)
    items: int = 0
    capped: int = 0  # questions left out: their bound would pass the spend cap
    capped_bound: float = 0.0  # the bound of the first of them
    lost: list[str] = field(default_factory=list)  # a create whose answer was lost: why (then nothing more)
    queued: int = 0  # questions left out: no room in the model's batch queue


@dataclass
class Queue:
    """A model's batch queue (OpenAI's batch queue limit): `limit` input tokens in all, `held` by
    the batches in progress."""

    limit: int
    held: int = 0


def queue_of(limit: int | None, subs: list[Submission], api: str, model: str) -> Queue | None:
    """The queue of `model` on `api` under `limit` (None: no limit known), held by the open
    submissions' estimated input tokens (one recorded before they were kept holds none)."""
    if limit is None:
        return None
    held = sum(s.input_tokens or 0 for s in subs if s.open and s.api == api and s.model == model)
    return Queue(int(limit), held)


class Packer:
    """The questions to send, packed into submissions that fit the API's limits, the room the
    spend cap leaves (`room` None: no cap) and the room the model's batch queue leaves (`queue`
    None: none known). Each submission's id is drawn before its first request is encoded: its
    custom_ids carry its tag."""

    def __init__(self, api: BatchApi, client: LlmClient, systems: dict[str, str], room: float | None,
                 queue: Queue | None = None):
        self.api, self.client, self.systems, self.room, self.queue = api, client, systems, room, queue
        self.sub_id = new_id()
        self.lines: list[bytes] = []
        self.items: list[str] = []
        self.custom: dict[str, str] = {}
        self.used = api.limits.envelope
        self.bound = 0.0
        self.reserved = 0.0
        self.tokens = 0  # the submission's input tokens, estimated
        self.enqueued = 0  # those of the submissions this pass sent

    def line(self, q: Question) -> tuple[bytes, float, int]:
        req = ChatRequest(user=q.text, system=self.systems[q.topic])
        tag = tag_of(self.sub_id)
        cid = custom_id(q.id, tag)
        if cid != f"{tag}-{q.id}":
            self.custom[cid] = q.id
        return (self.api.encode(cid, self.client.chat_body(req)), self.client.bound(req, batch=True),
                prompt_tokens(req.system, req.user))

    def fits_cap(self, bound: float) -> bool:
        return self.room is None or self.reserved + self.bound + bound <= self.room

    def fits_queue(self, tokens: int) -> bool:
        """Room in the model's batch queue for a request of `tokens` beside this submission (a
        request larger than the whole queue goes alone into an empty one: the provider refuses it)."""
        queue = self.queue
        if queue is None:
            return True
        held = queue.held + self.enqueued + self.tokens
        return held + tokens <= queue.limit or held == 0

    def full(self, size: int) -> bool:
        limits = self.api.limits
        return bool(self.items) and (len(self.items) >= limits.requests or self.used + size + 1 > limits.bytes)

    def add(self, q: Question, line: bytes, bound: float, tokens: int) -> None:
        self.lines.append(line)
        self.items.append(q.id)
        self.used += len(line) + 1
        self.bound += bound
        self.tokens += tokens

    def take(self) -> tuple[str, list[bytes], list[str], dict[str, str], float, int]:
        out = (self.sub_id, self.lines, self.items, self.custom, self.bound, self.tokens)
        self.reserved += self.bound
        self.enqueued += self.tokens
        self.lines, self.items, self.custom, self.used, self.bound = [], [], {}, self.api.limits.envelope, 0.0
        self.tokens = 0
        self.sub_id = new_id()
        return out


def submit(api: BatchApi, client: LlmClient, journal: Journal, questions: Iterable[Question], *, stage: str,
           systems: dict[str, str], room: float | None, round_of: Callable[[Question], int],
           queue: Queue | None = None) -> Sent:
    """Send `questions` (an iterable, read once) in as many submissions as the limits need; each
    written `submitting` to the journal before its send. `round_of(q)`: 0, or 1 for a resend.
    `queue`: the model's batch queue, when its limit is known."""
    sent, packer = Sent(), Packer(api, client, systems, room, queue)
    rounds: set[int] = set()
    for q in questions:
        line, bound, tokens = packer.line(q)
        if not packer.fits_cap(bound):
            sent.capped += 1
            sent.capped_bound = sent.capped_bound or bound
            continue
        if not packer.fits_queue(tokens) and packer.items:  # this submission fills the queue: it goes
            _send(api, client, journal, packer, stage, max(rounds), sent)
            rounds.clear()
            if sent.lost:
                return sent
        if not packer.fits_queue(tokens):
            sent.queued += 1
            continue
        if packer.full(len(line)):
            _send(api, client, journal, packer, stage, max(rounds), sent)
            rounds.clear()
            if sent.lost:
                return sent  # the provider lost an answer: send nothing more before it is settled
        packer.add(q, line, bound, tokens)
        rounds.add(round_of(q))
    if packer.items:
        _send(api, client, journal, packer, stage, max(rounds), sent)
    return sent


def unsettled(sub: Submission, error: AnswerLost) -> str:
    """What is said of a submission whose create got no answer and is not settled yet."""
    return (f"submission {sub.id}: {error}; it stays `submitting`, its items held, and is looked for on the "
            "provider before anything is sent again (the next call, or the next look of --wait): never sent twice")


def _send(api: BatchApi, client: LlmClient, journal: Journal, packer: Packer, stage: str, round_: int,
          sent: Sent) -> None:
    sub_id, lines, items, custom, bound, tokens = packer.take()
    sub = Submission(id=sub_id, stage=stage, api=api.api, provider=client.provider_name, model=client.model,
                     created_at=time.time(), items=items, round=round_, custom_ids=custom, tag=tag_of(sub_id),
                     reserved_usd=round(bound, 8) if bound != float("inf") else None, input_tokens=tokens)
    journal.write(sub)  # before anything is sent: a crash from here on is found again
    try:
        api.send(sub, lines, journal.write)
    except AnswerLost as e:  # settled as a crash is: found (OpenAI, by its metadata), or left `submitting`
        found = api.settle(sub)
        if found is None:
            sent.lost.append(unsettled(sub, e))
            return
        log.warning("%s: %s; found it on the provider: batch %s", stage, e, found.batch_id)
        sub.batch_id, sub.status = found.batch_id, found.status
    sub.state = SUBMITTED
    journal.write(sub)
    sent.submissions.append(sub)
    sent.items += len(items)
    log.info("%s: submitted %d request(s) as batch %s (submission %s)", stage, len(items), sub.batch_id, sub.id)
