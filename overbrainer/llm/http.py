"""HTTP for the LLM clients on the shared stack (support/http.py): one channel per provider per
`LlmSession` (a command's or a task's: pool ≥ concurrency, the 429 cool-down, the circuit
breaker), one request with a total deadline, the retry policy.

Retry policy: 408/429/5xx and transport failures are retried up to `max_retries` times; the wait
is `Retry-After` (seconds or an HTTP-date, capped at 600 s) when given, else
`min(2^n, 60) s × [0.5, 1)`. A request that creates something billed (`Reading.creates`: a
batch) is retried only when it certainly was not applied — no connection was made, or a 429
refused it — and raises AnswerLost when it may have been (it was written and no answer says:
the connection closed, a timeout, a cut-off body, a 408 or 5xx): its caller settles it as a
crash is settled, never by sending it again (docs/retries.md).

A request sent with a `Pace` (a chat, an embedding) waits for its model's Pacer (llm/pacing.py:
the provider's rate limits, read from every answer's headers) and reports its answer to it; a 429
then holds that pacer's threads for its `Retry-After`, and without one the retry waits for the
pacer's buckets. Any other request, or one without a pacer (`LlmSession(pacing=False)`), keeps
the provider's cool-down: after a 429 every thread sending to the same provider waits it out
before its next send. Waits end early on the caller's stop Event (`LlmCancelled`) or once the
breaker trips.

Every attempt reports to the provider's circuit breaker (llm/breaker.py); once it trips, no
attempt is sent any more and waiting retries end with ProviderUnreachable.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

from overbrainer.llm import meanings, rate_headers
from overbrainer.llm.breaker import Breaker
from overbrainer.llm.errors import AnswerLost, LlmCancelled, LlmError, ProviderUnreachable, invalid
from overbrainer.llm.pacing import Configured, Pacer, Ticket
from overbrainer.support import fmt, http
from overbrainer.support.http import (
    CONNECT,
    CUT_OFF,
    DNS,
    REFUSED,
    TIMEOUT,
    TLS,
    TooLarge,
    Unanswered,
    display_url,
    exchange,
)
from overbrainer.support.failure import FailureKind
from overbrainer.support.retry import Policy, retrying
from overbrainer.support.sleep import pause as _sleep
from overbrainer.support.usage import Usage

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
RETRY_AFTER_CAP = http.RETRY_AFTER_CAP
BACKOFF_BASE = http.BACKOFF_BASE
BACKOFF_CAP = http.BACKOFF_CAP
BODY_CAP = 64 * 1024 * 1024  # an answer larger than this is not one (256 embeddings are ~16 MB)
FILE_CAP = 1024 * 1024 * 1024  # a file read as bytes (a batch's results): at most this

# Transport failure kinds (support/failure.FailureKind; the breaker counts a streak of one kind).
SERVER = meanings.SERVER
__all__ = ["CONNECT", "CUT_OFF", "DNS", "FailureKind", "REFUSED", "SERVER", "TIMEOUT", "TLS", "Channel", "LlmSession",
           "Pace", "Raw", "display_url", "request_once", "send"]
# What a non-2xx answer means: (status, body, Retry-After seconds) -> LlmError.
Explain = Callable[[int, bytes, "float | None"], LlmError]
# Told of every answer: (status, headers, body; the body of an error answer only, else b"").
Seen = Callable[[int, Any, bytes], None]


class Channel:
    """Everything one provider's requests share: the session (connection pool) and the
    "not before" time set by a 429."""

    def __init__(self, name: str, base_url: str, pool_size: int):
        self.name = name
        self.base = base_url.rstrip("/")
        self.session = http.session(self.base, pool=pool_size)
        self.pool_size = max(http.POOL, int(pool_size))
        self.not_before = 0.0
        self.announced = False  # the client said how this provider is spoken to
        self.breaker = Breaker()
        self._lock = threading.Lock()

    def ensure_pool(self, size: int) -> None:
        with self._lock:
            if size > self.pool_size:
                self.pool_size = http.grow_pool(self.session, size)

    def url(self, path: str) -> str:
        return self.base + path

    def cool_down(self, seconds: float) -> None:
        """Nobody sends to this provider for `seconds` from now (never shortens a cool-down)."""
        until = time.monotonic() + seconds
        with self._lock:
            if until > self.not_before:
                self.not_before = until

    def wait_cool_down(self, stop: threading.Event | None) -> None:
        while True:
            remaining = self.not_before - time.monotonic()  # a float read needs no lock
            if remaining <= 0:
                return
            pause(remaining, stop, self.breaker.tripped)

    def close(self) -> None:
        self.session.close()


class LlmSession:
    """The channels of one command or task (a stage command, `run`, a compare's judge, a probe,
    each task of the TUI): one per provider (name and URL), so that its requests share a
    connection pool, a 429 cool-down and a circuit breaker; and one Pacer per provider and model
    (llm/pacing.py), shared by every thread sending to it. Its owner closes it at its end: the
    next task in the same process starts with fresh connections, a closed breaker and pacers
    that learn the limits again. `pacing=False`: no pacer (a 429 is the only sign of a limit)."""

    def __init__(self, pacing: bool = True) -> None:
        self._channels: dict[tuple[str, str], Channel] = {}
        self._pacers: dict[tuple[str, str, str], Pacer] = {}
        self._lock = threading.Lock()
        self.pacing = pacing
        self.known_limits: dict[tuple[str, str], dict[str, float]] = {}  # (provider, model): earlier runs'

    def channel(self, name: str, base_url: str, pool_size: int) -> Channel:
        """The session's channel of a provider (one per name and URL), its pool grown if needed."""
        key = (name, base_url.rstrip("/"))
        with self._lock:
            channel = self._channels.get(key)
            if channel is None:
                channel = self._channels[key] = Channel(name, base_url, pool_size)
                return channel
        channel.ensure_pool(pool_size)
        return channel

    def pacer(self, channel: Channel, model: str, concurrency: int, configured: Configured | None = None,
              probe: bool = False) -> Pacer | None:
        """The session's pacer of `model` on `channel`'s provider (None without pacing): made on
        first use with `configured` limits, told the limits an earlier run learned
        (`known_limits`), and sending its first request alone when `probe` (the provider
        publishes its limits) and no limit is known yet."""
        if not self.pacing:
            return None
        key = (channel.name, channel.base, model)
        with self._lock:
            pacer = self._pacers.get(key)
            if pacer is None:
                pacer = self._pacers[key] = Pacer(f"{channel.name}/{model}", concurrency, configured, probe=probe)
                known = self.known_limits.get((channel.name, model))
                if known:
                    pacer.learn(known)
            return pacer

    def learned_limits(self) -> dict[tuple[str, str], dict[str, float]]:
        """The limits each pacer paced at, by (provider, model), for the project's record."""
        with self._lock:
            pacers = {(name, model): p for (name, _url, model), p in self._pacers.items()}
        return {key: limits for key, p in pacers.items() if (limits := p.published())}

    def close(self) -> None:
        """Close every channel's connections (a request still in flight fails)."""
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
        for channel in channels:
            channel.close()

    def __enter__(self) -> "LlmSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def pause(seconds: float, stop: threading.Event | None, tripped: threading.Event | None = None) -> None:
    """Sleep, or raise LlmCancelled as soon as `stop` is set; return early once `tripped` is."""
    if _sleep(seconds, stop, tripped) and stop is not None and stop.is_set():
        raise LlmCancelled()


