"""The Hub through `huggingface_hub`'s public API (imported here, lazily): one `HfApi` with the
token passed explicitly (HF_TOKEN and the token file are never read), our User-Agent, the
library's shared HTTP client given a 10 s connect and 120 s read timeout, the library's logs
through ours and its own progress bars off; its errors turned into one line (a 429's
`Retry-After` read by support/http.retry_after, seconds or an HTTP-date).

`huggingface_hub` does the Hub's commit protocol (preupload, LFS batch and uploads, the NDJSON
commit) and retries uploads on 429/5xx itself (honouring Retry-After); nothing here retries again.
"""

from __future__ import annotations

import io
import logging
import math
import threading
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from overbrainer import __version__
from overbrainer.errors import OverbrainerError, PersonMustAct
from overbrainer.support import fmt
from overbrainer.support.http import retry_after

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 120.0
TOKEN_REFUSED = "Hugging Face refused the token: set OVERBRAINER_HF_TOKEN to a token with write access"
RATE_LIMITED = "Hugging Face rate limit, retry later"
_configured = False


class HubError(OverbrainerError):
    """A Hub failure, worded in one line. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class TokenRefused(HubError, PersonMustAct):
    """The Hub refused the token (401), or it may not write there (403): exit 77, a person must
    give it write access or set another."""


class _NotXet(logging.Filter):
    """Drops the library's note that file objects go up over LFS instead of Xet: that is our choice
    (LFS reports progress per byte read, and the Hub's LFS batch answer makes a rerun resume)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "not supported by Xet Storage" not in record.getMessage()


def _configure() -> None:
    """Once per process: the library's logs propagate to ours (the redactor applies), its bars are
    off (progress goes through the event bus)."""
    global _configured
    if _configured:
        return
    # lazy: huggingface_hub only when a push talks to the Hub (hub/__init__.py)
    from huggingface_hub.utils.tqdm import disable_progress_bars
    from huggingface_hub.utils import logging as hf_logging

    root = logging.getLogger("huggingface_hub")
    for h in list(root.handlers):
        root.removeHandler(h)
    hf_logging.enable_propagation()
    root.setLevel(logging.WARNING)
    logging.getLogger("huggingface_hub._commit_api").addFilter(_NotXet())
    disable_progress_bars()
    _configured = True


def _timeouts() -> None:
    """The library's shared client (its own request hooks kept: request ids, offline mode) with
    our timeouts; set on each `api()`, as the library may have made a new client since."""
    # lazy: huggingface_hub only when a push talks to the Hub (hub/__init__.py)
    import httpx2
    from huggingface_hub import get_session

    get_session().timeout = httpx2.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)


def api(base_url: str, token: str | None) -> Any:
    """An `HfApi` on `base_url` with `token` (None for a dry run)."""
    _configure()
    _timeouts()
    # lazy: huggingface_hub only when a push talks to the Hub (hub/__init__.py)
    from huggingface_hub import HfApi

    return HfApi(endpoint=base_url.rstrip("/"), token=token if token else False,
                 library_name="overbrainer", library_version=__version__)


def _retry_after(response: Any) -> str:
    seconds = retry_after(response.headers.get("Retry-After"), cap=None) if response is not None else None
    return "" if seconds is None else f" (in {fmt.duration(math.ceil(seconds), words=True)})"


def explain(error: BaseException, what: str, *, namespace: str | None = None, host: str = "") -> HubError:
    """One line for a failure of `what` (whoami, create, upload, commit…)."""
    # lazy: huggingface_hub only when a push talks to the Hub (hub/__init__.py)
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(error, HubError):
        return error
    known = (HfHubHTTPError, httpx2.TransportError)
    cause = error
    while not isinstance(cause, known) and cause.__cause__ is not None:
        cause = cause.__cause__  # the library wraps upload errors in RuntimeError
    if isinstance(cause, HfHubHTTPError) and cause.response is not None:
        status = cause.response.status_code
        if status == 401 or (status == 403 and what == "whoami"):
            return TokenRefused(TOKEN_REFUSED, status)
        if status == 403 and what == "create":
            return TokenRefused(f"the Hugging Face token needs write access to {namespace}", status)
        if status == 403:
            return TokenRefused(f"Hugging Face refused the {what} (403): the token needs write access to "
                                f"{namespace}", status)
        if status == 429:
            return HubError(RATE_LIMITED + _retry_after(cause.response), status)
        if status >= 500:
            return HubError(f"the Hugging Face Hub failed ({status} on {what}): nothing was committed, "
                            f"run it again later to resume", status)
        return HubError(f"Hugging Face answered {status} on {what}", status)
    if isinstance(cause, httpx2.TransportError):
        kind = type(cause).__name__
        where = f" at {host}" if host else ""
        return HubError(f"cannot reach the Hugging Face Hub{where} ({kind}) during {what}: "
                        f"nothing was committed, run it again to resume")
    return HubError(f"the push failed during {what}: {type(error).__name__}")


def host_of(url: str) -> str:
    return urlsplit(url).netloc.rsplit("@", 1)[-1]


class Progress:
    """Bytes read by the uploads, reported through `emit(done, total)`: at the start, at most
    every `interval` seconds, and at the end. Thread-safe (uploads run in parallel)."""

    def __init__(self, total: int, emit: Callable[[int, int], None], interval: float = 0.5):
        self.total = total
        self.done = 0
        self.emit = emit
        self.interval = interval
        self.lock = threading.Lock()
        self.last = 0.0

    def add(self, n: int) -> None:
        with self.lock:
            self.done = min(self.total, self.done + n)
            now = time.monotonic()
            if now - self.last < self.interval and self.done < self.total:
                return
            self.last = now
            done = self.done
        self.emit(done, self.total)

    def finish(self) -> None:
        with self.lock:
            self.done = self.total
        self.emit(self.total, self.total)


class CountedFile(io.BufferedReader):
    """A file whose reads count towards a Progress once `armed` (hashing reads do not count).
    Being a buffered reader also keeps uploads on the LFS protocol, which reports progress."""

    def __init__(self, path: Path, progress: Progress):
        super().__init__(io.FileIO(str(path), "rb"))
        self.progress = progress
        self.armed = False

    def read(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        data = super().read(size)
        if self.armed and data:
            self.progress.add(len(data))
        return data
