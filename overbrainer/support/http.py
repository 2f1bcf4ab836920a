"""HTTP as every client of the tool speaks it (the LLM providers, Runpod, Vault; the Hub's
messages): how a session is built, one exchange sent and its body read, how long to wait before
a retry, and how a failure or a server's words are put in a message. A client keeps only what
is its own: which statuses and methods it retries, how many attempts,
and what an answer means (its errors).

- `session(base_url, headers=, pool=)`: a `requests.Session` with overbrainer's User-Agent, a
  connection pool of `pool` (≥ the caller's concurrency; `grow_pool` enlarges it), no urllib3
  retries, and the environment read once, here: the proxy for `base_url` (`HTTPS_PROXY`,
  `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`) and `REQUESTS_CA_BUNDLE` / `CURL_CA_BUNDLE`; never
  `~/.netrc` (its credentials would replace the client's own Authorization header). requests
  would otherwise scan the environment on every request.
- `exchange(session, method, url, timeout=(connect, read), deadline=, cap=, sink=, **kw) -> Answer`:
  one request and its whole body (`read_body`); `Unanswered(kind)` when no whole answer came,
  `TooLarge` past `cap` bytes. `sink`: a 2xx body goes there, chunk by chunk, not into memory.
- `read_body(response, deadline=, cap=, sink=)`: the body by a deadline (a server trickling bytes
  cannot stretch a request past it by more than `DEADLINE_SLACK`) and within a cap; written to
  `sink` as it arrives when one is given (what `sink.write` raises ends the read and is raised).
- `retry_after(value, cap=)`: a `Retry-After` header, in seconds or as an HTTP-date;
  `backoff(attempt, base, cap)`: `min(base·2^(n-1), cap) × [0.5, 1)` (the jitter).
- The retry loop itself is support/retry.py's (`retrying(policy, ...)`), the same for every call.
- `FailureKind` (support/failure.py): why no usable answer came, matched as an enum (`kind.text`
  its words), on `Unanswered.kind` here and `LlmError.transport` in the LLM clients.
- Redaction: a failure is worded by its kind only (`describe(kind)`: never the library's text,
  which holds the URL), a URL without its credentials (`display_url`), and a server's words
  through `support.redact.words` (secrets masked, control characters removed, one line, capped).
"""

from __future__ import annotations

import math
import os
import random
import socket
import ssl
import time
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3.exceptions as u3
from requests.adapters import HTTPAdapter

from overbrainer import __version__
from overbrainer.support.failure import FailureKind

USER_AGENT = f"overbrainer/{__version__}"
POOL = 10              # the smallest connection pool of a session
RETRY_AFTER_CAP = 600.0  # the longest wait a server may ask for (seconds)
BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0
DEADLINE_SLACK = 1.0   # how far a body read may run past its deadline (seconds)
CHUNK = 64 * 1024

REFUSED, DNS, TLS, TIMEOUT, CUT_OFF, CONNECT = (FailureKind.REFUSED, FailureKind.DNS, FailureKind.TLS,
                                                FailureKind.TIMEOUT, FailureKind.CUT_OFF, FailureKind.CONNECT)
NO_ANSWER = FailureKind.NO_ANSWER
FAILED = "request failed"  # any other failure of the request (describe(None))


class Unanswered(Exception):
    """No whole answer came. `kind` is a FailureKind (never SERVER), or None for another failure
    of the request; `cause` the library's exception (never put in a message: it holds the URL)."""

    def __init__(self, kind: FailureKind | None, cause: BaseException | None = None):
        super().__init__(describe(kind))
        self.kind = kind
        self.cause = cause


class TooLarge(Exception):
    """The answer's body was larger than `cap` bytes (decoded)."""

    def __init__(self, cap: int):
        super().__init__(f"the answer was larger than {cap} bytes")
        self.cap = cap


class Answer:
    """A whole answer: `status`, `headers` (case-insensitive), `body` (decoded bytes)."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Any, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body


def describe(kind: FailureKind | None) -> str:
    return kind.text if kind is not None else FAILED


# --- sessions ---------------------------------------------------------------------------------

def session(base_url: str, *, headers: dict[str, str] | None = None, pool: int = POOL) -> requests.Session:
    """A session for the server at `base_url` (see the module's docstring)."""
    s = requests.Session()
    s.trust_env = False
    s.proxies.update(requests.utils.get_environ_proxies(base_url))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        s.verify = bundle
    s.headers["User-Agent"] = USER_AGENT
    if headers:
        s.headers.update(headers)
    grow_pool(s, pool)
    return s


def grow_pool(s: requests.Session, size: int) -> int:
    """Mount a pool of `size` connections (at least POOL) on `s`; returns the size mounted."""
    size = max(POOL, int(size))
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=size, max_retries=0)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return size


# --- one exchange -----------------------------------------------------------------------------