def parse_retry_after(value: str | None) -> float | None:
    """A Retry-After header in seconds (support/http.retry_after), uncapped: the wait caps it."""
    return http.retry_after(value, cap=None)


def status_error(status: int, body: bytes, retry_after: float | None, provider: str = "?") -> LlmError:
    """The error of a non-2xx answer, as every provider means it (llm/meanings.py)."""
    return meanings.explain(status, body, retry_after, provider)


def request_once(
    channel: Channel,
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float,
    connect_timeout: float = CONNECT_TIMEOUT,
    explain: Explain | None = None,
    decode: bool = True,
    into: BinaryIO | None = None,
    seen: Seen | None = None,
) -> Any:
    """One HTTP exchange → the parsed JSON of a 2xx answer (its bytes when not `decode`; None
    when written `into` a file, emptied first: a retry starts it again), else LlmError (what the
    status means: `explain`, by default as every provider means it). `body`: sent as JSON, or
    as it is when `Raw`. `timeout` bounds the whole exchange. `seen` is told of every
    answer (its status, headers, and an error answer's body) before it is read."""
    deadline = time.monotonic() + timeout
    if into is not None:
        into.seek(0)
        into.truncate()
    data, hdrs = _payload(body, headers)
    cap = BODY_CAP if decode and into is None else FILE_CAP
    try:
        answer = exchange(channel.session, method, channel.base + path, data=data, headers=hdrs,
                          timeout=(min(connect_timeout, timeout), timeout), deadline=deadline, cap=cap, sink=into)
    except Unanswered as e:
        words = f"request failed ({e.kind.text})" if e.kind is not None else "request failed"
        raise LlmError(words, retryable=True, cause=e.cause, transport=e.kind) from None
    except TooLarge:
        raise invalid(f"larger than {cap // 2**20} MiB") from None
    status = answer.status
    ok = 200 <= status < 300
    if seen is not None:
        seen(status, answer.headers, b"" if ok else answer.body)
    if not ok:
        raise _refusal(channel, answer.status, answer.body, answer.headers, explain)
    if into is not None:
        return None
    if not decode:
        return answer.body
    try:
        return json.loads(answer.body)
    except ValueError:
        error = invalid("not JSON")
        error.status = status  # a 2xx: whatever the request asked for was done
        raise error from None


