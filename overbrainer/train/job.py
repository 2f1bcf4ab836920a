"""What a training job runs (training.md §2.5), independent of the runtime that wraps it.

`plan_job(...)` gives the shell chain run in the run directory (stage lines, `axolotl train`, then
`merge-lora` and an export command unless the job stopped on a snapshot) and the job's non-secret
environment. The runtime (`exec/runtime.py`: native export prefix, docker/podman `-e`) wraps both;
secrets (`HF_TOKEN`) travel separately, by name only.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

PLUGIN_NAME = "overbrainer_metrics.py"
PLUGIN_FILE = Path(__file__).resolve().parent / "plugin" / PLUGIN_NAME
CONFIG_NAME = "axolotl.yaml"
SECRET_ENV = ("HF_TOKEN",)
STAGES = ("train", "merge", "export", "compare")


@dataclass(frozen=True)
class JobPlan:
    chain: str                          # POSIX sh, run with the run directory as cwd
    env: dict[str, str]                 # non-secret variables (PYTHONPATH to prepend, see job_env)
    secret_names: tuple[str, ...] = field(default=SECRET_ENV)


def plugin_source() -> bytes:
    """The metrics plugin shipped inside the package."""
    return PLUGIN_FILE.read_bytes()


def install_plugin(run_dir: str | os.PathLike) -> Path:
    """Write the plugin as `<run_dir>/plugin/overbrainer_metrics.py` (uploaded with the run)."""
    from overbrainer.support.atomic import atomic_write_bytes

    dest = Path(run_dir) / "plugin" / PLUGIN_NAME
    atomic_write_bytes(dest, plugin_source())
    return dest


def job_env(root: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The job's environment; `root` = the run directory as the job sees it. `PYTHONPATH` is meant
    to be prepended to the inherited value by the runtime (native), or set as is (container)."""
    root = root.rstrip("/") or "/"
    env = {
        "PYTHONPATH": f"{root}/plugin",
        "OVERBRAINER_METRICS": f"{root}/metrics.jsonl",
        "OVERBRAINER_SNAPSHOT": f"{root}/snapshot.request",
        "AXOLOTL_DO_NOT_TRACK": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    env.update(extra or {})
    return env


def stage_command(name: str) -> str:
    """Append `{"event":"stage","name":NAME,"time":<unix>}` to the metrics file."""
    if name not in STAGES:
        raise ValueError(f"unknown job stage {name!r}")
    record = '{"event":"stage","name":"%s","time":%%s}\\n' % name
    return f"printf '{record}' \"$(date +%s)\" >> \"${{OVERBRAINER_METRICS:-metrics.jsonl}}\""


def axolotl_program(venv: str | None) -> str:
    """The shell word that runs axolotl: `<venv>/bin/axolotl` (a leading `~/` becomes
    `"$HOME"/`, expanded where the job runs), or `axolotl` from PATH without a venv."""
    if not venv:
        return "axolotl"
    venv = venv.rstrip("/") or "/"
    if venv == "~":
        return '"$HOME"/bin/axolotl'
    if venv.startswith("~/"):
        return '"$HOME"/' + shlex.quote(venv[2:].lstrip("/") + "/bin/axolotl")
    return shlex.quote(venv + "/bin/axolotl")


def job_chain(*, axolotl: str = "axolotl", merge: bool = False, export_command: str | None = None,
              config: str = CONFIG_NAME) -> str:
    """`stage train && axolotl train axolotl.yaml`, then (unless `snapshot.json` exists after
    training: a stopped run skips them and still exits 0) the merge and export commands."""
    cfg = shlex.quote(config)
    first = f"{stage_command('train')} && {axolotl} train {cfg}"
    rest = []
    if merge:
        rest.append(f"{stage_command('merge')} && {axolotl} merge-lora {cfg}")
    if export_command:
        rest.append(f"{stage_command('export')} && {export_command}")
    if not rest:
        return first
    return f"{first} && {{ [ -f snapshot.json ] || {{ {' && '.join(rest)}; }}; }}"


def wants_merge(training) -> bool:
    """`merge = true` only means something for an adapter (lora/qlora)."""
    adapter = getattr(training, "adapter", None)
    adapter = str(getattr(adapter, "value", adapter) or "").lower()
    return bool(getattr(training, "merge", False)) and adapter in ("lora", "qlora")


def plan_job(root: str, *, merge: bool = False, axolotl: str = "axolotl", export_command: str | None = None,
             extra_env: dict[str, str] | None = None) -> JobPlan:
    """The chain and env of a training job whose run directory the job sees as `root`."""
    return JobPlan(
        chain=job_chain(axolotl=axolotl, merge=merge, export_command=export_command),
        env=job_env(root, extra_env),
    )
