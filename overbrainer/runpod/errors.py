"""How Runpod fails us: the API client's failures, then provisioning's.

The API's: every message is one line, names what to do, never holds the API key, and for
401/402/403/422 is fixed (Runpod's own text is not shown). `status` is the HTTP status when Runpod
answered (None for transport failures); callers that record a failure keep only `Runpod answered
<status>` (`run_message`).

Provisioning a run's pod: each message is one line that says what happened to the pod (none
created, deleted, or possibly left) and what to do; the API's own failures (NoCredits, Rejected,
…) come through unchanged. `run_message` is what a run record keeps of any of them.
"""

from __future__ import annotations

import json

from overbrainer.errors import Interrupted, OverbrainerError, PersonMustAct
from overbrainer.support.redact import redact, words

KEY_ENV = "OVERBRAINER_RUNPOD__API_KEY"
URL_ENV = "OVERBRAINER_RUNPOD__BASE_URL"


class RunpodError(OverbrainerError):
    """Any failure of a Runpod API call."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(redact(message))
        self.status = status


class Ambiguous(RunpodError):
    """The create request may or may not have made a pod (timeout, transport error, 408, 5xx, an
    unreadable answer): never resend it blindly; look for the pod by its name first."""


class NoCapacity(RunpodError):
    """A 400 on a create: most often Runpod has no machine for this GPU type (and data centers)
    right now, in any wording (there is no machine code), so the walk tries the next type.
    `detail` is Runpod's own words (cleaned): shown when every type answered 400, in case the
    request itself is what Runpod refused."""

    def __init__(self, message: str, status: int | None = None, detail: str = ""):
        super().__init__(message, status)
        self.detail = detail


class NotFound(RunpodError):
    """Runpod's own 404 (problem+json): the resource is unknown, or not visible to this key."""


class WrongUrl(RunpodError):
    """A 404 or redirect that is not Runpod's: the base URL does not point at the v2 API."""


class KeyRefused(RunpodError, PersonMustAct):
    """401 (exit 77: a person must act)."""


class NoCredits(RunpodError, PersonMustAct):
    """402 (exit 77)."""


class Forbidden(RunpodError, PersonMustAct):
    """403: the key lacks a permission (on create: possibly to that GPU type). Exit 77."""


class NoKey(PersonMustAct):
    """No Runpod API key is set and the command needs one (exit 77)."""

    def __init__(self) -> None:
        super().__init__(f"no Runpod API key: set {KEY_ENV}")


class Rejected(RunpodError):
    """422 (or another 4xx Runpod gives no other meaning): the request itself is wrong; never
    retried."""


class Conflict(RunpodError):
    """409."""


class SecretExists(Conflict):
    """409 on creating an account secret: one with that name exists."""


class InvalidAnswer(RunpodError):
    """A 2xx whose body cannot be read (not JSON, wrong shape, an invalid pod id, too large)."""


class Unavailable(RunpodError):
    """408, 429 or 5xx still answered after the retries, or the API could not be reached."""


def problem_doc(body: bytes) -> dict | None:
    """The body as a JSON object when it is Runpod-shaped (RFC 9457 problem: a numeric `status`,
    or a `title`/`detail`), else None. An HTML or empty body is not Runpod's."""
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    status = doc.get("status")
    if (isinstance(status, int) and not isinstance(status, bool)) or "title" in doc or "detail" in doc:
        return doc
    return None


def problem_detail(body: bytes) -> str:
    """Runpod's `detail` (else its other words, as problem_text), cleaned and capped."""
    doc = problem_doc(body)
    detail = doc.get("detail") if doc is not None else None
    if isinstance(detail, str) and detail.strip():
        return words(detail)
    return problem_text(body)


def problem_text(body: bytes) -> str:
    """Runpod's words for other errors: title/detail/errors[] joined by `; `, else the body;
    redacted, control characters removed, one line, capped."""
    doc = problem_doc(body)
    parts: list[str] = []
    if doc is not None:
        for key in ("title", "detail"):
            if isinstance(doc.get(key), str) and doc[key].strip():
                parts.append(doc[key])
        errors = doc.get("errors")
        if isinstance(errors, list):
            parts += [e for e in errors if isinstance(e, str)]
    text = "; ".join(parts) if parts else body.decode("utf-8", "replace")
    return words(text) or "(empty body)"


