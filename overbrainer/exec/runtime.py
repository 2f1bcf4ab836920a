"""How a job's command is built for a runtime: native (venv or PATH), docker or podman.
Only command text is built here; the executor runs it. Rules: docs/runs.md#job-control-on-the-target.

    rt = Runtime.from_target(target)
    script, container = rt.job(run_id, run_dir, cache_dir,
                               [Step("train", ("axolotl", "train", "axolotl.yaml"))],
                               secret_names=["HF_TOKEN"])
    JobSpec(run_dir, script, secrets={"HF_TOKEN": token}, container=container)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Iterable

from overbrainer.config.model import DEFAULT_IMAGE, ENGINES, RUNTIMES, LocalTarget, RunpodTarget, SshTarget, Target
from overbrainer.exec.base import Container
from overbrainer.exec.scripts import dir_expr

q = shlex.quote

NODE_RANK = "OVERBRAINER_NODE_RANK"  # set per node by a job started on several nodes (exec/nodes.py)
CONTAINER_ROOT = "/workspace/run"
CONTAINER_CACHE = "/workspace/hf-cache"
# Every job runs with telemetry off (Axolotl hangs trying to reach its endpoint offline).
TELEMETRY_OFF = {"AXOLOTL_DO_NOT_TRACK": "1", "DO_NOT_TRACK": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
DOCKER_GPU = ("--gpus", "all", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864")
PODMAN_GPU = ("--device", "nvidia.com/gpu=all", "--security-opt=label=disable", "--ulimit", "host")


@dataclass(frozen=True)
class Step:
    """One command of the job, announced by a stage line in metrics.jsonl before it runs.

    args[0] is the tool (`axolotl`): from the venv's bin/ natively, from PATH in a container;
    with `from_path` (e.g. `sh`), from PATH everywhere (natively the venv's bin/ is first on it).
    `primary_only`: a job started on several nodes (exec/nodes.py) runs the step on its primary
    only (the node whose OVERBRAINER_NODE_RANK is 0, or that has none); the others skip it.
    """

    stage: str
    args: tuple[str, ...]
    from_path: bool = False
    primary_only: bool = False


@dataclass(frozen=True)
class Runtime:
    kind: str = "native"  # native | docker
    venv: str | None = None  # native only
    engine: str = "docker"  # docker runtime only: docker | podman
    image: str = DEFAULT_IMAGE
    gpus: bool = True

    def __post_init__(self) -> None:
        if self.kind not in RUNTIMES:
            raise ValueError(f"unknown runtime {self.kind!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"unknown container engine {self.engine!r}")

    @classmethod
    def from_target(cls, target: Target) -> "Runtime":
        """From a config Target: its runtime, venv, engine and image; a runpod target has no
        runtime of its own (natively, in its image's venv)."""
        if isinstance(target, RunpodTarget):
            return cls(venv=target.venv or None, image=target.image)
        if not isinstance(target, (LocalTarget, SshTarget)):  # a bare Target: the defaults
            return cls()
        kind, engine = target.runtime, target.engine
        if kind == "podman":  # tolerated shorthand
            kind, engine = "docker", "podman"
        return cls(kind=kind, venv=target.venv or None, engine=engine, image=target.image)

    @property
    def in_container(self) -> bool:
        return self.kind == "docker"

    def root(self, run_dir: str) -> str:
        """The run directory as the job sees it."""
        return CONTAINER_ROOT if self.in_container else run_dir

    def job_env(self, run_dir: str, subdir: str | None = None) -> dict[str, str]:
        """Plain (never secret) settings every job gets; PYTHONPATH is prepended natively.
        `subdir`: the job runs in that subdirectory of the run directory (a side job)."""
        root = self.root(run_dir) + (f"/{subdir.strip('/')}" if subdir else "")
        return {
            **TELEMETRY_OFF,
            "OVERBRAINER_METRICS": f"{root}/metrics.jsonl",
            "OVERBRAINER_SNAPSHOT": f"{root}/snapshot.request",
            "PYTHONPATH": f"{root}/plugin",
        }

    def venv_bin(self) -> str | None:
        """The venv's bin/ (native with a venv only), as written in the target's settings."""
        if self.in_container or not self.venv:
            return None
        return (self.venv.rstrip("/") or "/") + "/bin"

    def tool(self, name: str) -> str:
        bin_dir = self.venv_bin()
        return dir_expr(f"{bin_dir}/{name}") if bin_dir else q(name)

    def chain(self, steps: Iterable[Step], stop_marker: bool = True) -> str:
        """`s1 && { [ -f snapshot.json ] || { s2 && s3; }; }`: after a snapshot stop, the rest is
        skipped and the job still exits 0. Each step first appends its stage line."""
        parts = [self._step(s) for s in steps]
        if not parts:
            raise ValueError("a job needs at least one step")
        if len(parts) == 1:
            return parts[0]
        rest = " && ".join(parts[1:])
        if stop_marker:
            return f"{parts[0]} && {{ [ -f snapshot.json ] || {{ {rest}; }}; }}"
        return f"{parts[0]} && {rest}"

    def _step(self, step: Step) -> str:
        if not step.args:
            raise ValueError("a step needs a command")
        line = (
            "printf '{\"event\":\"stage\",\"name\":\"%s\",\"time\":%s}\\n' "
            f"{q(step.stage)} \"$(date +%s)\" >> \"$OVERBRAINER_METRICS\""
        )
        tool = q(step.args[0]) if step.from_path else self.tool(step.args[0])
        cmd = " ".join([tool] + [q(a) for a in step.args[1:]])
        if step.primary_only:
            return f'{{ [ "${{{NODE_RANK}:-0}}" != 0 ] || {{ {line} && {cmd}; }}; }}'
        return f"{line} && {cmd}"

    def tool_command(self, args: Iterable[str]) -> str:
        """A command that runs `args` where a job's step finds its tool (the venv's bin/ first on
        PATH natively, the image in a container), without a job's set-up: what the check before a
        run sends (`axolotl --version`). No GPU, no mount: it only proves the tool runs."""
        args = list(args)
        if not args:
            raise ValueError("a command needs a tool")
        if self.in_container:
            argv = [self.engine, "run", "--rm", self.image, "sh", "-c", " ".join(q(a) for a in args)]
            return " ".join(q(a) for a in argv)
        cmd = " ".join([self.tool(args[0])] + [q(a) for a in args[1:]])
        bin_dir = self.venv_bin()
        return f"export {_prepend('PATH', dir_expr(bin_dir))} && {cmd}" if bin_dir else cmd

    def job(self, run_id: str, run_dir: str, cache_dir: str, steps: Iterable[Step], *,
            env: dict[str, str] | None = None, secret_names: Iterable[str] = (),
            stop_marker: bool = True, subdir: str | None = None) -> tuple[str, Container | None]:
        """The job script (for JobSpec.script) and its container (None natively).

        subdir: a job that belongs to a run (export, compare) runs in that subdirectory of
        `run_dir` (its JobSpec.dir natively); in a container the whole run directory is mounted
        and the job works in the subdirectory, its metrics.jsonl there too.

        env: extra plain settings (e.g. OVERBRAINER_EXPORT_QUANTIZE); secrets are passed by
        name only (their values come from the job's environment, set by the executor).
        Natively, PYTHONPATH is prepended to the inherited value, and so is the venv's bin/ to
        PATH (Axolotl launches `accelerate` from PATH).
        """
        chain = self.chain(steps, stop_marker)
        settings = {**self.job_env(run_dir, subdir), **(env or {})}
        if not self.in_container:
            settings["HF_HOME"] = cache_dir
            exports = [_prepend(k, q(v)) if k == "PYTHONPATH" else f"{k}={q(v)}" for k, v in settings.items()]
            bin_dir = self.venv_bin()
            if bin_dir:
                exports.append(_prepend("PATH", dir_expr(bin_dir)))
            return f"export {' '.join(exports)} && {chain}", None
        container = Container(self.engine, f"overbrainer-{run_id}")
        podman = self.engine == "podman"
        argv = [self.engine, "run", "--rm", "--name", container.name]
        if self.gpus:
            argv += PODMAN_GPU if podman else DOCKER_GPU
        argv += ["--ipc=host",
                 "-v", f"{run_dir}:{CONTAINER_ROOT}" + (":Z" if podman else ""),
                 "-v", f"{cache_dir}:{CONTAINER_CACHE}" + (":z" if podman else ""),
                 "-w", CONTAINER_ROOT + (f"/{subdir.strip('/')}" if subdir else ""),
                 "-e", f"HF_HOME={CONTAINER_CACHE}"]
        for k, v in settings.items():
            argv += ["-e", f"{k}={v}"]
        for name in secret_names:
            argv += ["-e", name]
        argv += [self.image, "sh", "-c", chain]
        return f"mkdir -p -- {q(cache_dir)} && " + " ".join(q(a) for a in argv), container


def _prepend(name: str, word: str) -> str:
    """`NAME=word` put before the inherited value of NAME (a `:`-separated list), if any."""
    return f'{name}={word}"${{{name}:+:${name}}}"'
