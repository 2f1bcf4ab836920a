"""Errors of the LLM clients: one class, classified as fatal (stop the stage), retryable
(408/429/5xx/transport) or neither (fails only the item). `transport` is the kind of a failure
to reach the provider (support/http.FailureKind: refused, DNS, TLS, timeout, 5xx…), which the
circuit breaker counts;
`reason` is the short form a stage's summary gives when the error stopped it."""

from __future__ import annotations

from overbrainer.errors import Interrupted, OverbrainerError, PersonMustAct
from overbrainer.support.failure import FailureKind


class LlmError(OverbrainerError):
    """A failed provider request. The message never holds a secret or a config value."""

    def __init__(
        self,
        message: str,
        fatal: bool = False,
        retryable: bool = False,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        cause: BaseException | None = None,
        reason: str | None = None,
        transport: FailureKind | None = None,
    ):
        super().__init__(message, cause=cause)
        self.reason = reason
        self.transport = transport
        self.fatal = fatal
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class LlmCancelled(Interrupted):
    """The caller's stop event was set while a request waited (for a retry or a cool-down)."""

    def __init__(self, message: str = "interrupted while waiting to retry a provider request"):
        super().__init__(message)


AUTH_FAILED = "authentication failed"
PERMISSION_DENIED = "permission denied"


def key_variable(provider: str) -> str:
    """The environment variable that holds a provider's API key."""
    return f"OVERBRAINER_PROVIDERS__{provider.upper()}__API_KEY"


class KeyRefused(LlmError, PersonMustAct):
    """401/403: the provider refused the key, or wants one and none is set (`missing`). Fatal,
    and a person must act (exit 77): names the provider and the variable holding its key, never
    the key."""

    def __init__(self, provider: str, status: int, *, missing: bool = False):
        what = AUTH_FAILED if status == 401 else PERMISSION_DENIED
        fix = f"it has no API key: set {key_variable(provider)}" if missing else \
            f"check its API key ({key_variable(provider)})"
        super().__init__(f"provider {provider}: {what}; {fix}", fatal=True, status=status, reason=what)
        self.provider = provider


def auth_error(provider: str, status: int) -> KeyRefused:
    """401/403 as every provider means them (OpenRouter's 403 aside: llm/meanings.py)."""
    return KeyRefused(provider, status)


class ProviderUnreachable(LlmError):
    """The circuit breaker tripped: the provider kept failing to answer; nothing more is sent."""

    def __init__(self, provider: str, base_url: str, reason: str):
        super().__init__(f"provider {provider} ({base_url}) is unreachable: {reason}; nothing more was sent",
                         fatal=True, reason=f"provider unreachable ({reason})")


class AnswerLost(LlmError):
    """A request that creates something billed (a batch) was sent and no answer says whether it
    was applied: the connection closed after it was written, the answer timed out or was cut off,
    or a 5xx/408 came (a gateway's 502/504 may hide a success). Never sent again blindly: the
    caller settles it as a crash is settled (docs/retries.md). `cause` is the failure."""

    def __init__(self, what: str, cause: LlmError):
        super().__init__(f"no answer to {what} ({cause}): it may have been applied", status=cause.status,
                         transport=cause.transport, reason="no answer", cause=cause)


class CreditsError(LlmError, PersonMustAct):
    """The provider will not run the request on the account's money: out of credits, a quota
    spent, or (OpenRouter's 402) not enough for the asked `max_tokens`, where `afford` is the
    limit the balance still covers. Fatal: the stage stops at once (`credits: …`), and a person
    must act (exit 77)."""

    def __init__(self, provider: str, text: str, *, status: int | None, afford: int | None = None):
        super().__init__(f"credits: provider {provider}: {text}", fatal=True, status=status,
                         reason="credits")
        self.afford = afford


class Moderated(LlmError):
    """The provider's moderation flagged this input (OpenRouter's 403): the item is excluded,
    the stage goes on. `reasons` is what the provider said was flagged."""

    def __init__(self, provider: str, reasons: str, status: int = 403):
        super().__init__(f"provider {provider}: the input was flagged by moderation ({reasons})",
                         status=status, reason="flagged by moderation")
        self.reasons = reasons


UNSUPPORTED_EMBEDDINGS = "embeddings are not supported by this protocol"


def invalid(what: str) -> LlmError:
    return LlmError(f"invalid response: {what}")


def unsupported(message: str) -> LlmError:
    return LlmError(message, fatal=True)
