"""The `export` flow: a run's model to one GGUF file, on the run's own target (docs/export.md).

`export_flow(session, config, run_id, *, quantize=None, ollama=None) -> dict`: the gate
(export.gate) → a side job `export_YYYYMMDD-HHMMSS` in `runs/<run>/exports/` (jobs.side_job) that
runs `export.sh` with `llama_cpp.sh` → the GGUF brought home verified into `runs/<run>/output/gguf/`
→ `export.json`, `Modelfile`, and with a name (`--ollama`, else `[export] ollama_name`) an Ollama
model. Before the job, a read-only probe checks the run's model and axolotl.yaml are still on the
target; when not, they are uploaded again (`Executor.upload(entries=…)`). Ctrl-C cancels the
export.
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

from overbrainer.config.build_train import is_ollama_name
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError, UsageError
from overbrainer.exec.runtime import Step
from overbrainer.export import llama_cpp
from overbrainer.export.deliver import VERSION_FILE, ollama_create, read_version, write_export_json, write_modelfile
from overbrainer.export.gate import CONFIG_NAME, Source, check_run, sequence_len
from overbrainer.jobs.side_job import SideJob, run_side_job, side_target
from overbrainer.support import fmt

log = logging.getLogger(__name__)

def export_flow(session, config, run_id: str, *, quantize: str | None = None, ollama: str | None = None) -> dict:
    settings = config.export
    quantize = quantize or settings.quantize
    name = ollama or settings.ollama_name
    if name is not None and not is_ollama_name(name):
        raise UsageError(f"--ollama {name}: not a valid Ollama model name ([host/][namespace/]model[:tag])")
    runs_dir = ProjectPaths(session.project_dir).runs
    source = check_run(runs_dir, run_id)
    record = source.record
    target = side_target(config, record, "export")
    gguf_name = f"{run_id}-{quantize}.gguf"
    gguf_rel = f"output/gguf/{gguf_name}"
    box: dict[str, Any] = {}
    job = SideJob(
        "export",
        files={"export.sh": llama_cpp.script("export.sh"), llama_cpp.SCRIPT: llama_cpp.script(llama_cpp.SCRIPT)},
        steps=[Step("export", ("sh", "export.sh"), from_path=True)],
        env={"OVERBRAINER_EXPORT_NAME": run_id, "OVERBRAINER_EXPORT_QUANTIZE": quantize,
             "OVERBRAINER_EXPORT_MODEL": f"../../{source.model}", "OVERBRAINER_EXPORT_CONFIG": f"../../{CONFIG_NAME}",
             **llama_cpp.job_env(target)},
        fetch=[VERSION_FILE],
        prepare=lambda executor, remote_job_dir: _upload_if_gone(executor, source, remote_job_dir),
        after=lambda executor, remote_job_dir, job_dir: box.update(
            manifest=executor.fetch(record.remote_dir, str(source.run_dir), [gguf_rel])),
        label=f"export of run {run_id}",
    )
    log.info("export: runs/%s/%s to GGUF %s on target `%s`", run_id, source.model, quantize, record.target)
    result = run_side_job(session, config, record, job)
    lines = [f"export: {result.job_id}: runs/{run_id}/{source.model} to GGUF {quantize} on target `{record.target}`"]
    gguf = source.run_dir / gguf_rel
    sha256 = dict(box["manifest"])[gguf_rel]
    size = gguf.stat().st_size
    version = read_version(result.job_dir)
    doc = write_export_json(result.job_dir, quantize=quantize, llama_cpp=version, file=gguf_rel, sha256=sha256,
                            size=size, created=result.record.created)
    write_modelfile(gguf, sequence_len(source.run_dir))
    shown_dir = f"runs/{run_id}/output/gguf"
    lines.append(f"export: GGUF in {shown_dir}/{gguf_name} ({quantize}, {fmt.size(size)}), Modelfile beside it")
    created = None
    if name is not None:
        created = ollama_create(name, gguf.parent, shown_dir)
        if created:
            lines.append(created)
    else:
        suggested = run_id.lower()
        lines.append(f"export: run it with Ollama after `cd {shown_dir} && ollama create {suggested} -f Modelfile`")
    data = {"run_id": run_id, "export": result.job_id, "target": record.target, "model": source.model,
            "gguf": f"runs/{run_id}/{gguf_rel}", "modelfile": f"{shown_dir}/Modelfile",
            "ollama": name if created else None, **doc}
    session.front.report("\n".join(lines), data)
    return data


def _upload_if_gone(executor, source: Source, remote_job_dir: str) -> None:
    """Upload the run's model (without its checkpoints or earlier GGUFs) and axolotl.yaml when a
    read-only probe finds them gone from the target."""
    remote_run = str(PurePosixPath(remote_job_dir).parent.parent)
    q = shlex.quote
    model = f"{q(remote_run)}/{q(source.model)}"
    probe = (f"if [ -f {q(remote_run)}/{CONFIG_NAME} ] && {{ [ -f {model}/config.json ] || "
             f"[ -f {model}/adapter_config.json ] || [ -f {model}/merged/config.json ]; }}; "
             "then echo present; else echo missing; fi")
    if executor.probe(probe, timeout=60).strip() == "present":
        return
    log.info("export: the model of run %s is no longer on the target: uploading it", source.record.id)
    executor.upload(entries=[*_model_entries(source.run_dir / source.model, f"{remote_run}/{source.model}"),
                             (source.run_dir / CONFIG_NAME, f"{remote_run}/{CONFIG_NAME}")])


def _model_entries(src: Path, remote: str) -> list[tuple[Path, str]]:
    """A model folder's entries to send: all but its checkpoints and earlier GGUFs."""
    entries = [(path, f"{remote}/{path.name}") for path in sorted(src.iterdir())
               if not path.name.startswith("checkpoint-") and path.name != "gguf"] if src.is_dir() else []
    if not any(_holds_a_file(path) for path, _ in entries):
        raise OverbrainerError(f"{src} holds no file to upload")
    return entries


def _holds_a_file(path: Path) -> bool:
    return path.is_file() or any(p.is_file() for p in path.rglob("*"))
