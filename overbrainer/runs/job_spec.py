"""The command of a training job (docs/runs.md#job-control-on-the-target): `axolotl train`, then
`axolotl merge-lora` with `merge = true`, then the steps that plug into the training (`[export]
after_training`'s export), built for the target's runtime.

On a cluster (a runpod target with `nodes` >= 2) the same job runs on every node: the training is
one `torchrun` per node (`--nnodes N --nproc_per_node <gpu_count> --rdzv_backend static -m
axolotl.cli.train axolotl.yaml`), each node's rank and the primary's rendezvous address given by
its own environment (torchrun's PET_NODE_RANK and PET_RDZV_ENDPOINT, set by the cluster's
executor), and every later step runs on the primary only, where rank 0 wrote the model."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from overbrainer.config.model import RunpodTarget, Target
from overbrainer.exec.base import JobSpec
from overbrainer.exec.runtime import Runtime, Step
from overbrainer.jobs.run_record import RunRecord
from overbrainer.train.job import CONFIG_NAME, wants_merge


def job_spec(target: Any, record: RunRecord, training: Any, workdir: str, secrets: dict[str, str],
             after: Sequence[tuple[Any, dict[str, str]]] = ()) -> JobSpec:
    """The JobSpec of a training job: `axolotl train` (then `merge-lora` with merge = true, then
    each post-train step of `after` with its environment: the in-job export), built for the
    target's runtime; secrets travel by name only."""
    runtime = Runtime.from_target(target)
    nodes = target.nodes if isinstance(target, RunpodTarget) else 1
    steps = [train_step(target)]
    if wants_merge(training):
        steps.append(Step("merge", ("axolotl", "merge-lora", CONFIG_NAME)))
    env: dict[str, str] = {}
    for step, step_env in after:
        steps.append(step)
        env.update(step_env)
    if nodes > 1:
        steps = steps[:1] + [replace(s, primary_only=True) for s in steps[1:]]
    cache = f"{workdir.rstrip('/')}/.hf-cache"
    script, container = runtime.job(record.id, record.remote_dir, cache, steps, env=env,
                                    secret_names=sorted(secrets))
    return JobSpec(dir=record.remote_dir, script=script, secrets=dict(secrets), container=container)


def train_step(target: Target) -> Step:
    """`axolotl train axolotl.yaml` (with the launcher of several GPUs), or a cluster's torchrun."""
    if isinstance(target, RunpodTarget) and target.cluster:
        return Step("train", ("torchrun", "--nnodes", str(target.nodes), "--nproc_per_node", str(target.gpu_count),
                              "--rdzv_backend", "static", "-m", "axolotl.cli.train", CONFIG_NAME))
    return Step("train", ("axolotl", "train", CONFIG_NAME, *launcher_args(target)))


def launcher_args(target: Target) -> tuple[str, ...]:
    """More than one GPU (`gpu_count` > 1, a Runpod pod): Axolotl's own launcher starts one
    training process per GPU (`--launcher accelerate -- --num_processes=N`); DeepSpeed or FSDP
    come from the Axolotl config (`axolotl_extra`). One GPU: Axolotl's default, no arguments."""
    count = target.gpu_count if isinstance(target, RunpodTarget) else 1  # local, ssh: one GPU as seen
    if count <= 1:
        return ()
    return ("--launcher", "accelerate", "--", f"--num_processes={int(count)}")
