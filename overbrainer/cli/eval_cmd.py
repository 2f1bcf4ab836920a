"""`overbrainer eval [--run ID] [--tasks …] [--target NAME] [--limit N] [--max-tokens N] [--no-parent]`."""

from __future__ import annotations

import click

from overbrainer.cli import complete
from overbrainer.cli.context import pass_app
from overbrainer.eval.flow import eval_flow
from overbrainer.jobs import ids


@click.command("eval")
@click.option("--run", "run_id", metavar="ID", default=None, shell_complete=complete.run_ids,
              help="The run whose child is evaluated (default: the newest run with a GGUF).")
@click.option("--tasks", "tasks", metavar="TASKS", multiple=True,
              help="lm-eval task names or task YAML files, comma-separated or repeated "
                   "(default: data/eval.jsonl as a local task).")
@click.option("--target", "target", metavar="NAME", default=None,
              help="Where the child is served: a local target here, an SSH or runpod target as a job "
                   "there (default: this machine).")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", default=None,
              help="Only the first N documents of each task.")
@click.option("--max-tokens", "max_tokens", type=click.IntRange(min=1), metavar="N", default=None,
              help="Tokens per answer, both sides (default: [compare] max_tokens).")
@click.option("--no-parent", is_flag=True, help="Evaluate the child only.")
@pass_app
def eval_(app, run_id, tasks, target, limit, max_tokens, no_parent) -> None:
    """Run lm-evaluation-harness tasks on the child (its GGUF served by llama-server, here or as a
    job on --target) and on the parent with the same settings; print `child = X % of parent` per
    task with a 95 % interval.

    Results: runs/<run>/evals/<id>/eval.json. Needs the `eval` extra (lm-eval).
    """
    if run_id is not None:
        ids.validate(run_id)
    with app.open_project(write=True) as config:
        eval_flow(app.session(config), run_id=run_id, tasks=list(tasks), target=target, limit=limit,
                  max_tokens=max_tokens, parent=not no_parent)
