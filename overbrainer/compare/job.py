"""The job of a new compare: the child served by llama-server on a target (compare/serve.py),
asked every question of the plan, its answers brought home.

- Where: `--target`, else `[compare] target`, else the run's own target (any kind), through
  jobs.side_job (job.log, metrics.jsonl, follow, verified fetch, Ctrl-C cancels): in
  `<root>/compares/<id>/` there (`<root>`: the run's directory on that target, see jobs.side_job)
  and `runs/<run>/compares/<id>/` here. A runpod target gets a new pod (serve.pod_settings).
- The GGUF: sent to `<root>` when it is not there with its SHA-256 (serve.ensure_gguf).
- No GGUF yet (`export`, an export.job.ExportPart): the export's files, step, environment and
  secrets join the job and its step runs first; after the job the GGUF comes home verified,
  `export.json` is written in the compare's directory, setup.json gets its SHA-256 and llama.cpp
  version, and on a pod the GGUF is removed there.
- The job's files: the serving job's (serve.job_files: `compare.sh`, `compare_client.py`,
  `llama_cpp.sh`) and `questions.jsonl` (`{id, messages}` per question); `setup.json` is written
  into the job's directory here before it starts.
- Brought back: `child_answers.jsonl` (required), `server.log`, `hardware.json`, plus the runner's
  `job.log` and `metrics.jsonl`.
"""

from __future__ import annotations

import json
import logging
import shlex
from pathlib import Path, PurePosixPath

from overbrainer.compare import plan as planning
from overbrainer.compare import serve
from overbrainer.compare.answers import ANSWERS
from overbrainer.exec.runtime import Step
from overbrainer.export.job import FETCHED as EXPORT_FETCHED
from overbrainer.export.job import run_root
from overbrainer.front.session import Session
from overbrainer.jobs.lease import is_pod
from overbrainer.jobs.run_record import RunPlace
from overbrainer.jobs.side_job import SideJob, side_target
from overbrainer.support import fmt

log = logging.getLogger(__name__)

QUESTIONS = "questions.jsonl"
FETCHED = [ANSWERS, serve.SERVER_LOG, serve.HARDWARE]


def questions_jsonl(questions: list[dict]) -> str:
    return "".join(json.dumps({"id": q["id"], "messages": q["messages"]}, ensure_ascii=False) + "\n"
                   for q in questions)


def run_compare_job(session: Session, gguf: planning.Gguf, setup: dict, *, target: str | None = None,
                    keep: bool = False, export=None) -> tuple[Path, dict]:
    """Run the job for a plan (`setup` without its `compare` ID yet); returns the compare's
    directory here and its setup (ID set, written as setup.json). `export` (export.job.ExportPart):
    the run has no GGUF yet: the job exports it first, and the GGUF comes home with the answers."""
    project, config = Path(session.project_dir), session.config
    place = RunPlace(planning.runs_dir(project), gguf.run)
    run = place.load()
    name, where = side_target(config, run, "compare", target)
    on_pod = is_pod(where)
    run_dir = place.dir
    claimed: dict[str, str] = {}

    def prepare(executor, remote_job_dir: str) -> None:
        compare_id = PurePosixPath(remote_job_dir).name
        claimed["id"] = compare_id
        setup["compare"] = compare_id
        planning.write_setup(run_dir / planning.COMPARES / compare_id, setup)
        if export is not None:
            export.upload_if_gone(executor, remote_job_dir)
        elif serve.ensure_gguf(executor, run_root(remote_job_dir), run_dir, gguf):
            log.info("compare: sent %s (%s) to the target", gguf.file, fmt.size((run_dir / gguf.file).stat().st_size))

    def after(executor, remote_job_dir: str, job_dir: Path) -> None:
        sha256 = export.fetch_gguf(executor, remote_job_dir)
        doc = export.deliver(job_dir, sha256, fmt.stamp())
        setup.update(gguf_sha256=sha256, llama_cpp=doc.get("llama_cpp"))
        planning.write_setup(job_dir, setup)
        log.info("compare: the GGUF %s (%s) is home, verified", export.gguf_rel, export.size_line())
        if on_pod:
            executor.probe(f"rm -f {shlex.quote(str(PurePosixPath(run_root(remote_job_dir), gguf.file)))}")

    job = compare_side_job(config, where, run.id, gguf, setup, export, on_pod)
    job.prepare = prepare
    job.after = after if export is not None else None
    job.pod = serve.pod_settings(config, where, gguf, run_dir, export) if on_pod else {}
    result = serve.run_explained(session, run, job, name, keep, claimed, ANSWERS)
    return result.job_dir, setup


def compare_side_job(config, where, run_id: str, gguf: planning.Gguf, setup: dict, export, on_pod: bool):
    """The compare's SideJob without its callbacks and pod settings: the scripts, the questions,
    the steps (an export's first), the environment, what is fetched, the secrets."""
    files = serve.job_files()
    files[QUESTIONS] = questions_jsonl(setup["questions"])
    steps = [Step("compare", ("sh", serve.SCRIPT), from_path=True)]
    env = serve.job_env(config, where, gguf, setup.get("context") or 0, drop=on_pod and export is None)
    fetch, secrets = list(FETCHED), {}
    if export is not None:
        files.update(export.files)
        steps.insert(0, export.step)
        env.update(export.env)
        fetch += [f for f in export_fetched() if f not in fetch]
        secrets = dict(export.secrets)
    return SideJob("compare", files=files, steps=steps, env=env, fetch=fetch, secrets=secrets,
                   label=f"compare of run {run_id}")


def export_fetched() -> list[str]:
    return list(EXPORT_FETCHED)
