"""How provisioning a run's pod fails. Each message is one line that says what happened to the
pod (none created, deleted, or possibly left) and what to do. The API's own failures (NoCredits,
Rejected, …) come from overbrainer/runpod/errors.py unchanged; `run_message` is what a run record
keeps of any of them."""

from __future__ import annotations

from overbrainer import errors as base
from overbrainer.errors import OverbrainerError
from overbrainer.runpod import errors as api


class NoTypePlaced(api.NoCapacity):
    """No listed GPU type gave a ready pod (none placed, or none became ready); an API NoCapacity
    (`runpod.errors`) is one type's answer, this is the whole walk's."""


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


class ProvisioningInterrupted(base.Interrupted):
    """Ctrl-C during provisioning: the pod that existed was deleted (or may be left)."""

    def __init__(self, pod_left: bool):
        tail = "a pod of it may be left: check `overbrainer pod ls`" if pod_left else "it has no pod left"
        super().__init__(f"interrupted before the job started: {tail}")
        self.pod_left = pod_left


def run_message(error: BaseException) -> str:
    """What `run.json` keeps of a failed provisioning: the message, except that an answer of the
    Runpod API is reduced to its status (its own text stays in the log, never in the record)."""
    status = getattr(error, "status", None)
    if isinstance(error, api.RunpodError) and status is not None:
        return f"Runpod answered {status}"
    return str(error)