def exchange(s: requests.Session, method: str, url: str, *, timeout: tuple[float, float],
             deadline: float | None = None, cap: int | None = None, sink: Any = None, **kw: Any) -> Answer:
    """One request (no retry) and its whole body. `timeout` is requests' (connect, read) pair;
    `deadline` (time.monotonic()) bounds the body read too; `kw` goes to `Session.request`
    (params, data, json, headers, allow_redirects). `sink` (with a `write`): a 2xx body is
    written there as it arrives (the Answer's body is then empty); an error's body is read as
    usual. Raises Unanswered or TooLarge."""
    try:
        response = s.request(method, url, timeout=timeout, stream=True, **kw)
    except requests.RequestException as e:
        raise Unanswered(failure_kind(e), e) from None
    ok = 200 <= response.status_code < 300
    try:
        body = read_body(response, deadline=deadline, cap=cap, sink=sink if ok else None)
    finally:
        response.close()
    return Answer(response.status_code, response.headers, body)


def failure_kind(exc: BaseException) -> FailureKind | None:
    """What kept a request from being answered, and whether it was sent: before it was written,
    REFUSED, DNS, TLS or CONNECT (a connect timeout, another failure to connect); after, TIMEOUT
    (no answer in time) or NO_ANSWER (the connection closed, e.g. a server or proxy that dropped
    it); None for another failure of the request."""
    if isinstance(exc, requests.ConnectTimeout):
        return CONNECT
    if isinstance(exc, requests.Timeout):
        return TIMEOUT
    if not isinstance(exc, requests.ConnectionError):
        return None
    seen: set[int] = set()
    stack: list = [exc]
    connecting = False
    while stack:
        x = stack.pop()
        if not isinstance(x, BaseException) or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, (socket.gaierror, u3.NameResolutionError)):
            return DNS
        if isinstance(x, ConnectionRefusedError):
            return REFUSED
        if isinstance(x, (ssl.SSLError, requests.exceptions.SSLError, u3.SSLError)):
            return TLS
        connecting = connecting or isinstance(x, (u3.NewConnectionError, u3.ConnectTimeoutError))
        stack.extend([x.__cause__, x.__context__, getattr(x, "reason", None), *x.args])
    # No connection was made (another way), or one was, the request written on it, and it closed
    # before an answer (`Connection aborted.`: RemoteDisconnected, a reset, a broken pipe).
    return CONNECT if connecting else NO_ANSWER


def read_body(response: requests.Response, *, deadline: float | None = None, cap: int | None = None,
              sink: Any = None) -> bytes:
    """The whole (decoded) body, by `deadline` and within `cap` bytes. Reads what has arrived
    (read1); the socket's own wait is cut to the time left only when it exceeds it by more than
    DEADLINE_SLACK (a settimeout per read would cost every request a few system calls). `sink`:
    each chunk is written there instead (b"" returned), and what its `write` raises (a full
    disk, a reader that has seen enough) is raised as it is, not taken for a cut connection."""
    raw = response.raw
    read = getattr(raw, "read1", raw.read)
    sock = getattr(getattr(raw, "connection", None), "sock", None) if deadline is not None else None
    before = current = sock.gettimeout() if sock is not None else None
    chunks: list[bytes] = []
    size, writing = 0, False
    try:
        while True:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Unanswered(TIMEOUT)
                if sock is not None and (current is None or current > left + DEADLINE_SLACK):
                    sock.settimeout(left)
                    current = left
            chunk = read(CHUNK, decode_content=True)
            if not chunk:
                break
            size += len(chunk)
            if cap is not None and size > cap:
                raise TooLarge(cap)
            if sink is None:
                chunks.append(chunk)
            else:
                writing = True
                sink.write(chunk)
                writing = False
    except (u3.ReadTimeoutError, TimeoutError) as e:
        if writing:
            raise
        raise Unanswered(TIMEOUT, e) from None
    except (u3.HTTPError, OSError) as e:
        if writing:
            raise
        raise Unanswered(CUT_OFF, e) from None
    finally:
        if current is not before:  # the pool may reuse the connection: give it its timeout back
            try:
                sock.settimeout(before)
            except OSError:
                pass
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# --- waits ------------------------------------------------------------------------------------

def retry_after(value: str | None, cap: float | None = RETRY_AFTER_CAP, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` value: delay-seconds (fractions accepted) or an
    HTTP-date (a date past is 0), at most `cap` (None: uncapped); None when absent or unreadable.
    `now` (Unix time) is for tests."""
    text = (value or "").strip()
    if not text:
        return None
    try:
        seconds: float | None = float(text)
    except ValueError:
        seconds = _date_wait(text, time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds if cap is None else min(seconds, cap)


def _date_wait(text: str, now: float) -> float | None:
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # RFC 9110: an HTTP-date is always UTC
        moment = moment.replace(tzinfo=timezone.utc)
    return max(moment.timestamp() - now, 0.0)


def backoff(attempt: int, base: float = BACKOFF_BASE, cap: float = BACKOFF_CAP) -> float:
    """The wait after failed attempt number `attempt` (1-based) when the server named none."""
    return min(base * 2 ** (attempt - 1), cap) * random.uniform(0.5, 1.0)


# --- messages ---------------------------------------------------------------------------------

def display_url(url: str) -> str:
    """A URL fit for a message: without any user:password part."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
