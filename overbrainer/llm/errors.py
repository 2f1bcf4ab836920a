"""Errors of the LLM clients: one class, classified as fatal (stop the stage), retryable
(408/429/5xx/transport) or neither (fails only the item)."""

from __future__ import annotations

from overbrainer.errors import Interrupted, OverbrainerError


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
    ):
        super().__init__(message, cause=cause)
        self.fatal = fatal
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class LlmCancelled(Interrupted):
    """The caller's stop event was set while a request waited (for a retry or a cool-down)."""

    def __init__(self, message: str = "interrupted while waiting to retry a provider request"):
        super().__init__(message)


AUTH_FAILED = "authentication failed, check the provider API key"
PERMISSION_DENIED = "permission denied by the provider"
UNSUPPORTED_EMBEDDINGS = "embeddings are not supported by this protocol"


def invalid(what: str) -> LlmError:
    return LlmError(f"invalid response: {what}")


def unsupported(message: str) -> LlmError:
    return LlmError(message, fatal=True)
