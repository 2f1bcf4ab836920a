"""`eval_flow`: lm-evaluation-harness tasks on the child (its GGUF served by llama-server on this
machine, compare/serve.py, or as a job on a remote target, eval/job.py) and, where
reachable, on the parent (its provider, from this machine), the same settings on both;
`runs/<run>/evals/<eval id>/eval.json` and a ratio line per task (docs/eval.md).

- The run: `--run`, else the newest run holding a GGUF (compare/plan.pick_run); a run without
  one is an error (`overbrainer export` first).
- The target: this machine, or `--target`: a local target serves the child here (its
  `llama_cpp_dir`); an SSH or runpod target runs the child's side as a side job there (a runpod
  one on a new pod), its lm-eval output brought home into the eval's folder, which is the job's.
- The parent: `[roles] parent` on an `openai`-protocol provider with a base URL; otherwise (or when
  its evaluation fails) the eval goes on with the child alone, and eval.json says why.
- Files: `eval.json` (atomic), `samples-child.jsonl` / `samples-parent.jsonl` (lm-eval's logged
  samples, one line each with its `task`), `server.log`, and for the default task `task/`.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overbrainer.compare import plan as planning
from overbrainer.compare.serve import SERVER, SERVER_LOG, serving
from overbrainer.config.model import Config, Target
from overbrainer.errors import ConfigError, Interrupted, OverbrainerError
from overbrainer.eval import harness
from overbrainer.eval import stats as numbers
from overbrainer.eval.job import run_eval_job
from overbrainer.eval.tasks import SPLIT_TASK, TASK_DIR, TaskSet, plan_tasks
from overbrainer.jobs import ids
from overbrainer.jobs.run_record import EVAL_JSON, EVALS
from overbrainer.support import fmt, redact
from overbrainer.support.atomic import atomic_write_text

if TYPE_CHECKING:
    from overbrainer.front.session import Session

log = logging.getLogger(__name__)

Doc = dict[str, Any]  # a JSON object: eval.json, lm-eval's output, a side's settings
Ran = tuple[Doc, Doc]  # a side's lm-eval output and its settings for eval.json


def eval_target(config: Config, name: str | None) -> Target | None:
    """The target of `--target` (None: this machine's defaults): a local one serves the child
    here, an SSH or runpod one runs its side as a job there."""
    return None if name is None else config.target(name)


def child_gguf(project: Path, run_id: str | None) -> planning.Gguf:
    try:
        return planning.pick_run(project, run_id, "evaluated")
    except planning.NoGguf as e:
        hint = f"`overbrainer export {e.run_id}`" if e.run_id else "`overbrainer export RUN_ID`"
        raise OverbrainerError(f"{e}: export it first with {hint}") from None


def parent_side(config: Config, seed: int) -> tuple[harness.Side | None, Doc]:
    """The parent's side and its settings for eval.json (never its key), or None and why not."""
    try:
        provider, role = config.provider_for("parent")
    except ConfigError as e:
        return None, {"skipped": str(e)}
    about = {"provider": provider.name, "protocol": provider.protocol, "model": role.model,
             "base_url": provider.base_url}
    if provider.protocol != "openai":
        return None, {**about, "skipped": f"provider {provider.name} speaks the {provider.protocol} protocol; "
                      "lm-eval's chat model speaks OpenAI's"}
    if not provider.base_url:
        return None, {**about, "skipped": f"providers.{provider.name}.base_url is not set"}
    key = provider.api_key.resolve() if provider.api_key is not None else None
    redact.register(key)
    side = harness.Side("parent", provider.base_url.rstrip("/") + "/chat/completions", role.model,
                        concurrent=int(config.pipeline.concurrency or 1), seed=seed, key=key)
    return side, {**about, "model_args": side.model_args()}


def settings_of(config: Config, limit: int | None, max_tokens: int | None) -> harness.Settings:
    temperature = float(config.compare.temperature)
    gen = {"max_gen_toks": int(max_tokens or config.compare.max_tokens), "temperature": temperature,
           "do_sample": temperature > 0}
    return harness.Settings(limit, config.pipeline.seed, gen)


def eval_flow(session: Session, *, run_id: str | None = None, tasks: list[str] | None = None,
              target: str | None = None, limit: int | None = None, max_tokens: int | None = None,
              parent: bool = True) -> Doc:
    """Run the eval and write eval.json; returns its content."""
    project, config = Path(session.project_dir), session.config
    where = eval_target(config, target)
    gguf = child_gguf(project, run_id)
    run_dir = planning.runs_dir(project) / gguf.run
    settings = settings_of(config, limit, max_tokens)
    settings.quiet = bool(getattr(session.front, "json", False)) or not sys.stderr.isatty()
    if target is not None and where is not None and where.kind != "local":
        return remote_eval(session, gguf, target, tasks, settings, parent)
    eval_id, eval_dir = ids.claim_new(run_dir / EVALS, f"eval_{ids.timestamp()}")
    try:
        task_set = plan_tasks(tasks, project, eval_dir)
        manager = harness.task_manager(task_set, settings)
    except BaseException:
        shutil.rmtree(eval_dir, ignore_errors=True)  # nothing was evaluated: no eval left behind
        raise
    log.info("eval %s: the child of run %s on %s", eval_id, gguf.run, ", ".join(task_set.names))
    try:
        child, child_about = run_child(config, project, gguf, where, eval_dir, task_set, settings, manager)
        parent_out, parent_about = parent_of(config, task_set, settings, manager, parent)
    except KeyboardInterrupt:
        shutil.rmtree(eval_dir, ignore_errors=True)
        raise Interrupted(f"interrupted: eval {eval_id} of run {gguf.run} stopped (its server too); "
                          "nothing was kept") from None
    return finish(session, eval_dir, gguf.run, task_set, settings, (child, child_about), (parent_out, parent_about))


def remote_eval(session: Session, gguf: planning.Gguf, target: str, tasks: list[str] | None,
                settings: harness.Settings, parent: bool) -> Doc:
    """The eval with the child's side run as a job on an SSH or runpod target (eval/job.py)
    and the parent's from here; the eval's folder is the job's."""
    project, config = Path(session.project_dir), session.config
    with tempfile.TemporaryDirectory(prefix="overbrainer-eval-") as staging:  # the default task, for both
        task_set = plan_tasks(tasks, project, Path(staging))
        manager = harness.task_manager(task_set, settings)
        log.info("eval: the child of run %s on %s, as a job on target %s", gguf.run, ", ".join(task_set.names), target)
        job = run_eval_job(session, gguf, target, task_set, settings)
        if SPLIT_TASK in task_set.files:  # eval.json names the copy in the eval's folder
            task_set.files[SPLIT_TASK] = str(job.job_dir / TASK_DIR / f"{SPLIT_TASK}.yaml")
        try:
            parent_side_out = parent_of(config, task_set, settings, manager, parent)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: eval {job.job_dir.name} of run {gguf.run} stopped while the parent was "
                              f"evaluated; the child's results are kept in {_shown(job.job_dir, project)} "
                              "(no eval.json)") from None
    about = {**child_settings(project, gguf, job.model_args), "target": job.target, "hardware": job.hardware}
    return finish(session, job.job_dir, gguf.run, task_set, settings, (job.output, about), parent_side_out)


