"""From a configured target to an Executor: `unknown target`, a missing host, connection errors.

A Runpod pod is reached over SSH too, but only through the run's lease (jobs.lease): it is created
for the run, or found again from the run's pod.json.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Mapping

from overbrainer.config.model import Config, SshTarget, Target
from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.exec.local import LocalExecutor
from overbrainer.exec.ssh import SshExecutor
from overbrainer.jobs.run_record import RunRecord

log = logging.getLogger(__name__)


def env_host_key(name: str) -> str:
    return f"OVERBRAINER_TARGETS__{name.upper()}__HOST"


def pick_target(config: Config, name: str | None = None) -> tuple[str, Target]:
    """(name, Target): `--target NAME`, else `[training] target`."""
    if name is None:
        if config.training is None:
            raise ConfigError("no [training] section in overbrainer.toml")
        name = config.training.target
    return name, config.target(name)


def record_target(config: Config, record: RunRecord) -> Target:
    """The target a run ran on; it must still be in overbrainer.toml (ConfigError otherwise)."""
    return config.target(record.target, run_id=record.id)


def target_host(name: str, target: SshTarget, environ: Mapping[str, str] | None = None) -> str:
    host = target.host
    if not host:
        host = (os.environ if environ is None else environ).get(env_host_key(name))
    if not host:
        raise ConfigError(f"targets.{name}.host is not set: set {env_host_key(name)}")
    return host


def open_executor(config: Config, name: str, target: Target, runs_dir: Path,
                  environ: Mapping[str, str] | None = None) -> LocalExecutor | SshExecutor:
    """Connect to the target. Errors: `cannot reach target `<n>`: …`."""
    kind = target.kind
    if kind == "local":
        return LocalExecutor(runs_dir)
    if isinstance(target, SshTarget):
        host = target_host(name, target, environ)
        # The executor's own errors already read `cannot reach target `<n>`: …` (its label), and
        # their class (TargetUnreachable, HostKeyError) tells the caller what to do.
        try:
            return SshExecutor(host, target.workdir, label=f"target `{name}`")
        except OSError as e:
            raise OverbrainerError(f"cannot reach target `{name}`: {e.strerror or e}", cause=e) from e
    if kind == "runpod":  # a pod exists per run: jobs.lease creates or finds it
        raise OverbrainerError(f"target `{name}` is a runpod target: its pod is reached through the run's "
                               "lease")
    raise ConfigError(f"target `{name}` has an unknown kind")

