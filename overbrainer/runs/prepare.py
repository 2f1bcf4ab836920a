"""Filling a new run dir (docs/runs.md#run-directory): axolotl.yaml, data copies, the metrics plugin and,
for a resumed run, the stopped run's checkpoint. Also the `--resume-from` checks."""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.dataset.state import decontamination_facts
from overbrainer.errors import OverbrainerError
from overbrainer.exec.runtime import Runtime
from overbrainer.jobs.run_record import STOPPED, RunPlace, RunRecord
from overbrainer.support.atomic import atomic_write_bytes
from overbrainer.support.files import link_or_copy
from overbrainer.train.axolotl_config import (
    DEEPSPEED_FILE,
    build_config,
    deepspeed_config,
    eval_warning,
    has_examples,
    require_examples,
    write_config,
)
from overbrainer.train.job import PLUGIN_NAME, install_plugin
from overbrainer.train.resume import resume_differences

log = logging.getLogger(__name__)

DECONTAMINATION = "decontamination.json"  # in a run's data/: how its examples were decontaminated


@dataclass(frozen=True)
class ResumeSource:
    """A stopped run to resume from: its record, local directory and checkpoint name."""
    record: RunRecord
    run_dir: Path

    @property
    def checkpoint(self) -> str:  # "output/checkpoint-N"
        snapshot = self.record.snapshot
        if snapshot is None:  # resume_source takes only a stopped run with its snapshot
            raise ValueError(f"run {self.record.id} has no snapshot")
        return snapshot.checkpoint

    @property
    def checkpoint_name(self) -> str:  # "checkpoint-N"
        return Path(self.checkpoint).name


def job_root(target: Any, remote_dir: str) -> str:
    """The run directory as the job sees it: the host path natively, /workspace/run in a container."""
    return Runtime.from_target(target).root(remote_dir)


def resume_source(place: RunPlace, training: Any) -> ResumeSource:
    """Check that the run at `place` can be resumed with these settings: stopped, its checkpoint
    here, same config."""
    record = place.load()
    run_id = place.run_id
    what = f"cannot resume from run {run_id}"
    if record.state != STOPPED or record.snapshot is None:
        raise OverbrainerError(f"{what}: it is {record.state}, not stopped with a snapshot "
                               "(see `overbrainer train stop`)")
    run_dir = place.dir
    src = ResumeSource(record, run_dir)
    checkpoint = run_dir / src.checkpoint
    if not checkpoint.is_dir() or not any(p.is_file() for p in checkpoint.rglob("*")):
        raise OverbrainerError(f"{what}: its snapshot is not in runs/{run_id}/{src.checkpoint}; "
                               f"retrieve it with `overbrainer train attach {run_id}`")
    has_eval = has_examples(run_dir / "data" / "eval.jsonl")
    changed = resume_differences(run_dir / "axolotl.yaml", training, has_eval)
    if changed:
        raise OverbrainerError(f"{what}: the training settings differ from the ones it ran with "
                               f"({', '.join(changed)}); set them back to resume, or start a new run")
    return src


def fill_run_dir(run_dir: Path, project_dir: Path, training: Any, root: str,
                 resume: ResumeSource | None = None, check: Callable[[], object] = lambda: None) -> dict[str, Any]:
    """Write axolotl.yaml, data/, plugin/ (and resume/checkpoint-N) into `run_dir`.

    `check()` is called between steps (it raises Interrupted after Ctrl-C). Returns the config.
    """
    data_src = resume.run_dir / "data" if resume else ProjectPaths(project_dir).data
    shown = f"runs/{resume.record.id}/data/train.jsonl" if resume else "data/train.jsonl"
    require_examples(data_src / "train.jsonl", shown)
    data_dir = run_dir / "data"
    data_dir.mkdir(exist_ok=True)
    _copy_file(data_src / "train.jsonl", data_dir / "train.jsonl")
    has_eval = has_examples(data_src / "eval.jsonl")
    if has_eval:
        _copy_file(data_src / "eval.jsonl", data_dir / "eval.jsonl")
    _decontamination(data_src, data_dir, None if resume else ProjectPaths(project_dir))
    check()
    try:
        install_plugin(run_dir)
    except OSError as e:
        raise OverbrainerError(f"cannot write {run_dir / 'plugin' / PLUGIN_NAME}: {e.strerror or e}") from e
    resume_checkpoint = None
    if resume is not None:
        dest = run_dir / "resume" / resume.checkpoint_name
        dest.parent.mkdir(exist_ok=True)
        link_tree(resume.run_dir / resume.checkpoint, dest)
        resume_checkpoint = f"{root.rstrip('/')}/resume/{resume.checkpoint_name}"
        check()
    config = build_config(training, root, has_eval, resume_checkpoint)
    warning = eval_warning(training, has_eval)
    if warning:
        log.warning("%s", warning)
    deepspeed = deepspeed_config(training)
    try:
        if deepspeed is not None:
            atomic_write_bytes(run_dir / DEEPSPEED_FILE, (json.dumps(deepspeed, indent=2) + "\n").encode())
        write_config(run_dir / "axolotl.yaml", config)
    except OSError as e:
        raise OverbrainerError(f"cannot write the Axolotl config in {run_dir}: {e.strerror}") from e
    return config


def _decontamination(data_src: Path, data_dir: Path, project: ProjectPaths | None) -> None:
    """data/decontamination.json: how the split that wrote the copied files decontaminated them
    (dataset/state.decontamination_facts; a resumed run: the stopped run's file), for the model
    card. Best effort: without it the card says nothing about decontamination."""
    try:
        if project is None:
            if (data_src / DECONTAMINATION).is_file():
                shutil.copyfile(data_src / DECONTAMINATION, data_dir / DECONTAMINATION)
            return
        facts = decontamination_facts(project)
        if facts is not None:
            atomic_write_bytes(data_dir / DECONTAMINATION, json.dumps(facts, separators=(",", ":")).encode())
    except OSError as e:
        log.warning("cannot write %s: %s (the model card will not state the decontamination)",
                    data_dir / DECONTAMINATION, e.strerror)


def _copy_file(src: Path, dst: Path) -> None:
    try:
        shutil.copyfile(src, dst)
    except OSError as e:
        raise OverbrainerError(f"cannot copy {src} to {dst}: {e.strerror or e}") from e


def link_tree(src: Path, dst: Path) -> None:
    """Copy a directory of files and dirs only: hard links on the same file system, else copies."""
    try:
        dst.mkdir()
        for dirpath, dirnames, filenames in os.walk(src):
            rel = Path(dirpath).relative_to(src)
            for d in dirnames:
                if not (Path(dirpath) / d).is_symlink():
                    (dst / rel / d).mkdir()
            dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
            for name in filenames:
                s = Path(dirpath) / name
                if s.is_symlink() or not s.is_file():
                    continue
                link_or_copy(s, dst / rel / name)
    except OSError as e:
        raise OverbrainerError(f"cannot copy {src} to {dst}: {e.strerror or e}") from e
