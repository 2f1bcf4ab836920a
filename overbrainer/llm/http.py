"""HTTP for the LLM clients: one `requests.Session` per provider (pool ≥ concurrency), one
request with a total deadline, the retry policy (tenacity) and the provider-wide 429 cool-down.

Retry policy: 408/429/5xx and transport failures are retried up to
`max_retries` times; the wait is `Retry-After` (seconds, capped at 600) when given, else
`min(2^n, 60) s × (0.5 + 0.5·rand)`. After a 429 every thread sending to the same provider waits out
the cool-down before its next send. Waits use `stop.wait()` so a caller's Event cancels them.

Every attempt reports to the provider's circuit breaker (llm/breaker.py); once it trips, no
attempt is sent any more and waiting retries end with ProviderUnreachable.
"""

from __future__ import annotations

import json
import logging
import math
import random
import socket
import ssl
import threading
import time
from typing import Any, Callable

import requests
from requests.adapters import HTTPAdapter
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from overbrainer import __version__
from overbrainer.llm.breaker import Breaker
from overbrainer.llm import meanings
from overbrainer.llm.errors import LlmCancelled, LlmError, ProviderUnreachable, invalid

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
RETRY_AFTER_CAP = 600.0
BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0
_CHUNK = 64 * 1024
_TRIP_POLL = 0.05  # how often a retry's wait looks at the breaker while it also waits on `stop`

# Transport failure kinds (the breaker counts a streak of one kind) and their words.
REFUSED, DNS, TLS, TIMEOUT, CUT_OFF, CONNECT = (
    "connection refused", "DNS lookup failed", "TLS handshake failed", "timed out",
    "the answer was cut off", "cannot connect")
SERVER = meanings.SERVER
# What a non-2xx answer means: (status, body, Retry-After seconds) -> LlmError.
Explain = Callable[[int, bytes, "float | None"], LlmError]


class Channel:
    """Everything one provider's requests share: the session (connection pool) and the
    "not before" time set by a 429."""

    def __init__(self, name: str, base_url: str, pool_size: int):
        self.name = name
        self.base = base_url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"overbrainer/{__version__}"
        self.pool_size = 0
        self.not_before = 0.0
        self.announced = False  # the client said how this provider is spoken to
        self.breaker = Breaker()
        self._lock = threading.Lock()
        self.ensure_pool(pool_size)

    def ensure_pool(self, size: int) -> None:
        size = max(10, int(size))
        with self._lock:
            if size <= self.pool_size:
                return
            adapter = HTTPAdapter(pool_connections=4, pool_maxsize=size, max_retries=0)
            self.session.mount("http://", adapter)
            self.session.mount("https://", adapter)
            self.pool_size = size

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


_channels: dict[tuple[str, str], Channel] = {}
_channels_lock = threading.Lock()


def channel_for(name: str, base_url: str, pool_size: int) -> Channel:
    """The process-wide channel of a provider (one per name and URL), its pool grown if needed."""
    key = (name, base_url.rstrip("/"))
    with _channels_lock:
        channel = _channels.get(key)
        if channel is None:
            channel = _channels[key] = Channel(name, base_url, pool_size)
            return channel
    channel.ensure_pool(pool_size)
    return channel


def close_channels() -> None:
    with _channels_lock:
        channels = list(_channels.values())
        _channels.clear()
    for channel in channels:
        channel.close()


def pause(seconds: float, stop: threading.Event | None, tripped: threading.Event | None = None) -> None:
    """Sleep, or raise LlmCancelled as soon as `stop` is set; return early once `tripped` is."""
    if tripped is None:
        if stop is None:
            time.sleep(seconds)
        elif stop.wait(seconds):
            raise LlmCancelled()
        return
    if stop is None:
        tripped.wait(seconds)
        return
    deadline = time.monotonic() + seconds
    while not tripped.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        if stop.wait(min(remaining, _TRIP_POLL)):
            raise LlmCancelled()