def finish(session: Session, eval_dir: Path, run_id: str, task_set: TaskSet, settings: harness.Settings,
           child: Ran, parent: tuple[Doc | None, Doc]) -> Doc:
    """eval.json and the samples written into `eval_dir`, the ratio lines reported; eval.json's content."""
    (child_out, child_about), (parent_out, parent_about) = child, parent
    doc = eval_doc(eval_dir.name, run_id, task_set, settings, child_out, child_about, parent_out, parent_about)
    write_eval(eval_dir, doc, child_out, parent_out)
    lines = [numbers.task_line(task, row) for task, row in doc["summary"].items()]
    if parent_out is None:
        lines.append(f"parent not evaluated: {parent_about.get('skipped')}")
    shown = _shown(eval_dir / EVAL_JSON, Path(session.project_dir))
    session.report("\n".join(lines), {"eval": eval_dir.name, "run": run_id, "file": shown,
                                      "summary": doc["summary"], "parent": parent_about})
    return doc


def parent_of(config: Config, task_set: TaskSet, settings: harness.Settings, manager: Any,
              parent: bool) -> tuple[Doc | None, Doc]:
    """The parent's output and settings (`parent` False: `--no-parent`, not evaluated)."""
    if not parent:
        return None, {"skipped": "--no-parent"}
    return run_parent(config, task_set, settings, manager)


