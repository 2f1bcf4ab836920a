"""The one retry loop of the tool (tenacity underneath): every call that is tried again — an LLM
request, a Runpod or Vault call, an SSH operation on a dropped connection, a list or a verdict
the model did not give in a readable form — says how in a `Policy` and runs under `retrying`.

    answer = retrying(Policy(3, transient, delay), on_retry=say, stop_event=stop)(send, request)

- `Policy(attempts, retryable, delay)`: `attempts` in all (1: never retried); `retryable(error)`
  says which errors are tried again (any other is raised at once); `delay(error, n)` the seconds
  to wait after failed attempt `n` (1-based; none by default). After the last attempt its error
  is raised.
- `Again(why)`: what an attempt raises when its result, not a failure, calls for another try (an
  answer that is not the asked-for list). `again` is the `retryable` that retries only it.
- `on_retry(error, seconds)` is called before each wait (a log line, an `item_failed` event);
  the wait ends early when `stop_event` is set (then `stopped()` is raised: `Interrupted` by
  default) or when `wake` is set (the next attempt comes at once: it decides what that means,
  e.g. a tripped circuit breaker). `sleep` replaces the wait (Runpod's scaled sleeps, tests).
- A controller per call (no state shared between calls or threads); the first attempt runs
  before any is built, so a call answered at once costs nothing more than the call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt

from overbrainer.errors import Interrupted
from overbrainer.support.sleep import pause

T = TypeVar("T")
OnRetry = Callable[[BaseException, float], None]


class Again(Exception):
    """The attempt's result calls for another try; the message says why (`on_retry` gets it)."""


def again(error: BaseException) -> bool:
    """The `retryable` of a policy that tries again on `Again` only."""
    return isinstance(error, Again)


def no_delay(error: BaseException, attempt: int) -> float:
    return 0.0


@dataclass(frozen=True)
class Policy:
    attempts: int
    retryable: Callable[[BaseException], bool] = again
    delay: Callable[[BaseException, int], float] = no_delay


def _interrupted() -> BaseException:
    return Interrupted("interrupted while waiting to retry")


def retrying(policy: Policy, on_retry: OnRetry | None = None, stop_event: Any = None, *, wake: Any = None,
             sleep: Callable[[float], object] | None = None,
             stopped: Callable[[], BaseException] = _interrupted) -> "Retry":
    """The retries of one call under `policy`: `retrying(...)(fn, *args)`. See the module
    docstring."""
    return Retry(policy, on_retry, stop_event, wake, sleep, stopped)


class Retry:
    """One call's retries. The first attempt runs at once (most calls need no other): only a
    retryable failure builds the tenacity controller, which counts that attempt as its first."""

    def __init__(self, policy: Policy, on_retry: OnRetry | None, stop_event: Any, wake: Any,
                 sleep: Callable[[float], object] | None, stopped: Callable[[], BaseException]):
        self.policy, self.on_retry, self.stop_event, self.wake = policy, on_retry, stop_event, wake
        self._sleep, self.stopped = sleep, stopped

    def __call__(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        try:
            return fn(*args, **kw)
        except Exception as e:
            if self.policy.attempts <= 1 or not self.policy.retryable(e):
                raise
            first: list[BaseException] = [e]

        def attempt() -> T:
            if first:
                raise first.pop()
            return fn(*args, **kw)

        return self._controller()(attempt)

    def _controller(self) -> Retrying:
        policy, on_retry = self.policy, self.on_retry

        def wait(state) -> float:
            return max(0.0, float(policy.delay(state.outcome.exception(), state.attempt_number)))

        def before_sleep(state) -> None:
            if on_retry is not None:
                on_retry(state.outcome.exception(), state.next_action.sleep)

        return Retrying(stop=stop_after_attempt(policy.attempts), retry=retry_if_exception(policy.retryable),
                        wait=wait, before_sleep=before_sleep, sleep=self._wait, reraise=True)

    def _wait(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        elif pause(seconds, self.stop_event, self.wake) and self.stop_event is not None and self.stop_event.is_set():
            raise self.stopped()
