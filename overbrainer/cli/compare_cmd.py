"""`overbrainer compare [--run ID] [--limit N] [--rejudge ID] [--both-orders] [--min-win-or-tie X]
[--target NAME] [--keep-pod]`."""

from __future__ import annotations

import click

from overbrainer.cli import complete
from overbrainer.cli.context import pass_app
from overbrainer.compare.flow import compare_flow
from overbrainer.jobs import ids


@click.command("compare")
@click.option("--run", "run_id", metavar="ID", default=None, shell_complete=complete.run_ids,
              help="The run whose child is compared (default: the newest run with a GGUF).")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", default=None,
              help="Only the first N usable questions of data/eval.jsonl.")
@click.option("--rejudge", metavar="ID", default=None,
              help="Judge compare ID again (only the verdicts its judge and prompt still miss).")
@click.option("--both-orders", is_flag=True,
              help="Judge each question in both A/B orders; a disagreement counts as a tie.")
@click.option("--min-win-or-tie", "min_win_or_tie", type=click.FloatRange(0, 1), metavar="X", default=None,
              help="Exit 1 when the 95 % interval's lower bound of win-or-tie is under X (0 to 1).")
@click.option("--target", "target", metavar="NAME", default=None,
              help="Serve the child on this target (default: [compare] target, else the run's own).")
@click.option("--keep-pod", is_flag=True, help="On a runpod target: keep the compare's pod afterwards.")
@pass_app
def compare(app, run_id, limit, rejudge, both_orders, min_win_or_tie, target, keep_pod) -> None:
    """Compare the child with its parent on data/eval.jsonl; a judge model picks the better answer.

    Prints the path of compare.md; compare.json holds every verdict and number. On a runpod
    target the child is served on a new pod, deleted once the answers are home (its price is said
    before it is created); a run with no GGUF yet is exported first, in the same job.
    """
    for value in (run_id, rejudge):
        if value is not None:
            ids.validate(value)
    with app.open_project(write=True) as config:
        compare_flow(app.session(config), run_id=run_id, limit=limit, rejudge=rejudge,
                     both_orders=both_orders, min_win_or_tie=min_win_or_tie, target=target, keep=keep_pod)
