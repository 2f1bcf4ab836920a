"""Pacing at a provider's rate limits: one `Pacer` per provider and model of an LlmSession,
shared by every thread that sends to them (docs/llm-requests.md#rate-limits).

A request is sent once every bucket has room for it (support/bucket.py): one for requests, one
for tokens (Anthropic: one for input and one for output tokens, limited apart), each filling at
`SAFETY` of its limit a second. A request costs 1 request and its estimated tokens — its prompt
(a token per 3 bytes, more than any tokenizer gives for text) plus its `max_tokens` — and the
estimate is corrected by the usage its answer reports. The limits are those the provider
publishes on its answers (llm/rate_headers.py), each lowered by the provider's
`max_requests_per_minute` / `max_tokens_per_minute` when set, which also set them when the
provider publishes none (a self-hosted server, a gateway). With no limit known nothing is paced.

- **Smoothly**: the request bucket holds one second of the limit (OpenAI may enforce 60,000
  requests a minute as 1,000 a second) and starts with one request, so requests leave one by one
  at the limit's pace from the first, never in a burst of `concurrency` (the provider's own
  bucket, full at the start, keeps room for requests that reach it bunched); a token bucket
  holds a minute (Anthropic's token bucket fills continuously up to the limit), room for what
  the requests in flight reserve at `max_tokens`.
- **Following the provider**: the `remaining` it publishes lowers a bucket that thinks it has
  more (another client on the same key, a window shorter than a minute); a new limit (a tier
  upgrade) rescales it.
- **The first request alone**: a provider that publishes its limits (OpenAI's API, Anthropic's),
  when none is known yet, gets one request first; the others wait for its answer (or
  `PROBE_WAIT` seconds), whose headers say how to pace them.
- **Concurrency adapts**: at most `allowed` requests are in flight, `concurrency` at first. A
  429 is a sign the estimate was wrong: it halves `allowed` and empties the request bucket for
  a second more (once per round of requests: the provider counts refused requests too, so its
  own may be in debt), its `Retry-After` holds every thread of the pacer, and the tokens it did
  not use are given back.
  Each success while the buckets have room grows `allowed` again by 1/allowed, up to
  `concurrency`.

Threads wait in line: only the first one waits for the buckets (for the time they need, or
until an answer changes them); the others wait their turn. A wait ends on the caller's stop
(LlmCancelled) or once the provider's breaker trips (`acquire` returns None).
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from overbrainer.llm.errors import LlmCancelled
from overbrainer.llm.rate_headers import INPUT, KINDS, OUTPUT, REQUESTS, TOKENS, Published
from overbrainer.support.bucket import Bucket
from overbrainer.support.threads import listen_all, unlisten_all
from overbrainer.support.usage import Usage

SAFETY = 0.97  # the share of a limit the pacer fills at: room for what the provider counts otherwise
REQUEST_BURST = 1.0  # seconds of the request limit its bucket holds
TOKEN_BURST = 60.0  # seconds of a token limit its bucket holds
PROBE_WAIT = 30.0  # seconds the others wait for the first request's answer, at most
POLL = 0.1  # how often a wait looks at a stop that cannot wake it (a plain threading.Event)
BYTES_PER_TOKEN = 3  # a prompt's tokens, estimated from its bytes (over-counting English text)
FRAMING = 16  # tokens a request's messages add to its texts
# How far below a bucket's level a published `remaining` must be to lower it: a request in
# flight, or Anthropic's rounding of tokens to the nearest thousand.
SLACK = {REQUESTS: 1.0, TOKENS: 1000.0, INPUT: 1000.0, OUTPUT: 1000.0}


def prompt_tokens(*texts: str | None) -> int:
    """A prompt's input tokens, estimated from its bytes (llm/pacing's only tokenizer)."""
    return sum(len(t.encode()) for t in texts if t) // BYTES_PER_TOKEN + FRAMING


@dataclass(frozen=True)
class Configured:
    """The provider's own settings: `max_requests_per_minute`, `max_tokens_per_minute` (None: unset)."""

    requests: int | None = None
    tokens: int | None = None

    def get(self, kind: str) -> float | None:
        value = self.requests if kind == REQUESTS else self.tokens if kind == TOKENS else None
        return float(value) if value else None


class Ticket:
    """One request let through: what it took from each bucket (by kind), when, and its
    estimated output tokens."""

    __slots__ = ("costs", "sent", "output")

    def __init__(self, costs: dict[str, float], sent: float, output: float):
        self.costs = costs
        self.sent = sent
        self.output = output


def _costs(input_tokens: float, output_tokens: float) -> dict[str, float]:
    """What a request of these tokens costs in each kind of bucket."""
    return {REQUESTS: 1.0, TOKENS: float(input_tokens + output_tokens), INPUT: float(input_tokens),
            OUTPUT: float(output_tokens)}


