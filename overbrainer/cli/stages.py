"""The stage commands: `subtopics`, `questions`, `answers`, `split` and `run`.

Each opens the project for writing (lock), starts the front end's bus and Ctrl-C catcher, and
calls one flow of overbrainer.pipeline.run_flow. Heavy modules are imported inside the commands.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

import click

from overbrainer.cli import complete
from overbrainer.cli.context import AppContext, pass_app

_TOPIC = click.option("--topic", metavar="NAME", default=None, help="Only this topic.",
                      shell_complete=complete.topics)
_FORCE = click.option("--force", is_flag=True,
                      help="Regenerate: first drop the selected topics' output of this stage.")


log = logging.getLogger(__name__)


@contextlib.contextmanager
def stage_context(app: AppContext, *, watch: bool = False) -> Iterator[tuple]:
    """(StageContext, ConfigWatch | None) with the lock held, the bus rendering and Ctrl-C caught."""
    from overbrainer.pipeline.context import StageContext
    from overbrainer.pipeline.run_flow import ConfigWatch

    with app.open_project(write=True) as config:
        front = app.front
        guard = front.open_bus()
        interrupt = front.interrupt()
        try:
            ctx = StageContext(app.project_dir, config, bus=guard.bus, interrupt=interrupt)
            watcher = None
            if watch:
                from overbrainer.config.load import load_config

                watcher = ConfigWatch(app.project_dir, lambda: load_config(app.project_dir),
                                      dotenv=app.load_env())
            yield ctx, watcher
        finally:
            interrupt.restore()
            guard.close()


def _stage(app: AppContext, stage: str, topic: str | None, force: bool) -> None:
    from overbrainer.pipeline.run_flow import run_stage

    with stage_context(app) as (ctx, _):
        run_stage(ctx, stage, app.report, topic=topic, force=force)


@click.command(short_help="Generate the subtopics of each topic.")
@_TOPIC
@_FORCE
@pass_app
def subtopics(app: AppContext, topic: str | None, force: bool) -> None:
    """Ask the generator for the subtopics each topic still misses (data/subtopics.jsonl)."""
    _stage(app, "subtopics", topic, force)


@click.command(short_help="Generate questions for each subtopic.")
@_TOPIC
@_FORCE
@pass_app
def questions(app: AppContext, topic: str | None, force: bool) -> None:
    """Fill every subtopic with questions (data/questions.jsonl), deduplicated per topic.
    Topics without any subtopic get theirs first."""
    _stage(app, "questions", topic, force)


@click.command(short_help="Ask the parent model to answer every question.")
@_TOPIC
@_FORCE
@pass_app
def answers(app: AppContext, topic: str | None, force: bool) -> None:
    """Ask the parent to answer every question not answered yet (data/answers.jsonl)."""
    _stage(app, "answers", topic, force)


@click.command(short_help="Write data/train.jsonl and data/eval.jsonl.")
@_TOPIC
@pass_app
def split(app: AppContext, topic: str | None) -> None:
    """Split the usable answers into data/train.jsonl and data/eval.jsonl (deterministic).
    --topic only restricts what is counted."""
    _stage(app, "split", topic, False)


@click.command(short_help="Run every stage in order, then train when [training] is set.")
@pass_app
def run(app: AppContext) -> None:
    """subtopics → questions → answers → split on every topic, stopping at the first stage that
    fails; the configuration is re-read between stages when it changed."""
    from overbrainer.pipeline.run_flow import run_all

    with stage_context(app, watch=True) as (ctx, watcher):
        run_all(ctx, app.report, watch=watcher)
        config = ctx.config  # reloaded before training when it changed
        if config.training is None:
            log.info("no [training] section: run stops after split")
            return
        from overbrainer.runs.flow import train_flow

        train_flow(app.session(), config)
