"""The stage commands: `subtopics`, `questions`, `answers`, `gate`, `split` and `run`.

Each opens the project for writing (lock) and calls one flow of overbrainer.pipeline.run_flow
with the command's Session (the flow starts the front end's bus and Ctrl-C catcher). Imported
only when one of these commands runs (cli/main.py's lazy registry), so its imports stand at top.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Iterator

import click

from overbrainer.cli import complete
from overbrainer.cli.context import AppContext, pass_app
from overbrainer.cli.main import stopped_code
from overbrainer.config.load import load_config
from overbrainer.errors import UsageError
from overbrainer.export.in_job import InJobExport
from overbrainer.pipeline.context import StageInterrupted
from overbrainer.pipeline.plan import plan_flow
from overbrainer.pipeline.run_flow import ConfigWatch, run_project, run_stage
from overbrainer.support.redact import strip_controls

_TOPIC = click.option("--topic", metavar="NAME", default=None, help="Only this topic.",
                      shell_complete=complete.topics)
_FORCE = click.option("--force", is_flag=True,
                      help="Regenerate: first drop the selected topics' output of this stage.")
_PLAN = click.option("--plan", is_flag=True,
                     help="Print what would be sent and what it would cost, per stage, and send nothing.")
_MAX_COST = click.option("--max-cost", type=click.FloatRange(min=0, min_open=True, max=1e9), metavar="USD",
                         default=None, help="Send no LLM request that could take this command's spend past USD "
                                            "(overrides [pipeline] max_cost_usd).")
_WAIT = click.option("--wait", is_flag=True,
                     help="Batch mode ([pipeline] mode = \"batch\"): wait for the batches to end and collect them, "
                          "instead of exiting once they are submitted.")


@contextlib.contextmanager
def _resumable(app: AppContext) -> Iterator[None]:
    """A stage stopped by an interrupting signal: its summary was printed; say (on stderr, as a
    note rather than an error) which stage stopped and what resumes it (with the `-C DIR` this
    command was given), then exit with the signal's code (130 for Ctrl-C, 143 for SIGTERM, 129
    for SIGHUP)."""
    try:
        yield
    except StageInterrupted as e:
        code = stopped_code()
        project = str(app.project_dir)
        message = strip_controls(e.hint(None if project == "." else project))
        if app.json_mode:
            sys.stderr.write(json.dumps({"event": "interrupted", "message": message, "exit_code": code}) + "\n")
        else:
            click.echo(message, err=True)
        sys.stderr.flush()
        raise click.exceptions.Exit(code) from e


def _stage(app: AppContext, stage: str, topic: str | None, force: bool, *, plan: bool = False,
           max_cost: float | None = None, retry_excluded: bool = False, wait: bool = False) -> None:
    if plan:
        with app.open_project(write=False) as config:
            plan_flow(app.session(config), stage, topic=topic, force=force, retry_excluded=retry_excluded,
                      max_cost=max_cost)
        return

    with _resumable(app), app.open_project(write=True) as config:
        run_stage(app.session(config), stage, topic=topic, force=force, retry_excluded=retry_excluded,
                  max_cost=max_cost, wait=wait)


@click.command(short_help="Generate the subtopics of each topic.")
@_TOPIC
@_FORCE
@_PLAN
@_MAX_COST
@pass_app
def subtopics(app: AppContext, topic: str | None, force: bool, plan: bool, max_cost: float | None) -> None:
    """Ask the generator for the subtopics each topic still misses (data/subtopics.jsonl)."""
    _stage(app, "subtopics", topic, force, plan=plan, max_cost=max_cost)


@click.command(short_help="Generate questions for each subtopic.")
@_TOPIC
@_FORCE
@_PLAN
@_MAX_COST
@pass_app
def questions(app: AppContext, topic: str | None, force: bool, plan: bool, max_cost: float | None) -> None:
    """Fill every subtopic with questions (data/questions.jsonl), deduplicated per topic.
    Topics without any subtopic get theirs first."""
    _stage(app, "questions", topic, force, plan=plan, max_cost=max_cost)


@click.command(short_help="Ask the parent model to answer every question.")
@_TOPIC
@_FORCE
@click.option("--retry-excluded", is_flag=True,
              help="Ask again only the questions whose latest answer is excluded (cut short, refused, empty, "
                   "no reasoning); the new answer supersedes it.")
@_PLAN
@_MAX_COST
@_WAIT
@pass_app
def answers(app: AppContext, topic: str | None, force: bool, retry_excluded: bool, plan: bool,
            max_cost: float | None, wait: bool) -> None:
    """Ask the parent to answer every question not answered yet (data/answers.jsonl)."""
    if force and retry_excluded:
        raise UsageError("--force and --retry-excluded do not go together: --force asks every question again")
    _stage(app, "answers", topic, force, plan=plan, max_cost=max_cost, retry_excluded=retry_excluded, wait=wait)


@click.command(short_help="Check every answer ([gate] rules, roles.grader) before split.")
@_TOPIC
@_MAX_COST
@pass_app
def gate(app: AppContext, topic: str | None, max_cost: float | None) -> None:
    """Judge every usable answer not judged yet with the current settings: the rule checks of
    [gate], then the grader (roles.grader, prompts/grader.txt) on those the rules keep. Each
    verdict goes to data/gate.jsonl; `split` leaves out the answers dropped."""
    _stage(app, "gate", topic, False, max_cost=max_cost)


@click.command(short_help="Write data/train.jsonl and data/eval.jsonl.")
@_TOPIC
@pass_app
def split(app: AppContext, topic: str | None) -> None:
    """Split the usable answers into data/train.jsonl and data/eval.jsonl (deterministic).
    --topic only restricts what is counted."""
    _stage(app, "split", topic, False)


@click.command(short_help="Run every stage in order, then train when [training] is set.")
@_PLAN
@_MAX_COST
@click.option("--retrain", is_flag=True,
              help="Train even when a run already trained on this data and these [training] settings.")
@_WAIT
@pass_app
def run(app: AppContext, plan: bool, max_cost: float | None, retrain: bool, wait: bool) -> None:
    """subtopics → questions → answers → gate (when [gate] or roles.grader is set) → split on
    every topic, stopping at the first stage that
    fails; the configuration is re-read between stages when it changed.

    With [training], it then trains only when no run trained on this data and these settings yet
    (`train: up to date with run <id>` otherwise); after a run that failed on them it stops with
    exit 1 and says how to retry (`overbrainer train`)."""
    if plan:
        with app.open_project(write=False) as config:
            plan_flow(app.session(config), "run", max_cost=max_cost, retrain=retrain)
        return
    with app.open_project(write=True) as config:
        watcher = ConfigWatch(app.project_dir, lambda: load_config(app.project_dir), dotenv=app.load_env())
        with _resumable(app):
            run_project(app.session(config), watch=watcher, max_cost=max_cost, retrain=retrain,
                        after=(InJobExport(),), wait=wait)
