"""The training part of `run --plan`: what the target's rent may come to, read without renting.

- `local` and `ssh` targets are your own machines: no rent.
- A `runpod` target: the upper bound is the dearest GPU type the pod may land on (its list price
  from Runpod's GPU catalog × `gpu_count`, × `nodes` for a cluster) × `max_hours`, never more than the target's
  `max_cost_usd` (the pod deletes itself there). Reading the catalog is not renting anything.
  The expected cost is the last succeeded run on the same target that says what its pod cost,
  scaled by the dataset's size (data/train.jsonl now against the copy in that run's folder);
  without such a run there is no expectation, only the bound.
- No training at all when `run` would not train (runs/fingerprint.py): the LLM stages have nothing
  to send (so the split will not change) and a run already trained on data/train.jsonl,
  data/eval.jsonl and these `[training]` settings (`up to date with run <id>`), or failed on them
  (`run` would stop and say how to retry). `run --plan --retrain` plans the training regardless.
- What `run` does after the training (`after_plans`): `[export] after_training` exports inside
  the training job (on its pod, within its `max_hours`: no pod of its own, no rent of its own);
  `[hub] after_training` pushes from here (no job). A separate `export` or `compare` of a
  Runpod-trained run rents a pod of its own: `side_bound` gives its upper bound (the line said
  before its create).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer.config.model import Config, RunpodTarget, Training
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError
from overbrainer.runpod import catalog
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.pod_record import PodRecord
from overbrainer.runs.fingerprint import fingerprint, verdict

log = logging.getLogger(__name__)

BYTES_PER_TOKEN = 4


@dataclass
class TrainPlan:
    target: str
    kind: str
    tokens: int | None = None  # data/train.jsonl's size in tokens (4 bytes a token), None: not split yet
    rate: float | None = None  # USD/h of the pod at most (runpod)
    gpu: str | None = None
    max_hours: float | None = None
    cost: float | None = None  # expected
    cost_max: float | None = None
    basis: str = ""  # what the figures rest on, or why one is unknown
    skip: str | None = None  # why `run` would not train (then nothing is rented)
    run_id: str | None = None  # the run that makes training needless, or that failed on this data

    def line(self) -> str:
        if self.skip is not None:
            return self.skip
        data = "the dataset is not split yet" if self.tokens is None else f"about {self.tokens} tokens to train on"
        head = f"train: target {self.target} ({self.kind}); {data}"
        if self.kind != "runpod":
            return f"{head}; no rent (your own machine)"
        pod = (f"{self.gpu} at ${self.rate:.2f}/h" if self.rate is not None else "pod price unknown")
        bound = f"at most ${self.cost_max:.2f}" if self.cost_max is not None else "no upper bound known"
        expected = f"expected ${self.cost:.2f}" if self.cost is not None else "no expected cost"
        return f"{head}; {pod}; {expected}; {bound} ({self.basis})"

    def data(self) -> dict[str, Any]:
        return {"stage": "train", "requests": 0, "target": self.target, "kind": self.kind, "tokens": self.tokens,
                "gpu": self.gpu, "rate_per_hour": self.rate, "max_hours": self.max_hours,
                "cost_usd": None if self.cost is None else round(self.cost, 4),
                "cost_max_usd": None if self.cost_max is None else round(self.cost_max, 4), "basis": self.basis,
                "trains": self.skip is None, "run_id": self.run_id}


def train_plan(project_dir: Path, config: Config, *, retrain: bool = False, data_changes: bool = False) -> TrainPlan:
    """The training part of `run --plan`. `data_changes`: the LLM stages would send requests, so
    the split (and what training would get) changes."""
    training = config.training
    if training is None:  # `run --plan` plans training only with [training]
        raise ValueError("no [training] to plan")
    name = training.target
    target = config.target(name)
    train = ProjectPaths(project_dir).train
    size = train.stat().st_size if train.is_file() else None
    plan = TrainPlan(name, target.kind, tokens=None if size is None else -(-size // BYTES_PER_TOKEN))
    if size and not (retrain or data_changes) and _skipped(plan, Path(project_dir), training):
        return plan
    if target.kind != "runpod" or not isinstance(target, RunpodTarget):
        plan.cost = plan.cost_max = 0.0
        plan.basis = "no rent"
        return plan
    plan.max_hours = target.max_hours
    plan.gpu, plan.rate, why = dearest_pod(config, target)
    notes = []
    if plan.rate is not None:
        plan.cost_max = plan.rate * target.max_hours
        notes.append(f"${plan.rate:.2f}/h × max_hours {target.max_hours:g}")
    if why:
        notes.append(why)
    if target.max_cost_usd is not None and (plan.cost_max is None or target.max_cost_usd < plan.cost_max):
        plan.cost_max = target.max_cost_usd
        notes.append(f"the pod's max_cost_usd ${target.max_cost_usd:.2f}")
    past = _past_run(ProjectPaths(project_dir).runs, name, size)
    if past is not None:
        plan.cost = min(past[1], plan.cost_max) if plan.cost_max is not None else past[1]
        notes.append(f"expected from run {past[0]}, scaled to the dataset's size")
    else:
        notes.append("no earlier run on this target to learn the time from")
    plan.basis = "; ".join(notes)
    return plan


def _skipped(plan: TrainPlan, project_dir: Path, training: Training) -> bool:
    """Whether `run` would not train on the data as it is (its reason set on `plan`)."""
    found = verdict(ProjectPaths(project_dir).runs, fingerprint(ProjectPaths(project_dir).data, training))
    if found.trains:
        return False
    plan.cost = plan.cost_max = 0.0
    plan.run_id = found.by.id
    plan.basis = "no training"
    if found.kind == "failed":
        plan.skip = f"train: `run` would stop without training: {found.refusal()}"
    else:
        plan.skip = found.line() + ": `run` would not train (nothing rented; `--retrain` trains anyway)"
    return True


def dearest_pod(config: Config, target: RunpodTarget) -> tuple[str | None, float | None, str | None]:
    """(GPU type, USD/h of the pod, None) for the dearest type the pod may land on, or
    (None, None, why) when the catalog cannot say."""
    nodes = target.nodes  # an Instant Cluster: that many pods, each of gpu_count GPUs
    try:
        with RunpodClient.from_config(config) as client:
            types = client.gpu_types(target.gpu_count, cluster=nodes > 1)
        candidates = catalog.pick(catalog.Wanted.of(target), types)
    except OverbrainerError as e:
        return None, None, f"cannot read Runpod's GPU catalog: {e}"
    priced = [c for c in candidates if c.price_per_gpu is not None]
    if not priced:
        return None, None, "Runpod's GPU catalog lists no price for these GPU types"
    dearest = max(priced, key=lambda c: c.price_per_gpu or 0.0)  # all priced
    why = None if len(priced) == len(candidates) else "some GPU types have no list price"
    label = f"{dearest.gpu_type} × {target.gpu_count}" + (f" × {nodes} pods" if nodes > 1 else "")
    return label, (dearest.price_per_gpu or 0.0) * target.gpu_count * nodes, why


def _past_run(runs_dir: Path, target: str, size: int | None) -> tuple[str, float] | None:
    """(run ID, its pod's cost scaled to `size` bytes of train.jsonl) of the newest succeeded run
    on `target` whose pod cost and dataset are known; None without one."""
    if not size or not runs_dir.is_dir():
        return None
    for run_dir in sorted(runs_dir.iterdir(), reverse=True):
        try:
            record = json.loads((run_dir / "run.json").read_text())
            if record.get("state") != "succeeded" or record.get("target") != target:
                continue
            pod = PodRecord.load_if_any(run_dir / "pod.json")
            then = (run_dir / "data" / "train.jsonl").stat().st_size
        except (OSError, ValueError, OverbrainerError):
            continue
        spend = pod.spend_so_far() if pod is not None else None
        if spend is not None and then > 0:
            return run_dir.name, spend * size / then
    return None


def after_plans(config: Config) -> list[tuple[str, dict[str, Any]]]:
    """The lines of `run --plan` for what `run` does after the training (see the module docstring)."""
    out = []
    export = config.export
    if export.after_training:
        out.append((f"export: inside the training job ({export.quantize}), on its target and within its "
                    "max_hours; no pod of its own",
                    {"stage": "export", "requests": 0, "cost_usd": 0, "cost_max_usd": 0,
                     "basis": "inside the training job"}))
    if config.hub.after_training:
        out.append(("push: from this machine to the Hugging Face Hub; no job, no rent",
                    {"stage": "push", "requests": 0, "cost_usd": 0, "cost_max_usd": 0, "basis": "no job"}))
    return out