def parse_retry_after(value: str | None) -> float | None:
    """Seconds (fractional, non-negative) only; the HTTP-date form is ignored."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def status_error(status: int, body: bytes, retry_after: float | None, provider: str = "?") -> LlmError:
    """The error of a non-2xx answer, as every provider means it (llm/meanings.py)."""
    return meanings.explain(status, body, retry_after, provider)


def _connection_kind(exc: BaseException) -> str:
    """What kept a connection from being made: refused, DNS, TLS, or (unknown) cannot connect."""
    import urllib3.exceptions as u3

    seen: set[int] = set()
    stack: list = [exc]
    while stack:
        x = stack.pop()
        if not isinstance(x, BaseException) or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, (socket.gaierror, getattr(u3, "NameResolutionError", socket.gaierror))):
            return DNS
        if isinstance(x, ConnectionRefusedError):
            return REFUSED
        if isinstance(x, (ssl.SSLError, requests.exceptions.SSLError, u3.SSLError)):
            return TLS
        stack.extend([x.__cause__, x.__context__, getattr(x, "reason", None), *x.args])
    return CONNECT


def _transport(kind: str, cause: BaseException | None = None) -> LlmError:
    return LlmError(f"request failed ({kind})", retryable=True, cause=cause, transport=kind)


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
) -> Any:
    """One HTTP exchange → the parsed JSON of a 2xx answer, else LlmError (what the status means:
    `explain`, by default as every provider means it). `timeout` bounds the whole exchange
    (connect, wait, body)."""
    deadline = time.monotonic() + timeout
    data = None if body is None else json.dumps(body).encode()
    hdrs = dict(headers or {})
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    try:
        resp = channel.session.request(
            method,
            channel.url(path),
            data=data,
            headers=hdrs,
            timeout=(min(connect_timeout, timeout), timeout),
            stream=True,
        )
    except requests.Timeout as e:
        raise _transport(TIMEOUT, e) from None
    except requests.ConnectionError as e:
        raise _transport(_connection_kind(e), e) from None
    except requests.RequestException as e:
        raise LlmError("request failed", retryable=True, cause=e) from None
    try:
        raw = _read_body(resp, deadline)
    finally:
        resp.close()
    status = resp.status_code
    if status < 200 or status >= 300:
        retry_after = parse_retry_after(resp.headers.get("Retry-After"))
        if explain is not None:
            raise explain(status, raw, retry_after)
        raise status_error(status, raw, retry_after, channel.name)
    try:
        return json.loads(raw)
    except ValueError:
        raise invalid("not JSON") from None


def _timed_out() -> LlmError:
    return _transport(TIMEOUT)


def _read_body(resp: requests.Response, deadline: float) -> bytes:
    """The whole body by `deadline`. Reads what has arrived (read1) with the socket's wait cut to
    the time left, so a server that trickles bytes (keep-alive whitespace) cannot stretch the
    request past its total timeout."""
    import urllib3.exceptions as u3

    raw = resp.raw
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # urllib3 1.x: whole chunks only
        chunks = []
        try:
            for chunk in resp.iter_content(_CHUNK):
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise _timed_out()
        except requests.RequestException as e:
            raise _transport(CUT_OFF, e) from None
        return b"".join(chunks)
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    before = sock.gettimeout() if sock is not None else None
    chunks = []
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timed_out()
            if sock is not None:
                try:
                    sock.settimeout(remaining)
                except OSError:
                    pass
            chunk = read1(_CHUNK, decode_content=True)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    except (u3.ReadTimeoutError, TimeoutError) as e:
        raise _transport(TIMEOUT, e) from None
    except (u3.HTTPError, OSError) as e:
        raise _transport(CUT_OFF, e) from None
    finally:
        if sock is not None:  # the pool may reuse the connection: give it its timeout back
            try:
                sock.settimeout(before)
            except OSError:
                pass


def display_url(url: str) -> str:
    """A base URL fit for a message: without any user:password part."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, LlmError) and exc.retryable


def backoff(attempt: int) -> float:
    """Wait before retry number `attempt` (1-based) without Retry-After."""
    return min(BACKOFF_BASE * 2 ** (attempt - 1), BACKOFF_CAP) * (0.5 + 0.5 * random.random())


def format_seconds(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds >= 0.1 or seconds == 0 else f"{seconds:.2f}s"


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
    explain: Explain | None = None,
    inspect: Callable[[Any], "LlmError | None"] | None = None,
) -> Any:
    """request_once with the retry policy, the shared cool-down and the circuit breaker.
    `inspect(doc)` gives the error a 2xx answer carries in its body (or None): it is handled as
    if the answer had that status, retried when transient."""
    breaker = channel.breaker

    def unreachable() -> ProviderUnreachable:
        return ProviderUnreachable(channel.name, display_url(channel.base), breaker.reason or "no answer")

    def attempt() -> Any:
        if stop is not None and stop.is_set():
            raise LlmCancelled("interrupted before a provider request was sent")
        channel.wait_cool_down(stop)
        if breaker.tripped.is_set():
            raise unreachable()
        try:
            doc = request_once(channel, method, path, body=body, headers=headers, timeout=timeout,
                               explain=explain)
            carried = inspect(doc) if inspect is not None else None
            if carried is not None:
                raise carried
        except LlmError as e:
            # The provider said how long to wait: everybody waits, even when this request gives up.
            if e.status == 429 and e.retry_after is not None:
                channel.cool_down(min(e.retry_after, RETRY_AFTER_CAP))
            if e.transport is None:
                breaker.answered()
            elif breaker.failure(e.transport, str(e) if e.transport == SERVER else e.transport):
                log.debug("%s %s: %s; the circuit breaker trips", channel.name, path, e)
                raise unreachable() from e
            raise
        breaker.success()
        return doc

    def wait(state) -> float:
        exc = state.outcome.exception()
        if isinstance(exc, LlmError) and exc.retry_after is not None:
            return min(exc.retry_after, RETRY_AFTER_CAP)
        return backoff(state.attempt_number)

    def before_sleep(state) -> None:
        exc = state.outcome.exception()
        seconds = state.next_action.sleep
        if isinstance(exc, LlmError) and exc.status == 429:
            channel.cool_down(seconds)
        message = f"{exc}; retrying in {format_seconds(seconds)}"
        log.debug("%s %s: %s", channel.name, path, message)
        if on_retry is not None:
            on_retry(message)

    retrying = Retrying(
        stop=stop_after_attempt(max(0, int(max_retries)) + 1),
        wait=wait,
        retry=retry_if_exception(_is_retryable),
        before_sleep=before_sleep,
        sleep=lambda seconds: pause(seconds, stop, breaker.tripped),
        reraise=True,
    )
    return retrying(attempt)