class Pacer:
    def __init__(self, name: str, concurrency: int, configured: Configured | None = None, *,
                 probe: bool = False, clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.concurrency = max(1, int(concurrency))
        self._configured = configured or Configured()
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, Bucket] = {}
        self._published: dict[str, float] = {}  # the limits the provider published, by kind
        self._allowed = float(self.concurrency)
        self._in_flight = 0
        self._not_before = 0.0  # a Retry-After: nothing is sent before
        self._cut_at = -math.inf  # when `allowed` was last halved
        self._line: collections.deque[threading.Condition] = collections.deque()
        self._probe_until: float | None = None  # the first request is out: the others wait for it
        self._probing = probe
        self.sent = 0
        self.throttled = 0  # 429s met
        now = clock()
        for kind in KINDS:
            self._resize(kind, now)
        if self._buckets:
            self._probing = False  # limits are set: nothing to learn before pacing

    # --- limits ---------------------------------------------------------------------------------

    def limits(self) -> dict[str, float]:
        """The limits paced at (a minute's, by kind): the published, lowered by the configured."""
        with self._lock:
            return {kind: b.rate * 60.0 / SAFETY for kind, b in self._buckets.items()}

    def published(self) -> dict[str, float]:
        """The limits the provider published (a minute's, by kind), none of the configured."""
        with self._lock:
            return dict(self._published)

    def learn(self, limits: dict[str, float]) -> None:
        """Limits known before any answer (the project's record of an earlier run's): the first
        request then needs no probe."""
        with self._lock:
            now = self._clock()
            for kind, value in limits.items():
                if kind in KINDS and value > 0 and kind not in self._published:
                    self._published[kind] = float(value)
                    self._resize(kind, now)
            if self._buckets:
                self._probing = False

    def _limit(self, kind: str) -> float | None:
        published, configured = self._published.get(kind), self._configured.get(kind)
        known = [v for v in (published, configured) if v]
        return min(known) if known else None

    def _resize(self, kind: str, now: float, remaining: float | None = None) -> None:
        limit = self._limit(kind)
        if limit is None:
            return
        rate = SAFETY * limit / 60.0
        burst = REQUEST_BURST if kind == REQUESTS else TOKEN_BURST
        capacity = max(1.0, rate * burst)
        bucket = self._buckets.get(kind)
        if bucket is None:
            if kind == REQUESTS:  # no opening burst: the first request alone, then at the pace
                remaining = min(1.0, remaining if remaining is not None else 1.0)
            self._buckets[kind] = Bucket(rate, capacity, now, remaining)
        elif bucket.rate != rate or bucket.capacity != capacity:
            bucket.rescale(rate, capacity, now)

    # --- the sending side -------------------------------------------------------------------

    def acquire(self, input_tokens: int, output_tokens: int, stop: threading.Event | None = None,
                tripped: threading.Event | None = None) -> Ticket | None:
        """Wait until the request (its estimated input and output tokens) may be sent, and take
        its costs: a Ticket for `settle` or `failed`. None once `tripped` is set; LlmCancelled
        once `stop` is."""
        costs = _costs(input_tokens, output_tokens)
        with self._lock:
            if not self._line:
                wait = self._wait(costs, self._clock())
                if wait <= 0:
                    return self._take(costs)
        return self._queue(costs, stop, tripped)

    def _queue(self, costs: dict[str, float], stop: threading.Event | None,
               tripped: threading.Event | None) -> Ticket | None:
        turn = threading.Condition(self._lock)
        stops = (stop, tripped)
        wake = self._wake_all
        woken = listen_all(stops, wake)
        try:
            with self._lock:
                self._line.append(turn)
                try:
                    while True:
                        if stop is not None and stop.is_set():
                            raise LlmCancelled("interrupted before a provider request was sent")
                        if tripped is not None and tripped.is_set():
                            return None
                        wait: float | None = None
                        if self._line[0] is turn:
                            wait = self._wait(costs, self._clock())
                            if wait <= 0:
                                self._line.popleft()
                                return self._take(costs)
                            wait = None if wait == math.inf else wait
                        if not woken:
                            wait = POLL if wait is None else min(wait, POLL)
                        turn.wait(wait)
                finally:
                    if turn in self._line:
                        self._line.remove(turn)
                    self._notify_head()
        finally:
            unlisten_all(stops, wake)

    def _wait(self, costs: dict[str, float], now: float) -> float:
        """Seconds until a request of `costs` may go (inf: until a request in flight ends)."""
        if self._in_flight >= max(1, int(self._allowed)):
            return math.inf
        if self._probing and self._in_flight and self._probe_until is not None and now < self._probe_until:
            return self._probe_until - now
        wait = max(0.0, self._not_before - now)
        for kind, bucket in self._buckets.items():
            wait = max(wait, bucket.wait(costs[kind], now))
        return wait

    def _take(self, costs: dict[str, float]) -> Ticket:
        now = self._clock()
        for kind, bucket in self._buckets.items():
            bucket.take(costs[kind], now)
        self._in_flight += 1
        self.sent += 1
        if self._probing and self._probe_until is None:
            self._probe_until = now + PROBE_WAIT
        return Ticket({kind: costs[kind] for kind in self._buckets}, now, costs[OUTPUT])

    def _notify_head(self) -> None:
        if self._line:
            self._line[0].notify()

    def _wake_all(self) -> None:
        with self._lock:
            for turn in self._line:
                turn.notify()

    # --- the answering side -----------------------------------------------------------------

    def observe(self, published: Published) -> None:
        """An answer's published limits (any answer, a 429's too)."""
        if not published and not self._probing:
            return
        with self._lock:
            now = self._clock()
            self._probing = False
            for kind, limit in published.limit.items():
                if limit > 0 and self._published.get(kind) != limit:
                    self._published[kind] = limit
                    self._resize(kind, now, published.remaining.get(kind))
            for kind, left in published.remaining.items():
                bucket = self._buckets.get(kind)
                if bucket is not None:
                    bucket.lower(left, now, SLACK[kind])
            self._notify_head()

    def settle(self, ticket: Ticket, usage: Usage | None) -> None:
        """The request was answered; `usage` what it used (None or empty: the estimate stands)."""
        with self._lock:
            now = self._clock()
            self._in_flight -= 1
            if usage is not None and (usage.input_tokens or usage.output_tokens):
                used = _costs(usage.input_tokens, usage.output_tokens)
                for kind, taken in ticket.costs.items():
                    if kind != REQUESTS:
                        self._buckets[kind].give(taken - used[kind], now)
            if self._allowed < self.concurrency and self._room(ticket, now):
                self._allowed = min(float(self.concurrency), self._allowed + 1.0 / self._allowed)
            self._notify_head()

    def failed(self, ticket: Ticket, *, answered: bool, sent: bool = True, limited: bool = False,
               retry_after: float | None = None) -> float | None:
        """The request failed: `answered` when an answer came (an error status), `sent` unless it
        was never sent (no connection made), `limited` for a 429 that means a rate limit. What it
        did not use is given back: everything when it was never sent, its tokens when a 429
        refused it (the request still counts, as OpenAI counts it), its output tokens after
        another error answer, nothing when no answer says (it may have been processed). A 429
        halves `allowed` (once per round of requests) and holds every thread for `retry_after`.
        Returns, for a 429 without Retry-After, how long until the buckets have room for the
        request again (None: no bucket to say)."""
        with self._lock:
            now = self._clock()
            self._in_flight -= 1
            if not sent:
                unused = set(ticket.costs)
            elif limited:
                unused = {TOKENS, INPUT, OUTPUT}
            elif answered:
                unused = {OUTPUT}
            else:
                unused = set()
            self._give_back(ticket, unused, now)
            wait = None
            if limited:
                self.throttled += 1
                if ticket.sent > self._cut_at:  # once a round: the 429s of one burst are one sign
                    self._allowed = max(1.0, min(self._allowed, self._in_flight + 1.0) / 2.0)
                    self._cut_at = now
                    requests = self._buckets.get(REQUESTS)
                    if requests is not None:  # the provider's may be in debt: refused requests count
                        requests.lower(0.0, now)
                        requests.take(requests.capacity, now)
                if retry_after is not None:
                    self._not_before = max(self._not_before, now + retry_after)
                elif self._buckets:
                    wait = max(b.wait(ticket.costs.get(kind, 0.0), now) for kind, b in self._buckets.items())
            self._notify_head()
            return wait

    def _give_back(self, ticket: Ticket, unused: set[str], now: float) -> None:
        """Give back the costs of the kinds in `unused` (OUTPUT alone: the output tokens, from
        the tokens bucket too)."""
        for kind, taken in ticket.costs.items():
            if kind in unused:
                self._buckets[kind].give(taken, now)
            elif kind == TOKENS and OUTPUT in unused:
                self._buckets[kind].give(ticket.output, now)

    def _room(self, ticket: Ticket, now: float) -> bool:
        """Whether every bucket has room for another request like `ticket`'s."""
        return all(b.room(ticket.costs.get(kind, 0.0), now) for kind, b in self._buckets.items())

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"sent": self.sent, "throttled": self.throttled, "allowed": self._allowed,
                    "limits": {k: b.rate * 60.0 / SAFETY for k, b in self._buckets.items()}}
