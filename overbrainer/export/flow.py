"""The `export` flow: a run's model to one GGUF file (docs/export.md).

`export_flow(session, run_id, *, quantize=None, ollama=None, target=None, keep=False) ->
dict`: the gate (export.gate) → a side job `export_YYYYMMDD-HHMMSS` in `runs/<run>/exports/`
(jobs.side_job) on `--target`, else `[export] target`, else the run's own target (a runpod
target: a new pod for the export, with `[export] max_hours`) that runs `export.sh` with
`llama_cpp.sh` (export/job.py) → the GGUF brought home verified into `runs/<run>/output/gguf/` →
`export.json`, `Modelfile`, and with a name (`--ollama`, else `[export] ollama_name`) an Ollama
model. Before the job, a read-only probe checks the run's model and axolotl.yaml are on the target;
when not, as little as makes the model is sent. Ctrl-C cancels the export (and ends its pod).
"""

from __future__ import annotations

import logging
from typing import Any

from overbrainer.config.build_train import is_ollama_name
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import UsageError
from overbrainer.export.deliver import ollama_create
from overbrainer.export.gate import base_model, check_run
from overbrainer.export.job import FETCHED, export_part
from overbrainer.front.session import Session
from overbrainer.jobs.run_record import RunPlace
from overbrainer.jobs.side_job import SideJob, run_side_job, side_target
from overbrainer.runpod import side_pods as pod

log = logging.getLogger(__name__)


def export_flow(session: Session, run_id: str, *, quantize: str | None = None, ollama: str | None = None,
                target: str | None = None, keep: bool = False) -> dict:
    config = session.config
    settings = config.export
    quantize = quantize or settings.quantize
    name = ollama or settings.ollama_name
    if name is not None and not is_ollama_name(name):
        raise UsageError(f"--ollama {name}: not a valid Ollama model name ([host/][namespace/]model[:tag])")
    source = check_run(RunPlace(ProjectPaths(session.project_dir).runs, run_id))
    record = source.record
    where, tgt = side_target(config, record, "export", target)
    if keep and tgt.kind != "runpod":
        raise UsageError("--keep-pod only applies to a runpod target")
    part = export_part(config, source, quantize, tgt)
    size = pod.base_model_bytes(config, base_model(source.run_dir)) if pod.needs_floor(tgt) else None
    box: dict[str, Any] = {}
    job = SideJob(
        "export", files=dict(part.files), steps=[part.step], env=dict(part.env), fetch=list(FETCHED),
        secrets=part.secrets, prepare=part.upload_if_gone,
        after=lambda executor, remote_job_dir, job_dir: box.update(sha256=part.fetch_gguf(executor, remote_job_dir)),
        label=f"export of run {run_id}", pod=pod.settings(tgt, settings.max_hours, model_bytes=size))
    log.info("export: runs/%s/%s to GGUF %s on target `%s`", run_id, source.model, quantize, where)
    result = run_side_job(session, record, job, target=where, keep=keep)
    doc = part.deliver(result.job_dir, box["sha256"], result.record.created)
    shown_dir = f"runs/{run_id}/output/gguf"
    lines = [f"export: {result.job_id}: runs/{run_id}/{source.model} to GGUF {quantize} on target `{where}`",
             f"export: GGUF in {shown_dir}/{part.gguf_name} ({part.size_line()}), Modelfile beside it"]
    created = None
    if name is not None:
        created = ollama_create(name, (source.run_dir / part.gguf_rel).parent, shown_dir)
        if created:
            lines.append(created)
    else:
        suggested = run_id.lower()
        lines.append(f"export: run it with Ollama after `cd {shown_dir} && ollama create {suggested} -f Modelfile`")
    data = {"run_id": run_id, "export": result.job_id, "target": where, "model": source.model,
            "gguf": f"runs/{run_id}/{part.gguf_rel}", "modelfile": f"{shown_dir}/Modelfile",
            "ollama": name if created else None, **doc}
    session.front.report("\n".join(lines), data)
    return data
