"""`[export] after_training = true`: the export runs inside the training job, after the merge
(docs/export.md#inside-the-training-job). `InJobExport` is how it plugs into the training flows
(runs/post_train.py): its `prepare`, `fetch` and `deliver`.

`step(run_dir, run_id, target, quantize, workdir)` writes `export.sh` and `llama_cpp.sh` into the
run directory and returns the job's extra Step and its environment: the step comes last, so a
snapshot stop skips it (the job's stop marker), and its failure never fails the training run
(`export.sh || :`: the run succeeds, with a warning). The GGUF comes home in `output/gguf/` with
the run's retrieval; `deliver(run_dir, run_id)` then writes `export.json` (in the run directory)
and the `Modelfile`, and returns the `train:` lines to report.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from overbrainer.config.model import Config
from overbrainer.exec.runtime import CONTAINER_CACHE, Runtime, Step
from overbrainer.exec.transfer import sha256_file
from overbrainer.export import llama_cpp
from overbrainer.export.deliver import VERSION_FILE, read_version, write_export_json, write_modelfile
from overbrainer.export.gate import CONFIG_NAME, sequence_len
from overbrainer.support import fmt

log = logging.getLogger(__name__)

SCRIPT = "export.sh"
MARK = "export.quantize"  # the type asked for, beside the scripts in the run directory


class InJobExport:
    """`[export] after_training` as a step of the training job (runs/post_train.PostTrain)."""

    fetch: tuple[str, ...] = (VERSION_FILE,)

    def prepare(self, config: Config, run_dir: Path, run_id: str, target: Any, workdir: str) -> tuple[Any, dict] | None:
        settings = config.export
        if not settings.after_training:
            return None
        return step(run_dir, run_id, target, settings.quantize, workdir)

    def deliver(self, run_dir: Path, run_id: str) -> list[str]:
        return deliver(run_dir, run_id)


def step(run_dir: Path, run_id: str, target: Any, quantize: str, workdir: str) -> tuple[Any, dict[str, str]]:
    (run_dir / SCRIPT).write_text(llama_cpp.script(SCRIPT), encoding="utf-8")
    (run_dir / llama_cpp.SCRIPT).write_text(llama_cpp.script(llama_cpp.SCRIPT), encoding="utf-8")
    (run_dir / MARK).write_text(quantize + "\n", encoding="utf-8")
    env = {"OVERBRAINER_EXPORT_NAME": run_id, "OVERBRAINER_EXPORT_QUANTIZE": quantize,
           "OVERBRAINER_EXPORT_MODEL": "output", "OVERBRAINER_EXPORT_CONFIG": CONFIG_NAME,
           "OVERBRAINER_EXPORT_OUT": "output/gguf",
           # in a container, the training job's mounted cache (the host's workdir is not there)
           "OVERBRAINER_CACHE": CONTAINER_CACHE if Runtime.from_target(target).in_container
           else f"{workdir.rstrip('/')}/.cache",
           **llama_cpp.job_env(target)}
    return Step("export", ("sh", "-c", f"sh {SCRIPT} || :"), from_path=True), env


def deliver(run_dir: Path, run_id: str) -> list[str]:
    """After a succeeded run's retrieval: its in-job export's files and lines (none when the run
    had no in-job export)."""
    mark = run_dir / MARK
    if not mark.is_file():
        return []
    quantize = mark.read_text(encoding="utf-8").strip()
    gguf = run_dir / "output" / "gguf" / f"{run_id}-{quantize}.gguf"
    if not gguf.is_file():
        log.warning("train: the export in the job made no GGUF: see runs/%s/job.log, or run "
                    "`overbrainer export %s`", run_id, run_id)
        return []
    version = read_version(run_dir)
    size = gguf.stat().st_size
    created = fmt.stamp(gguf.stat().st_mtime)
    write_export_json(run_dir, quantize=quantize, llama_cpp=version, file=f"output/gguf/{gguf.name}",
                      sha256=sha256_file(gguf), size=size, created=created)
    write_modelfile(gguf, sequence_len(run_dir))
    return [f"train: GGUF in runs/{run_id}/output/gguf/{gguf.name} ({quantize}, {fmt.size(size)}), "
            "Modelfile beside it"]
