"""The check before a training run copies anything: `axolotl` runs in the target's runtime
(docs/runs.md#before-a-run). One command over the executor, `axolotl --version`, where the job
would run it: the venv's bin/ (or PATH) natively, the image with docker or podman, the pod's venv
on Runpod (once the pod is up, before the upload). `config check --probe` runs it too.

A missing or broken Axolotl is a configuration error (exit 2) naming the target and what installs
it; a target that cannot be reached stays the executor's own error (exit 1).
"""

from __future__ import annotations

import logging
from pathlib import Path
from shlex import quote
from typing import Any

from overbrainer.config.model import DEFAULT_IMAGE, DEFAULT_RUNPOD_IMAGE, DEFAULT_RUNPOD_VENV, Config, Target
from overbrainer.errors import ConfigError, Interrupted, OverbrainerError
from overbrainer.exec.base import Executor
from overbrainer.exec.runtime import Runtime
from overbrainer.front.interrupt import Interrupt
from overbrainer.jobs.lease import connect
from overbrainer.support.redact import redact, strip_controls

log = logging.getLogger(__name__)

AXOLOTL_VERSION = "0.19.0"
CHECK = ("axolotl", "--version")
NATIVE_SECS = 300.0  # importing Axolotl takes a while on a cold disk
CONTAINER_SECS = 1800.0  # the first check may pull the image
_MARK = "overbrainer-check:"
_NO_ENGINE = "no-engine"
_NOT_FOUND = 127
_NOT_RUN = ("126", "127")  # in a container: the command cannot run, or is not there


class AxolotlMissing(ConfigError):
    """`axolotl` does not run in the target's runtime (exit 2)."""


def install_line(venv: str) -> str:
    return f"python3.11 -m venv {venv} && {venv}/bin/pip install torch axolotl=={AXOLOTL_VERSION}"


def check_script(target: Any) -> str:
    """The sh script of the check: its first stdout line is `overbrainer-check: <exit code>` (or
    `no-engine`), then the last lines of what the command printed."""
    runtime = Runtime.from_target(target)
    lines = []
    if runtime.in_container:
        lines.append(f"command -v {quote(runtime.engine)} >/dev/null 2>&1 || "
                     f"{{ echo '{_MARK} {_NO_ENGINE}'; exit 0; }}")
    lines.append(f"out=$( {{ {runtime.tool_command(CHECK)}; }} 2>&1 ); code=$?")
    lines.append(f"echo \"{_MARK} $code\"; printf '%s\\n' \"$out\" | tail -n 5")
    return "\n".join(lines) + "\n"


def check_axolotl(executor: Executor, name: str, target: Any) -> str:
    """Run the check on `executor` (the target `name`'s); the version line Axolotl printed, or
    AxolotlMissing saying what installs it."""
    runtime = Runtime.from_target(target)
    timeout = CONTAINER_SECS if runtime.in_container else NATIVE_SECS
    if runtime.in_container:
        log.info("train: checking that axolotl runs in image %s on target `%s` (%s pulls it first when "
                 "missing)", runtime.image, name, runtime.engine)
    out = executor.probe(check_script(target), timeout=timeout)
    lines = [strip_controls(redact(line)).strip() for line in out.splitlines()]
    lines = [line for line in lines if line]
    if not lines or not lines[0].startswith(_MARK):
        raise OverbrainerError(f"target `{name}`: the axolotl check gave no answer")
    code = lines[0][len(_MARK):].strip()
    said = lines[-1] if len(lines) > 1 else ""
    if code == "0":
        log.debug("target `%s`: %s", name, said)
        return said or "axolotl runs"
    if runtime.in_container and code not in (*_NOT_RUN, _NO_ENGINE):  # the engine's own failure, not the image's
        raise OverbrainerError(f"target `{name}`: `{runtime.engine} run` failed there (exit {code}"
                               + (f": {said}" if said else "") + ")")
    raise AxolotlMissing(_missing(name, target, runtime, code, said))


def _missing(name: str, target: Target, runtime: Runtime, code: str, said: str) -> str:
    where = f"target `{name}`"
    detail = f" ({said})" if said else ""
    if code == _NO_ENGINE:
        return (f"{where}: {runtime.engine} is not installed there (runtime = \"docker\"): install it, or set "
                f"targets.{name}.runtime = \"native\" with a venv holding axolotl ({install_line('~/.venvs/axolotl')})")
    failed = "axolotl is not installed" if code == str(_NOT_FOUND) else f"`axolotl --version` exited with {code}"
    if runtime.in_container:
        return (f"{where}: {failed} in image {runtime.image}{detail}: use an image that brings it, e.g. "
                f"targets.{name}.image = \"{DEFAULT_IMAGE}\"")
    if target.kind == "runpod":
        return (f"{where}: {failed} on its pod, in {runtime.venv}/bin{detail}: the image must bring it; use "
                f"targets.{name}.image = \"{DEFAULT_RUNPOD_IMAGE}\" with venv = \"{DEFAULT_RUNPOD_VENV}\"")
    if runtime.venv:
        return f"{where}: {failed} in {runtime.venv}/bin{detail}; install it with: {install_line(runtime.venv)}"
    return (f"{where}: {failed} on its PATH{detail}; install it with: {install_line('~/.venvs/axolotl')}, then "
            f"set targets.{name}.venv = \"~/.venvs/axolotl\"")


def raced_check(executor: Executor, name: str, target: Any, interrupt: Interrupt) -> str:
    """`check_axolotl` raced against Ctrl-C (a check is safe to abandon)."""
    said = interrupt.race(check_axolotl, executor, name, target)
    if said is None:
        raise Interrupted("interrupted before the run started")
    return said


def checked_executor(config: Config, name: str, target: Target, runs_dir: Path, interrupt: Interrupt) -> Executor:
    """A local or SSH target, connected (raced), on which `axolotl` runs: checked before the run
    is created, so that a target without it leaves nothing behind (AxolotlMissing, exit 2)."""
    executor = connect(config, name, target, runs_dir, interrupt)
    try:
        raced_check(executor, name, target, interrupt)
    except BaseException:
        executor.close()
        raise
    return executor
