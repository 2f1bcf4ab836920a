"""HTTP to the Runpod API on the shared stack (support/http.py): one session with the bearer key
and overbrainer's own User-Agent (Cloudflare in front of Runpod refuses library agents), no
redirects, bodies capped at 8 MiB, and the retry policies:

- reads, deletes, actions, catalog and secrets: up to 6 attempts on 408, 429, 5xx and transport
  failures; the wait is `Retry-After` (seconds or an HTTP-date, capped at 600) when given, else
  `min(2^n, 60) s × [0.5, 1)`, each `scaled()` (support/timescale.py);
- `POST /pods`: only 429 is retried (Runpod refuses before doing anything); a timeout, transport
  failure, 408, 5xx or unreadable answer raises `Ambiguous` at once: the pod may exist;
- before a 429: every answer's `RateLimit` header (`"minute";r=<left>;t=<secs to reset>, …`) is
  read, and when a window has no request left the next request waits for its reset (≤ 600 s,
  scaled).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit

from overbrainer.errors import ConfigError
from overbrainer.runpod.errors import URL_ENV, Ambiguous, InvalidAnswer, RunpodError, Unavailable, error_for
from overbrainer.support import fmt, http
from overbrainer.support import redact as redaction
from overbrainer.support.http import USER_AGENT, TooLarge, Unanswered, exchange
from overbrainer.support.retry import Policy, retrying
from overbrainer.support.sleep import pause
from overbrainer.support.timescale import scaled

log = logging.getLogger(__name__)

BODY_CAP = 8 * 1024 * 1024
RETRY_AFTER_CAP = http.RETRY_AFTER_CAP
ATTEMPTS = 6


@dataclass(frozen=True)
class Timeouts:
    """Seconds: connecting, waiting for any answer, and waiting for the answer to `POST /pods`."""

    connect: float = 10.0
    read: float = 30.0
    create: float = 60.0


class Answer(http.Answer):
    """A whole answer of Runpod's, read as JSON by `json(what)` (InvalidAnswer naming `what`)."""

    __slots__ = ()

    def json(self, what: str) -> Any:
        try:
            return json.loads(self.body) if self.body else None
        except json.JSONDecodeError as e:
            raise InvalidAnswer(f"Runpod's answer to {what} could not be read (line {e.lineno}, column {e.colno})",
                                self.status) from None
        except UnicodeDecodeError:
            raise InvalidAnswer(f"Runpod's answer to {what} could not be read (not UTF-8)", self.status) from None


class _Transient(Exception):
    """A retryable outcome: an answer (408/429/5xx) or a transport failure."""

    def __init__(self, answer: Answer | None = None, failure: Unanswered | None = None):
        super().__init__("transient")
        self.answer = answer
        self.failure = failure


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash; https, or http on a loopback host (test servers)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    loopback = host == "localhost"
    try:
        loopback = loopback or ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if not host or not (parts.scheme == "https" or (parts.scheme == "http" and loopback)):
        raise ConfigError(f"{URL_ENV} must be an https URL (http only on loopback)")
    return url.rstrip("/")


def parse_retry_after(value: str | None) -> float | None:
    """A Retry-After header in seconds, capped at 600 (support/http.retry_after)."""
    return http.retry_after(value, RETRY_AFTER_CAP)


def quota_wait(header: str | None) -> float | None:
    """Seconds until the latest reset of a used-up window of Runpod's `RateLimit` header
    (`"minute";r=0;t=12, "hour";r=2800;t=1812`: 12), capped at 600; None while every window has
    requests left (or the header is absent or unreadable)."""
    waits = []
    for member in (header or "").split(","):
        params = {}
        for part in member.split(";")[1:]:
            key, sep, value = part.partition("=")
            if sep:
                params[key.strip()] = value.strip()
        try:
            left, reset = int(params["r"]), float(params["t"])
        except (KeyError, ValueError):
            continue
        if left <= 0 and math.isfinite(reset) and reset >= 0:
            waits.append(reset)
    return min(max(waits), RETRY_AFTER_CAP) if waits else None


def backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based), scaled."""
    if retry_after is not None:
        return scaled(retry_after)
    return scaled(http.backoff(attempt))


def _transient(error: BaseException) -> bool:
    return isinstance(error, _Transient)


def _delay(error: BaseException, attempt: int) -> float:
    answer = error.answer if isinstance(error, _Transient) else None
    return backoff(attempt, parse_retry_after(answer.headers.get("Retry-After")) if answer else None)


def _warning(what: str) -> Callable[[BaseException, float], None]:
    """A call's retries said as warnings: `Runpod answered 503 (GET /pods); retrying in 2s`."""
    def waiting(error: BaseException, seconds: float) -> None:
        assert isinstance(error, _Transient)
        why = f"answered {error.answer.status}" if error.answer is not None else str(error.failure)
        log.warning("Runpod %s (%s); retrying in %s", why, what, fmt.duration(seconds))
    return waiting


class Transport:
    def __init__(self, base_url: str, api_key: str, timeouts: Timeouts | None = None, attempts: int = ATTEMPTS,
                 sleep: Callable[[float], None] | None = None):
        self.base = check_base_url(base_url)
        redaction.register(api_key)
        self.timeouts = timeouts or Timeouts()
        self.attempts = attempts
        self.sleep = pause if sleep is None else sleep
        self.session = http.session(self.base, headers={"Authorization": f"Bearer {api_key}",
                                                        "Accept": "application/json"})
        self._quota_until = 0.0  # time.monotonic() before which no request goes out (quota used up)

    def close(self) -> None:
        self.session.close()

    def _wait_for_quota(self, what: str) -> None:
        left = self._quota_until - time.monotonic()
        if left > 0:
            log.warning("Runpod's request quota is used up: waiting %s for its reset (%s)", fmt.duration(left), what)
            self.sleep(left)

    def _note_quota(self, answer: Answer) -> None:
        wait = quota_wait(answer.headers.get("RateLimit"))
        if wait is not None:
            self._quota_until = max(self._quota_until, time.monotonic() + scaled(wait))

    def _send(self, method: str, path: str, params, body, read_timeout: float) -> Answer:
        got = exchange(self.session, method, self.base + path, params=params, json=body, allow_redirects=False,
                       timeout=(self.timeouts.connect, read_timeout), cap=BODY_CAP)
        return Answer(got.status, got.headers, got.body)

    def call(self, method: str, path: str, *, params=None, body=None, create: bool = False,
             secrets: bool = False) -> Answer:
        """One request with its retry policy; a 2xx Answer, else the RunpodError for the answer."""
        what = f"{method} {path}"
        read_timeout = self.timeouts.create if create else self.timeouts.read

        def once() -> Answer:
            self._wait_for_quota(what)
            try:
                answer = self._send(method, path, params, body, read_timeout)
            except TooLarge:
                cls = Ambiguous if create else InvalidAnswer
                raise cls(f"Runpod's answer to {what} was larger than {BODY_CAP // 2**20} MiB") from None
            except Unanswered as e:
                if create:
                    raise Ambiguous(f"Runpod did not answer the create request ({e}): the pod may exist") from None
                raise _Transient(failure=e) from None
            self._note_quota(answer)
            if answer.status == 429 or (not create and (answer.status == 408 or answer.status >= 500)):
                raise _Transient(answer=answer)
            return answer

        try:
            answer = retrying(Policy(self.attempts, _transient, _delay), _warning(what), sleep=self.sleep)(once)
        except _Transient as t:
            if t.answer is None:
                raise Unavailable(f"Runpod could not be reached ({what}): {t.failure}") from None
            answer = t.answer
        if 200 <= answer.status < 300:
            return answer
        raise error_for(answer.status, answer.body, what, create=create, secrets=secrets)


__all__ = ["Answer", "RunpodError", "Timeouts", "Transport", "USER_AGENT", "backoff", "check_base_url",
           "parse_retry_after", "quota_wait"]
