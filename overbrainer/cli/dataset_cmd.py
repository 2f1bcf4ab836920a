"""`overbrainer dataset stats|gated|reject ID`: inspect and prune the dataset."""

from __future__ import annotations

import click

from overbrainer.cli import complete
from overbrainer.cli.context import AppContext, pass_app
from overbrainer.cli.help import HelpGroup
from overbrainer.pipeline.dataset_ops import gated_flow, reject_flow, stats_flow


@click.group("dataset", cls=HelpGroup)
def dataset() -> None:
    """Inspect and prune the dataset."""


@dataset.command("stats", short_help="Per-topic counts, exclusions, tokens and cost so far.")
@pass_app
def stats(app: AppContext) -> None:
    """Per topic: subtopics, questions, answered, excluded by reason; tokens and cost so far.
    Reads only: it never takes the project lock."""
    with app.open_project(write=False) as config:
        stats_flow(app.session(config))


@dataset.command("gated", short_help="The answers the quality gate dropped, each with its reason.")
@click.option("--topic", metavar="NAME", default=None, help="Only this topic.", shell_complete=complete.topics)
@pass_app
def gated(app: AppContext, topic: str | None) -> None:
    """One line per answer the gate dropped (data/gate.jsonl, with the current [gate] and
    roles.grader settings): its ID, topic / subtopic, check, reason and what the check saw.
    They stay in data/answers.jsonl; split leaves them out. Reads only."""
    with app.open_project(write=False) as config:
        gated_flow(app.session(config), topic=topic)


@dataset.command("reject", short_help="Remove a subtopic or question and never generate it again.")
@click.argument("item_id", metavar="ID")
@pass_app
def reject(app: AppContext, item_id: str) -> None:
    """Remove a subtopic (with its questions and answers) or a question (with its answer), and
    record it in data/rejected.jsonl so that no stage generates it again."""
    with app.open_project(write=True) as config:
        reject_flow(app.session(config), item_id=item_id)
