"""`config check --probe`, the training targets (when `[training]` is set): each target is reached
and shown able to train (docs/stages.md#probe).

- `local`, `ssh`: connected (SSH: host key checked), then `axolotl --version` runs where the job
  would run it (runs/preflight.py: the venv's bin/, or the image).
- `runpod`: the API key reads Runpod's GPU catalog (no pod is created), and the GPU types asked
  for are in it (offered on Secure Cloud with `gpu_count` GPUs a pod); `"auto"` must find a type
  that fits the target's limits and is in stock now. The pod's own Axolotl is checked when a run
  starts, once the pod is up.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from overbrainer.errors import OverbrainerError, PersonMustAct
from overbrainer.jobs.targets import open_executor
from overbrainer.runpod import catalog
from overbrainer.runpod.api import RunpodClient
from overbrainer.runs.preflight import check_axolotl


@dataclass
class TargetProbe:
    target: str
    kind: str
    ok: bool
    detail: str
    act: bool = False  # failed with a refusal only a person can fix (errors.PersonMustAct)

    def line(self) -> str:
        return f"probe target {self.target} ({self.kind}) {'ok' if self.ok else 'FAILED'}: {self.detail}"

    def to_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind, "ok": self.ok, "detail": self.detail}


def probe_targets(config) -> list[TargetProbe]:
    """One TargetProbe per configured target, by name; none without `[training]`."""
    if config.training is None:
        return []
    return [_probe(config, name, target) for name, target in sorted(config.targets.items())]


def _probe(config, name: str, target) -> TargetProbe:
    kind = target.kind
    try:
        detail = _runpod(config, target) if kind == "runpod" else _runs_axolotl(config, name, target)
    except OverbrainerError as e:
        return TargetProbe(name, kind, False, str(e).removeprefix(f"target `{name}`: "), isinstance(e, PersonMustAct))
    return TargetProbe(name, kind, True, detail)


def _runs_axolotl(config, name: str, target) -> str:
    with tempfile.TemporaryDirectory(prefix="overbrainer-probe-") as scratch:  # a local executor makes its
        executor = open_executor(config, name, target, Path(scratch))        # folder: not runs/ (read-only)
        try:
            return f"reached; {check_axolotl(executor, name, target)}"
        finally:
            executor.close()


def _runpod(config, target) -> str:
    with RunpodClient.from_config(config, attempts=1) as client:
        types = client.gpu_types(target.gpu_count)
    wanted = catalog.Wanted.of(target)
    if wanted.gpu_types == catalog.AUTO:
        picked = catalog.pick(wanted, types)  # NotInStock says why nothing fits
        return f"the API key reads the GPU catalog; gpu_types = \"auto\" would try {_names(c.gpu_type for c in picked)}"
    by_id = {g.id: g for g in types}
    problems = []
    for name in wanted.gpu_types:
        gpu = by_id.get(name)
        if gpu is None:
            problems.append(f"`{name}` is not in Runpod's GPU catalog")
        elif not gpu.secure or gpu.price_per_hour is None:
            problems.append(f"`{name}` is not offered on Secure Cloud")
        elif gpu.max_count < wanted.gpu_count:
            problems.append(f"`{name}` comes with at most {gpu.max_count} GPUs a pod "
                            f"(gpu_count = {wanted.gpu_count})")
    if problems:
        raise OverbrainerError("; ".join(problems) + ": `overbrainer pod gpus` lists the GPU types")
    stocked = [n for n in wanted.gpu_types if by_id[n].in_stock]
    stock = f"in stock now: {_names(stocked)}" if stocked else "none of them is in stock right now"
    return f"the API key reads the GPU catalog; every GPU type asked for is offered ({stock})"


def _names(names) -> str:
    names = list(names)
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "") if names else "none"
