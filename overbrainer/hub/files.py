"""What a push sends: the gate on the run, and the files of its `output/` with their repo paths.

* the run must be shippable (runs/retrieve.shippable: ended `succeeded`, or `stopped` with a
  warning: its model is partial; its results home);
* `output/` is walked, skipping hidden entries, symlinks, `checkpoint-*` and `debug.log` at the
  root, and anything that would land on the root `README.md` (that is the model card's place);
* the adapter (or full model) at the root of `output/` keeps its place, `merged/**` keeps its
  prefix, `gguf/**` is flattened to the repo root (`*.gguf`, `Modelfile`);
* two files on one repo path is an error.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from overbrainer.errors import OverbrainerError
from overbrainer.jobs.run_record import STOPPED, RunPlace
from overbrainer.runs.retrieve import shippable

log = logging.getLogger(__name__)

CARD_PATH = "README.md"
MODEL_MARKERS = ("adapter_config.json", "config.json", "adapter_model.safetensors", "adapter_model.bin")


@dataclass(frozen=True)
class Upload:
    path: str  # in the repo, with `/`
    local: Path
    size: int


def check_run(place: RunPlace) -> Path:
    """The run's `output/` folder once the run may be pushed; OverbrainerError saying why not."""
    record = shippable(place, "pushed")
    run_id, output = place.run_id, place.dir / "output"
    if not output.is_dir():
        raise OverbrainerError(f"run {run_id} has no output/ folder: nothing to push")
    names = {p.name for p in output.iterdir()}
    has_model = any(n in names for n in MODEL_MARKERS) or "merged" in names or "gguf" in names
    if not has_model and any(n.startswith("checkpoint-") for n in names):
        raise OverbrainerError(f"run {run_id} holds only checkpoints: export or resume it first")
    if record.state == STOPPED:
        log.warning("push: run %s was stopped: its model is partial", run_id)
    return output


def _repo_path(rel: str) -> str | None:
    """Where a file of output/ (relative, with `/`) lands in the repo; None to skip it."""
    parts = rel.split("/")
    if any(p.startswith(".") for p in parts):
        return None
    top = parts[0]
    if len(parts) > 1 and top.startswith("checkpoint-"):
        return None
    if len(parts) == 1 and top == "debug.log":
        return None
    if top == "gguf":
        return parts[-1] if len(parts) > 1 else None
    return rel


def collect(output: Path) -> list[Upload]:
    """Every file to push, sorted by repo path. OverbrainerError on two files for one path or on
    nothing to push."""
    found: dict[str, Upload] = {}
    for root, dirs, files in os.walk(output, followlinks=False):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink())
        for name in sorted(files):
            local = here / name
            if local.is_symlink() or not local.is_file():
                continue
            rel = local.relative_to(output).as_posix()
            path = _repo_path(rel)
            if path is None or path == CARD_PATH:
                continue
            if path in found:
                other = found[path].local.relative_to(output).as_posix()
                raise OverbrainerError(f"output/{rel} and output/{other} "
                                       f"would both be pushed as {path}: remove one")
            found[path] = Upload(path, local, local.stat().st_size)
    if not found:
        raise OverbrainerError(f"{output} holds nothing to push")
    return [found[p] for p in sorted(found)]