def _refusal(channel: Channel, status: int, body: bytes, headers: Any, explain: Explain | None) -> LlmError:
    """The error of a non-2xx answer: `explain`'s, else as every provider means it."""
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if explain is not None:
        return explain(status, body, retry_after)
    return status_error(status, body, retry_after, channel.name)


@dataclass(frozen=True)
class Raw:
    """A request body that is not JSON: its bytes and their content type."""
    data: bytes
    content_type: str


def _payload(body: Any, headers: dict[str, str] | None) -> tuple[bytes | None, dict[str, str] | None]:
    """A request's bytes and headers: a `Raw` body as given, another as JSON, or none."""
    if isinstance(body, Raw):
        return body.data, {**(headers or {}), "Content-Type": body.content_type}
    if body is None:
        return None, headers
    return json.dumps(body).encode(), {**(headers or {}), "Content-Type": "application/json"}


def backoff(attempt: int) -> float:
    """Wait before retry number `attempt` (1-based) without Retry-After."""
    return http.backoff(attempt, BACKOFF_BASE, BACKOFF_CAP)


@dataclass(frozen=True)
class Reading:
    """How an answer is read: what its error statuses mean (`explain`, by default as every
    provider means them), the error a 2xx body may carry (`inspect`: handled as if the answer had
    that status), and whether the body is JSON (`decode`; else its bytes, up to FILE_CAP), or
    is written `into` a file as it arrives (a batch's results: never whole in memory, up to
    FILE_CAP; the answer is then None). `creates`: the request creates something billed (a
    batch), so no answer, or one that does not say, means it may have been applied
    (AnswerLost), never a reason to send it again."""
    explain: Explain | None = None
    inspect: Callable[[Any], Any] | None = None
    decode: bool = True
    into: BinaryIO | None = None
    creates: bool = False


JSON_ANSWER = Reading()


@dataclass(frozen=True)
class Pace:
    """A request paced by `pacer` (llm/pacing.py): its estimated input and output tokens, and
    how to read what it used from its answer (`usage(doc)`)."""
    pacer: Pacer
    input_tokens: int
    output_tokens: int
    usage: Callable[[Any], Usage]

    def seen(self, status: int, headers: Any, body: bytes) -> None:
        self.pacer.observe(rate_headers.read(headers, body if status >= 400 else None))


class _Send:
    """One `send`: the request, and how its retries go (support/retry.py)."""

    def __init__(self, channel: Channel, method: str, path: str, body: Any, headers: dict[str, str] | None,
                 timeout: float, on_retry: Callable[[str], None] | None, stop: threading.Event | None,
                 reading: Reading, pace: Pace | None = None):
        self.channel, self.method, self.path, self.body, self.headers = channel, method, path, body, headers
        self.reading, self.pace = reading, pace
        self.timeout, self.on_retry, self.stop = timeout, on_retry, stop

    def waiting(self, error: BaseException, seconds: float) -> None:
        if isinstance(error, LlmError) and error.status == 429 and self.pace is None:
            self.channel.cool_down(seconds)
        message = f"{error}; retrying in {fmt.duration(seconds)}"
        log.debug("%s %s: %s", self.channel.name, self.path, message)
        if self.on_retry is not None:
            self.on_retry(message)

    def unreachable(self) -> ProviderUnreachable:
        channel = self.channel
        return ProviderUnreachable(channel.name, display_url(channel.base), channel.breaker.reason or "no answer")


def _transient(error: BaseException) -> bool:
    return isinstance(error, LlmError) and error.retryable


def _unapplied(error: BaseException) -> bool:
    """A transient failure of a create that certainly did not take effect: no connection was
    made, or a 429 (the provider refuses before doing anything)."""
    if not _transient(error):
        return False
    assert isinstance(error, LlmError)
    if error.transport is not None and error.transport is not SERVER:
        return error.transport.connecting
    return error.status == 429


