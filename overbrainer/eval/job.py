"""The child's side of an eval on a remote target (an SSH host, or a new pod of a runpod target): a
side job (jobs.side_job) that serves the run's GGUF as a compare's job does (compare/serve.py:
compare.sh and the shared llama_cpp.sh, the GGUF sent once) and runs lm-eval against it with
eval/scripts/eval_client.py; its output comes home and is read like a local eval's
(eval/flow.py).

- Where: `runs/<run>/evals/<id>/` here, the eval's own folder (with the job's run.json, job.log,
  metrics.jsonl, and on a pod its pod.json), and `<root>/evals/<id>` on the target. A runpod
  target gets a new pod (compare/serve.pod_settings: `[compare] image` and `max_hours`, a VRAM floor
  from the GGUF's size), deleted once the job's files are home.
- The job's files: compare.sh, compare_client.py, eval_client.py, llama_cpp.sh, the task files
  (eval/tasks.pack) and `eval_job.json`: `arguments` (eval/harness.arguments for the child,
  the settings the parent gets; its `base_url` is left empty, the client sets the server's),
  `include` (the task folders) and `index` (whether a task is named from lm-eval's registry).
- Its environment: a compare's (serve.job_env: the GGUF, the context, how long the server may take; on
  a pod the GGUF removed once served), `OVERBRAINER_COMPARE_CLIENT=eval_client.py` and its input
  `eval_job.json`, the progress bars off, and for local tasks `HF_DATASETS_OFFLINE` /
  `HF_HUB_OFFLINE`.
- Brought back: `output-child.json` (required: lm-eval's result without samples),
  `samples-child.jsonl`, `server.log`, `hardware.json`, with the runner's job.log and metrics.jsonl.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from overbrainer.compare import plan as planning
from overbrainer.compare import serve
from overbrainer.config.model import Config, Target
from overbrainer.errors import OverbrainerError
from overbrainer.eval import harness
from overbrainer.eval.tasks import TaskSet, pack
from overbrainer.exec.runtime import Step
from overbrainer.export.job import run_root
from overbrainer.jobs.lease import is_pod
from overbrainer.jobs.run_record import RunPlace
from overbrainer.jobs.side_job import SideJob, side_target
from overbrainer.support import fmt

if TYPE_CHECKING:
    from overbrainer.front.session import Session

log = logging.getLogger(__name__)

KIND = "eval"
CLIENT = "eval_client.py"
JOB_FILE = "eval_job.json"
OUTPUT = "output-child.json"
SAMPLES = "samples-child.jsonl"


@dataclass
class ChildJob:
    """The child's side as its job ran it: the eval's folder here, the target, lm-eval's output
    (its samples under `samples`, per task), the model arguments it ran with, the hardware."""
    job_dir: Path
    target: str
    output: dict[str, Any]
    model_args: dict[str, Any]
    hardware: dict[str, Any] | None


def child_side(gguf: planning.Gguf, settings: harness.Settings) -> harness.Side:
    """The child as the job's client asks it: its URL is the server's there, set by the client."""
    return harness.Side("child", "", Path(gguf.file).stem, seed=settings.seed)


def eval_side_job(config: Config, where: Target, run_id: str, gguf: planning.Gguf, context: int, tasks: TaskSet,
                  settings: harness.Settings, on_pod: bool) -> SideJob:
    """The eval's SideJob without its callbacks and pod settings (see the module docstring)."""
    side = child_side(gguf, settings)
    packed = pack(tasks)
    files = serve.job_files()
    files[CLIENT] = serve.script_text(CLIENT, "overbrainer.eval")
    files.update(packed.files)
    spec = {"arguments": harness.arguments(side, tasks.names, settings), "include": packed.include,
            "index": bool(tasks.registry)}
    files[JOB_FILE] = json.dumps(spec, indent=1, ensure_ascii=False) + "\n"
    env = {**serve.job_env(config, where, gguf, context, drop=on_pod),
           "OVERBRAINER_COMPARE_CLIENT": CLIENT, "OVERBRAINER_COMPARE_INPUT": JOB_FILE}
    env.update({name: "1" for name in harness.QUIET_ENV + (harness.OFFLINE_ENV if tasks.offline else ())})
    return SideJob(KIND, files=files, steps=[Step(KIND, ("sh", serve.SCRIPT), from_path=True)], env=env,
                   fetch=[OUTPUT, SAMPLES, serve.SERVER_LOG, serve.HARDWARE], label=f"eval of run {run_id}")


def run_eval_job(session: Session, gguf: planning.Gguf, target: str, tasks: TaskSet,
                 settings: harness.Settings) -> ChildJob:
    """Run the child's side on `target` (an SSH or runpod target) to its end and read what came home."""
    config = session.config
    place = RunPlace(planning.runs_dir(Path(session.project_dir)), gguf.run)
    run = place.load()
    name, where = side_target(config, run, KIND, target)
    on_pod = is_pod(where)
    run_dir = place.dir
    _, context = planning.training_shape(run_dir)
    claimed: dict[str, str] = {}

    def prepare(executor: Any, remote_job_dir: str) -> None:
        claimed["id"] = PurePosixPath(remote_job_dir).name
        if serve.ensure_gguf(executor, run_root(remote_job_dir), run_dir, gguf):
            log.info("eval: sent %s (%s) to the target", gguf.file, fmt.size((run_dir / gguf.file).stat().st_size))

    job = eval_side_job(config, where, run.id, gguf, context, tasks, settings, on_pod)
    job.prepare = prepare
    job.pod = serve.pod_settings(config, where, gguf, run_dir, None) if on_pod else {}
    result = serve.run_explained(session, run, job, name, False, claimed, OUTPUT)
    output = read_output(result.job_dir, result.job_id)
    config_args = output.get("config", {}).get("model_args") if isinstance(output.get("config"), dict) else None
    model_args = config_args if isinstance(config_args, dict) else child_side(gguf, settings).model_args()
    return ChildJob(result.job_dir, name, output, model_args, _json_or_none(result.job_dir / serve.HARDWARE))


def read_output(job_dir: Path, job_id: str) -> dict[str, Any]:
    """lm-eval's output as the job wrote it, its samples back under `samples` (per task)."""
    try:
        output = json.loads((job_dir / OUTPUT).read_text(encoding="utf-8"))
        samples: dict[str, list[dict[str, Any]]] = {}
        path = job_dir / SAMPLES
        if path.is_file():
            with path.open(encoding="utf-8") as fh:  # a line at a time: the rows are what is kept
                for line in fh:
                    if line.strip():
                        row = json.loads(line)
                        samples.setdefault(str(row.pop("task")), []).append(row)
    except (OSError, ValueError, KeyError, AttributeError) as e:
        raise OverbrainerError(f"eval {job_id} failed: its {OUTPUT} or {SAMPLES} is not readable: {e}") from None
    if not isinstance(output, dict):
        raise OverbrainerError(f"eval {job_id} failed: its {OUTPUT} is not lm-eval's output")
    output["samples"] = samples
    return output


def _json_or_none(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
