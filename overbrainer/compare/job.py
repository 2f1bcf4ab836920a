"""The job of a new compare: the child served by llama-server on the run's own target, asked every
question of the plan, its answers brought home.

- Where: the run's target (local or SSH; a runpod target is a ConfigError for now), in
  `<run remote_dir>/compares/<id>/` there and `runs/<run>/compares/<id>/` here, through
  jobs.side_job (job.log, metrics.jsonl, follow, verified fetch, Ctrl-C cancels).
- The GGUF: the run's directory on the target must hold the file `export.json` names, with its
  SHA-256; when it does not, that one file is sent there (`Executor.upload(entries=…)`). A GGUF
  already there stays. The job reads it as
  `../../<file>` (relative to the job directory, so a container's mount sees it too).
- The job's files: `compare.sh`, `compare_client.py` (package data, compare/scripts/), the shared
  `llama_cpp.sh` (export/scripts/: llama-server from the target's `llama_cpp_dir`, else the pinned
  llama.cpp built once on the target) and `questions.jsonl` (`{id, messages}` per question);
  `setup.json` is written into the job's directory here before it starts.
- Brought back: `child_answers.jsonl` (required), `server.log`, `hardware.json`, plus the runner's
  `job.log` and `metrics.jsonl`.
"""

from __future__ import annotations

import json
import logging
from importlib import resources
from pathlib import Path, PurePosixPath

from overbrainer.compare import plan as planning
from overbrainer.compare.answers import ANSWERS
from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.exec.runtime import Step
from overbrainer.exec.transfer import sha256_file
from overbrainer.export import llama_cpp
from overbrainer.jobs import run_record as records
from overbrainer.jobs.side_job import SideJob, SideJobFailed, run_side_job, side_target

log = logging.getLogger(__name__)

SCRIPTS = ("compare.sh", "compare_client.py")
QUESTIONS = "questions.jsonl"
SERVER_LOG = "server.log"
FETCHED = [ANSWERS, SERVER_LOG, "hardware.json"]


def script_text(name: str) -> str:
    """The text of one of the job's files, shipped in overbrainer/compare/scripts/."""
    return resources.files("overbrainer.compare").joinpath("scripts", name).read_text(encoding="utf-8")


def questions_jsonl(questions: list[dict]) -> str:
    return "".join(json.dumps({"id": q["id"], "messages": q["messages"]}, ensure_ascii=False) + "\n"
                   for q in questions)


def ensure_gguf(executor, remote_run_dir: str, run_dir: Path, gguf: planning.Gguf) -> bool:
    """Make sure the target's run directory holds the GGUF with its SHA-256; True when it was sent."""
    expected = gguf.sha256 or sha256_file(run_dir / gguf.file)
    there = dict(executor.manifest(remote_run_dir, [gguf.file]))
    if there.get(str(PurePosixPath(gguf.file))) == expected:
        return False
    executor.upload(entries=[(run_dir / gguf.file, str(PurePosixPath(remote_run_dir, gguf.file)))])
    there = dict(executor.manifest(remote_run_dir, [gguf.file]))
    if there.get(str(PurePosixPath(gguf.file))) != expected:
        raise OverbrainerError(f"the GGUF {gguf.file} sent to the target does not have the SHA-256 of "
                               f"export.json ({expected[:12]}…)")
    return True


def job_env(config, target, gguf: planning.Gguf, context: int) -> dict[str, str]:
    settings = config.compare
    env = {"OVERBRAINER_COMPARE_MODEL": f"../../{gguf.file}", "OVERBRAINER_COMPARE_CTX": str(int(context or 0)),
           "OVERBRAINER_COMPARE_MAX_TOKENS": str(int(settings.max_tokens)),
           "OVERBRAINER_COMPARE_TEMPERATURE": repr(float(settings.temperature)),
           "OVERBRAINER_COMPARE_START_SECS": str(int(settings.server_start_secs))}
    return {**env, **llama_cpp.job_env(target)}


def run_compare_job(session, config, gguf: planning.Gguf, setup: dict) -> tuple[Path, dict]:
    """Run the job for a plan (`setup` without its `compare` ID yet); returns the compare's
    directory here and its setup (ID set, written as setup.json)."""
    project = Path(session.project_dir)
    runs_dir = planning.runs_dir(project)
    run = records.load(runs_dir, gguf.run)
    target = side_target(config, run, "compare")
    run_dir = runs_dir / run.id
    claimed: dict[str, str] = {}

    def prepare(executor, remote_job_dir: str) -> None:
        compare_id = PurePosixPath(remote_job_dir).name
        claimed["id"] = compare_id
        setup["compare"] = compare_id
        planning.write_setup(run_dir / planning.COMPARES / compare_id, setup)
        if ensure_gguf(executor, run.remote_dir, run_dir, gguf):
            log.info("compare: sent %s to the target", gguf.file)

    files = {name: script_text(name) for name in SCRIPTS}
    files[llama_cpp.SCRIPT] = llama_cpp.script(llama_cpp.SCRIPT)
    files[QUESTIONS] = questions_jsonl(setup["questions"])
    job = SideJob("compare", files=files, steps=[Step("compare", ("sh", "compare.sh"), from_path=True)],
                  env=job_env(config, target, gguf, setup.get("context") or 0), fetch=list(FETCHED),
                  prepare=prepare, label=f"compare of run {run.id}")
    try:
        result = run_side_job(session, config, run, job)
    except Interrupted as e:
        name = f"compare {claimed['id']}" if "id" in claimed else "the compare"
        err = Interrupted(f"interrupted: {name} of run {run.id} cancelled")
        err.exit_code = e.exit_code
        raise err from e
    except SideJobFailed as e:
        result = e.result
        reason = result.message or str(e)
        if reason.startswith("compare: "):
            reason = reason[len("compare: "):]
        raise OverbrainerError(f"compare {result.job_id} failed: {reason}; its server log is "
                               f"runs/{run.id}/{planning.COMPARES}/{result.job_id}/{SERVER_LOG}") from e
    if not (result.job_dir / ANSWERS).is_file():
        raise OverbrainerError(f"compare {result.job_id} failed: the job left no {ANSWERS}; its server log is "
                               f"runs/{run.id}/{planning.COMPARES}/{result.job_id}/{SERVER_LOG}")
    return result.job_dir, setup
