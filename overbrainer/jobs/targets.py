"""From a configured target to an Executor: `unknown target`, a missing host, connection errors.

A Runpod pod is reached over SSH too, but only through the run's lease (jobs.lease): it is created
for the run, or found again from the run's pod.json.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.exec.local import LocalExecutor
from overbrainer.exec.ssh import SshExecutor

log = logging.getLogger(__name__)


def env_host_key(name: str) -> str:
    return f"OVERBRAINER_TARGETS__{name.upper()}__HOST"


def pick_target(config: Any, name: str | None = None) -> tuple[str, Any]:
    """(name, Target): `--target NAME`, else `[training] target`."""
    training = getattr(config, "training", None)
    if name is None:
        if training is None:
            raise ConfigError("no [training] section in overbrainer.toml")
        name = training.target
    targets = getattr(config, "targets", None) or {}
    target = targets.get(name)
    if target is None:
        raise ConfigError(f"unknown target `{name}`: add [targets.{name}] to overbrainer.toml")
    return name, target


def record_target(config: Any, record) -> Any:
    """The target a run ran on; it must still be in overbrainer.toml."""
    target = (getattr(config, "targets", None) or {}).get(record.target)
    if target is None:
        raise OverbrainerError(f"target `{record.target}` of run {record.id} is no longer in overbrainer.toml")
    return target


def target_host(name: str, target: Any, environ=None) -> str:
    host = getattr(target, "host", None)
    if not host:
        host = (os.environ if environ is None else environ).get(env_host_key(name))
    if not host:
        raise ConfigError(f"targets.{name}.host is not set: set {env_host_key(name)}")
    return host


def open_executor(config: Any, name: str, target: Any, runs_dir: Path, environ=None):
    """Connect to the target. Errors: `cannot reach target `<n>`: …`."""
    kind = getattr(target, "kind", "local")
    if kind == "local":
        return LocalExecutor(runs_dir)
    if kind == "ssh":
        host = target_host(name, target, environ)
        # The executor's own errors already read `cannot reach target `<n>`: …` (its label), and
        # their class (TargetUnreachable, HostKeyError) tells the caller what to do.
        try:
            return SshExecutor(host, getattr(target, "workdir", "overbrainer"), label=f"target `{name}`")
        except OSError as e:
            raise OverbrainerError(f"cannot reach target `{name}`: {e.strerror or e}", cause=e) from e
    if kind == "runpod":  # a pod exists per run: jobs.lease creates or finds it
        raise OverbrainerError(f"target `{name}` is a runpod target: its pod is reached through the run's "
                               "lease")
    raise ConfigError(f"target `{name}` has an unknown kind")

