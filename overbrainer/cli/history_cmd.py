"""`overbrainer history [--all]`: what each stage did and spent (read-only, no lock)."""

from __future__ import annotations

import click

from overbrainer.cli.context import AppContext, pass_app


@click.command(short_help="Show what each stage did and spent.")
@click.option("--all", "all_runs", is_flag=True, help="One line per stage execution.")
@pass_app
def history(app: AppContext, all_runs: bool) -> None:
    """Totals per stage from .overbrainer/history.jsonl (--all: one line per execution)."""
    from overbrainer.pipeline.dataset_ops import history_view
    from overbrainer.runs.pod_run import pod_spend

    app.require_project()
    text, data = history_view(app.project_dir, all_runs=all_runs)
    pods = pod_spend(app.project_dir / "runs")  # training on Runpod: what the pods cost
    if pods is not None:
        text = f"{text}\n{pods[0]}" if text else pods[0]
        data = {**data, "pods": pods[1]}
    app.report(text, data)