FIXED = {
    401: f"Runpod refused the API key (401): check {KEY_ENV}",
    402: "Runpod answered 402: the account's balance is too low (deploying needs at least one hour of "
         "credits): add credits on the Runpod console",
    403: "Runpod answered 403: the API key may not do this: check the API key and that the GPU type is "
         "allowed (a restricted key needs read and write access to pods and to account secrets)",
    422: "Runpod answered 422: it rejected the request as invalid (please report it: overbrainer built "
         "an invalid request)",
}
SECRETS_403 = ("the Runpod API key may not manage secrets (403): give it read and write access to the "
               "account's secrets")


def error_for(status: int, body: bytes, what: str, *, create: bool = False, secrets: bool = False) -> RunpodError:
    """The error for a non-2xx answer to `what` (e.g. `GET /pods/abc`)."""
    if status == 401:
        return KeyRefused(FIXED[401], status)
    if status == 402:
        return NoCredits(FIXED[402], status)
    if status == 403:
        return Forbidden(SECRETS_403 if secrets else FIXED[403], status)
    if status == 422:
        return Rejected(FIXED[422], status)
    doc = problem_doc(body)
    if status == 404:
        if doc is None:
            return WrongUrl(f"{what} answered a 404 that is not Runpod's: {URL_ENV} does not point at "
                            "Runpod's v2 API", status)
        return NotFound(f"Runpod answered 404 to {what}: not found", status)
    if 300 <= status < 400:
        return WrongUrl(f"{what} answered a redirect ({status}), which is never followed: check {URL_ENV}", status)
    if create:
        if status == 400:
            detail = problem_detail(body)
            return NoCapacity(f"Runpod answered 400 to the create request: {detail}", status, detail)
        if status == 408 or status >= 500:
            return Ambiguous(f"Runpod answered {status} to the create request: the pod may exist", status)
        if status == 429:
            return Unavailable("Runpod answered 429: rate limited; try again in a minute", status)
        if status == 409:
            return Conflict("Runpod answered 409 to the create request", status)
        return Rejected(f"Runpod answered {status}: it rejected the create request (please report it: "
                        "overbrainer built an invalid request)", status)
    text = problem_text(body)
    if status == 409:
        cls = SecretExists if secrets else Conflict
        return cls(f"Runpod answered 409 to {what}: {text}", status)
    if status == 408 or status == 429 or status >= 500:
        return Unavailable(f"Runpod answered {status} to {what} after retries: {text}", status)
    return Rejected(f"Runpod answered {status} to {what}: {text}", status)


# --- provisioning ------------------------------------------------------------------------------

class NoTypePlaced(NoCapacity):
    """No listed GPU type gave a ready pod (none placed, or none became ready); an API NoCapacity
    is one type's answer, this is the whole walk's."""


class Unanswered(OverbrainerError):
    def __init__(self) -> None:
        super().__init__("Runpod did not answer the create calls clearly; check `overbrainer pod ls`")


class VolumeSize(OverbrainerError):
    def __init__(self, volume_id: str, why: str):
        super().__init__(f"cannot read the size of network volume {volume_id} ({why}): no pod was created, "
                         "since its watchdog could not watch the volume's disk space")


class HostKeySecret(OverbrainerError):
    def __init__(self, why: str):
        super().__init__(f"cannot store the run's host key as a Runpod account secret ({why}); "
                         "no pod was created")


class WatchdogRefused(OverbrainerError):
    """The watchdog's verdict was `failed <reason>`: it cannot delete its pod, so no job may start."""

    def __init__(self, reason: str, pod_id: str):
        super().__init__(f"the pod's watchdog refused ({reason}): pod {pod_id} was deleted and training "
                         "refused")
        self.reason = reason


class BootstrapFailed(WatchdogRefused):
    """The verdict was `failed bootstrap: <reason>`."""

    def __init__(self, reason: str, pod_id: str):
        OverbrainerError.__init__(self, f"the pod's bootstrap failed ({reason}): pod {pod_id} was deleted "
                                        "and training refused")
        self.reason = reason


class NotReady(OverbrainerError):
    """A created pod that never became ready (the walk deletes it and tries the next type)."""


class ProvisioningInterrupted(Interrupted):
    """Ctrl-C during provisioning: the pod that existed was deleted (or may be left)."""

    def __init__(self, pod_left: bool):
        tail = "a pod of it may be left: check `overbrainer pod ls`" if pod_left else "it has no pod left"
        super().__init__(f"interrupted before the job started: {tail}")
        self.pod_left = pod_left


def run_message(error: BaseException) -> str:
    """What `run.json` keeps of a failed provisioning: the message, except that an answer of the
    Runpod API is reduced to its status (its own text stays in the log, never in the record)."""
    status = getattr(error, "status", None)
    if isinstance(error, RunpodError) and status is not None:
        return f"Runpod answered {status}"
    return str(error)
