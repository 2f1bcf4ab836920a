"""The job of a new compare: the child served by llama-server on a target, asked every question
of the plan, its answers brought home.

- Where: `--target`, else `[compare] target`, else the run's own target (any kind), through
  jobs.side_job (job.log, metrics.jsonl, follow, verified fetch, Ctrl-C cancels): in
  `<root>/compares/<id>/` there (`<root>`: the run's directory on that target, see jobs.side_job)
  and `runs/<run>/compares/<id>/` here. A runpod target gets a new pod (`pod_settings`:
  `[compare] image`, `[compare] max_hours`, a VRAM floor from the GGUF's size).
- The GGUF: `<root>` must hold the file `export.json` names, with its SHA-256; when it does not,
  that one file is sent there (`Executor.upload(entries=…)`). It stays on a local or SSH target;
  on a pod the job removes it once the server stopped (`OVERBRAINER_COMPARE_DROP_MODEL`). The job
  reads it as `../../<file>` (relative to the job directory, so a container's mount sees it too).
- No GGUF yet (`export`, an export.job.ExportPart): the export's files, step, environment and
  secrets join the job and its step runs first; after the job the GGUF comes home verified,
  `export.json` is written in the compare's directory, setup.json gets its SHA-256 and llama.cpp
  version, and on a pod the GGUF is removed there.
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
import shlex
from importlib import resources
from pathlib import Path, PurePosixPath

from overbrainer.compare import plan as planning
from overbrainer.compare.answers import ANSWERS
from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.exec.runtime import Step
from overbrainer.exec.manifest import sha256_file
from overbrainer.export import llama_cpp
from overbrainer.export.gate import base_model
from overbrainer.export.job import FETCHED as EXPORT_FETCHED
from overbrainer.export.job import run_root
from overbrainer.jobs import run_record as records
from overbrainer.jobs.lease import is_pod
from overbrainer.jobs.side_job import SideJob, SideJobFailed, run_side_job, side_target
from overbrainer.runpod import side_pods as pod
from overbrainer.support import fmt

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


def job_env(config, target, gguf: planning.Gguf, context: int, *, drop: bool = False) -> dict[str, str]:
    settings = config.compare
    env = {"OVERBRAINER_COMPARE_MODEL": f"../../{gguf.file}", "OVERBRAINER_COMPARE_CTX": str(int(context or 0)),
           "OVERBRAINER_COMPARE_MAX_TOKENS": str(int(settings.max_tokens)),
           "OVERBRAINER_COMPARE_TEMPERATURE": repr(float(settings.temperature)),
           "OVERBRAINER_COMPARE_START_SECS": str(int(settings.server_start_secs))}
    if drop:
        env["OVERBRAINER_COMPARE_DROP_MODEL"] = "1"
    return {**env, **llama_cpp.job_env(target)}


def pod_settings(config, target, gguf: planning.Gguf, run_dir: Path, export) -> dict:
    """A compare pod's settings: `[compare] image` and `max_hours`, and the VRAM floor from the
    GGUF's size (an export first: from the base model's)."""
    size = None
    if pod.needs_floor(target):
        if export is not None:
            size = pod.base_model_bytes(config, base_model(run_dir))
        else:
            size = (run_dir / gguf.file).stat().st_size
    settings = config.compare
    return pod.settings(target, settings.max_hours, image=settings.image, model_bytes=size)


def run_compare_job(session, config, gguf: planning.Gguf, setup: dict, *, target: str | None = None,
                    keep: bool = False, export=None) -> tuple[Path, dict]:
    """Run the job for a plan (`setup` without its `compare` ID yet); returns the compare's
    directory here and its setup (ID set, written as setup.json). `export` (export.job.ExportPart):
    the run has no GGUF yet: the job exports it first, and the GGUF comes home with the answers."""
    project = Path(session.project_dir)
    runs_dir = planning.runs_dir(project)
    run = records.load(runs_dir, gguf.run)
    name, where = side_target(config, run, "compare", target)
    on_pod = is_pod(where)
    run_dir = runs_dir / run.id
    claimed: dict[str, str] = {}

    def prepare(executor, remote_job_dir: str) -> None:
        compare_id = PurePosixPath(remote_job_dir).name
        claimed["id"] = compare_id
        setup["compare"] = compare_id
        planning.write_setup(run_dir / planning.COMPARES / compare_id, setup)
        if export is not None:
            export.upload_if_gone(executor, remote_job_dir)
        elif ensure_gguf(executor, run_root(remote_job_dir), run_dir, gguf):
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
    job.pod = pod_settings(config, where, gguf, run_dir, export) if on_pod else {}
    result = run_explained(session, config, run, job, name, keep, claimed, ANSWERS)
    return result.job_dir, setup


def run_explained(session, config, run, job: SideJob, name: str, keep: bool, claimed: dict, required: str):
    """run_side_job for a job that serves the child (compare.sh), its stop and failure said in
    the words of its kind (`compare`, `eval`: which one, of which run, and where its server log
    is); a job that left no `required` file failed. `claimed["id"]`: its ID once claimed."""
    kind = job.kind
    try:
        result = run_side_job(session, config, run, job, target=name, keep=keep)
    except Interrupted as e:
        label = f"{kind} {claimed['id']}" if "id" in claimed else f"the {kind}"
        tail = str(e).partition(" cancelled")[2]  # e.g. `; it has no pod left`
        err = Interrupted(f"interrupted: {label} of run {run.id} cancelled{tail}")
        err.exit_code = e.exit_code
        raise err from e
    except SideJobFailed as e:
        result = e.result
        reason = result.message or str(e)
        for prefix in ("compare: ", f"{kind}: "):  # compare.sh's and the client's own lines
            reason = reason[len(prefix):] if reason.startswith(prefix) else reason
        raise OverbrainerError(f"{kind} {result.job_id} failed: {reason}; its server log is "
                               f"{server_log(run.id, result.job_id, kind)}") from e
    if not (result.job_dir / required).is_file():
        raise OverbrainerError(f"{kind} {result.job_id} failed: the job left no {required}; its server log is "
                               f"{server_log(run.id, result.job_id, kind)}")
    return result


def compare_side_job(config, where, run_id: str, gguf: planning.Gguf, setup: dict, export, on_pod: bool):
    """The compare's SideJob without its callbacks and pod settings: the scripts, the questions,
    the steps (an export's first), the environment, what is fetched, the secrets."""
    files: dict[str, str | bytes] = {name: script_text(name) for name in SCRIPTS}
    files[llama_cpp.SCRIPT] = llama_cpp.script(llama_cpp.SCRIPT)
    files[QUESTIONS] = questions_jsonl(setup["questions"])
    steps = [Step("compare", ("sh", "compare.sh"), from_path=True)]
    env = job_env(config, where, gguf, setup.get("context") or 0, drop=on_pod and export is None)
    fetch, secrets = list(FETCHED), {}
    if export is not None:
        files.update(export.files)
        steps.insert(0, export.step)
        env.update(export.env)
        fetch += [f for f in export_fetched() if f not in fetch]
        secrets = dict(export.secrets)
    return SideJob("compare", files=files, steps=steps, env=env, fetch=fetch, secrets=secrets,
                   label=f"compare of run {run_id}")


def server_log(run_id: str, job_id: str, kind: str = "compare") -> str:
    """Where the server log of a compare (or of another job of `kind` served by compare.sh) is."""
    return f"runs/{run_id}/{kind}s/{job_id}/{SERVER_LOG}"


def export_fetched() -> list[str]:
    return list(EXPORT_FETCHED)