def _maybe_applied(error: LlmError) -> bool:
    """A failure after which a create may have taken effect (see _unapplied), or did: a 2xx
    whose body cannot be read."""
    return (error.retryable and not _unapplied(error)) or (error.status is not None and 200 <= error.status < 300)


def _delay(error: BaseException, attempt: int) -> float:
    if isinstance(error, LlmError) and error.retry_after is not None:
        return min(error.retry_after, RETRY_AFTER_CAP)
    return backoff(attempt)


def _attempt(s: _Send) -> Any:
    channel, stop = s.channel, s.stop
    breaker = channel.breaker
    if stop is not None and stop.is_set():
        raise LlmCancelled("interrupted before a provider request was sent")
    channel.wait_cool_down(stop)
    pace = s.pace if not breaker.tripped.is_set() else None
    ticket = pace.pacer.acquire(pace.input_tokens, pace.output_tokens, stop, breaker.tripped) if pace else None
    if breaker.tripped.is_set():
        if pace is not None and ticket is not None:
            pace.pacer.failed(ticket, answered=False, sent=False)
        raise s.unreachable()
    try:
        reading = s.reading
        doc = request_once(channel, s.method, s.path, body=s.body, headers=s.headers, timeout=s.timeout,
                           explain=reading.explain, decode=reading.decode, into=reading.into,
                           seen=pace.seen if pace is not None else None)
        carried = reading.inspect(doc) if reading.inspect is not None else None
        if carried is not None:
            raise carried
    except LlmError as e:
        if pace is not None and ticket is not None:  # its model's pacer holds its threads (not the provider's)
            _paced_failure(pace, ticket, e)
        elif e.status == 429 and e.retry_after is not None:
            # The provider said how long to wait: everybody waits, even when this request gives up.
            channel.cool_down(min(e.retry_after, RETRY_AFTER_CAP))
        if e.transport is None:
            breaker.answered()
        elif breaker.failure(e.transport, str(e) if e.transport is SERVER else e.transport.text):
            log.debug("%s %s: %s; the circuit breaker trips", channel.name, s.path, e)
            raise s.unreachable() from e
        raise
    except BaseException:
        if pace is not None and ticket is not None:
            pace.pacer.failed(ticket, answered=False)
        raise
    if pace is not None and ticket is not None:
        pace.pacer.settle(ticket, pace.usage(doc))
    breaker.success()
    return doc


def _paced_failure(pace: Pace, ticket: Ticket, e: LlmError) -> None:
    """Tell the pacer how a paced request failed. A 429 without Retry-After is retried once the
    pacer's buckets have room (its wait is the retry's), not after the blind backoff."""
    transport = e.transport if e.transport is not SERVER else None
    limited = e.status == 429 and e.retryable  # not a spent quota (llm/meanings.py: a CreditsError)
    retry_after = min(e.retry_after, RETRY_AFTER_CAP) if e.retry_after is not None and limited else None
    wait = pace.pacer.failed(ticket, answered=transport is None, sent=transport is None or not transport.connecting,
                             limited=limited, retry_after=retry_after)
    if limited and e.retry_after is None and wait is not None:
        e.retry_after = wait


def send(
    channel: Channel,
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float,
    max_retries: int,
    on_retry: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    reading: Reading = JSON_ANSWER,
    pace: Pace | None = None,
) -> Any:
    """request_once with the retry policy, the shared cool-down and the circuit breaker, the
    answer read as `reading` says (an error a 2xx body carries is retried when transient; a
    request that `reading.creates` something billed is retried only when it was certainly not
    applied, AnswerLost when it may have been: the module's docstring). `body`: as request_once.
    `pace`: each attempt waits for its pacer first (the module's docstring)."""
    s = _Send(channel, method, path, body, headers, timeout, on_retry, stop, reading, pace)
    creates = reading.creates
    policy = Policy(max(0, int(max_retries)) + 1, _unapplied if creates else _transient, _delay)
    try:
        return retrying(policy, s.waiting, stop, wake=channel.breaker.tripped, stopped=LlmCancelled)(_attempt, s)
    except ProviderUnreachable as e:
        cause = e.__cause__
        if creates and isinstance(cause, LlmError) and _maybe_applied(cause):
            raise AnswerLost(f"{method} {path}", cause) from e
        raise
    except LlmError as e:
        if creates and _maybe_applied(e):
            raise AnswerLost(f"{method} {path}", e) from e
        raise