def child_settings(project: Path, gguf: planning.Gguf, model_args: Doc) -> Doc:
    """The child's settings for eval.json: its GGUF, how it was served and asked."""
    base_model, context = planning.training_shape(planning.runs_dir(project) / gguf.run)
    return {"gguf": gguf.file, "gguf_sha256": gguf.sha256, "quantize": gguf.quantize, "llama_cpp": gguf.llama_cpp,
            "base_model": base_model, "context": context, "server": SERVER,
            "model_args": model_args}


def run_child(config: Config, project: Path, gguf: planning.Gguf, where: Target | None, eval_dir: Path,
              task_set: TaskSet, settings: harness.Settings, manager: Any) -> Ran:
    """lm-eval's output on the child, served for the call; and the child's settings."""
    run_dir = planning.runs_dir(project) / gguf.run
    _, context = planning.training_shape(run_dir)
    with serving(run_dir / gguf.file, target=where, context=context,
                 start_secs=float(config.compare.server_start_secs), work_dir=eval_dir,
                 cache=planning.runs_dir(project) / ".cache") as url:
        side = harness.Side("child", url + "/v1/chat/completions", Path(gguf.file).stem, seed=settings.seed)
        try:
            out = harness.evaluate(side, task_set, settings, manager)
        except OverbrainerError as e:
            raise OverbrainerError(f"{e}; its server log is {_shown(eval_dir / SERVER_LOG, project)}") from None
    return out, child_settings(project, gguf, side.model_args())


def run_parent(config: Config, task_set: TaskSet, settings: harness.Settings,
               manager: Any) -> tuple[Doc | None, Doc]:
    side, about = parent_side(config, settings.seed)
    if side is None:
        log.warning("eval: the parent is not evaluated: %s", about["skipped"])
        return None, about
    try:
        return harness.evaluate(side, task_set, settings, manager), about
    except OverbrainerError as e:
        log.warning("eval: the parent is not evaluated: %s", e)
        return None, {**about, "skipped": str(e)}


def lm_eval_output(out: Doc | None) -> Doc | None:
    """lm-eval's own output without its logged samples (kept in samples-*.jsonl)."""
    if out is None:
        return None
    return {k: v for k, v in out.items() if k != "samples"}


def eval_doc(eval_id: str, run_id: str, task_set: TaskSet, settings: harness.Settings, child: Doc, child_about: Doc,
             parent: Doc | None, parent_about: Doc) -> Doc:
    return {
        "eval": eval_id, "run": run_id, "created": fmt.stamp(), "lm_eval": harness.version(),
        "model": harness.MODEL, "tasks": list(task_set.names), "task_files": dict(task_set.files),
        "offline": task_set.offline, "limit": settings.limit, "seed": settings.seed, "seeds": settings.seeds(),
        "gen_kwargs": dict(settings.gen_kwargs), "apply_chat_template": True,
        "child": {**child_about, "output": lm_eval_output(child)},
        "parent": {**parent_about, "output": lm_eval_output(parent)},
        "summary": numbers.task_numbers(child, parent, settings.seed),
    }


def _samples_text(out: Doc) -> str:
    return "".join(json.dumps({"task": task, **s}, ensure_ascii=False, default=str) + "\n"
                   for task, rows in (out.get("samples") or {}).items() for s in rows)


def write_eval(eval_dir: Path, doc: Doc, child: Doc, parent: Doc | None) -> None:
    atomic_write_text(eval_dir / "samples-child.jsonl", _samples_text(child))
    if parent is not None:
        atomic_write_text(eval_dir / "samples-parent.jsonl", _samples_text(parent))
    atomic_write_text(eval_dir / EVAL_JSON, json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")


def _shown(path: Path, project_dir: Path) -> str:
    try:
        return str(path.relative_to(project_dir))
    except ValueError:
        return str(path)
