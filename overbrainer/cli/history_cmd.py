"""`overbrainer history [--all]`: what each stage did and spent (read-only, no lock)."""

from __future__ import annotations

import click

from overbrainer.cli.context import AppContext, pass_app
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.jobs.records import project_costs
from overbrainer.pipeline.dataset_ops import history_flow


@click.command(short_help="Show what each stage did and spent.")
@click.option("--all", "all_runs", is_flag=True, help="One line per stage execution.")
@pass_app
def history(app: AppContext, all_runs: bool) -> None:
    """Totals per stage from .overbrainer/history.jsonl (--all: one line per execution)."""
    app.require_project()
    # Training on Runpod: what the pods cost, after the stages' totals.
    history_flow(app.session(), all_runs=all_runs, pods=project_costs(ProjectPaths(app.project_dir).runs))
