"""`overbrainer push RUN_ID [--repo NS/NAME] [--public] [--overwrite-card] [--dry-run]`, and
`overbrainer push --dataset [...]` (the project's train/eval split to a dataset repo). Takes the
project lock (the dry run too: it writes the card copy, and the Parquet files of --dataset)."""

from __future__ import annotations

import click

from overbrainer.cli import complete
from overbrainer.cli.context import pass_app
from overbrainer.errors import UsageError
from overbrainer.hub.dataset_flow import dataset_push_flow
from overbrainer.hub.flow import push_flow
from overbrainer.jobs import ids
from overbrainer.support import extras


@click.command("push")
@click.argument("run_id", required=False, shell_complete=complete.run_ids)
@click.option("--dataset", is_flag=True,
              help="Push the project's train/eval split (Parquet, with a dataset card) to a dataset repo "
                   "instead of a run's model.")
@click.option("--repo", metavar="NS/NAME", default=None,
              help="The Hub repo (default: [hub] repo, else <your HF user>/<project name>; with --dataset: "
                   "[hub] dataset_repo, else that name + -data).")
@click.option("--public", is_flag=True,
              help="Create the repo public (default: private). An existing repo keeps its own.")
@click.option("--overwrite-card", "overwrite_card", is_flag=True,
              help="Replace the repo's own README.md with the card.")
@click.option("--dry-run", "dry_run", is_flag=True,
              help="Print what would be pushed and write the card to runs/<id>/hub/README.md "
                   "(--dataset: .overbrainer/dataset/hub/); send nothing.")
@pass_app
def push(app, run_id: str | None, dataset: bool, repo: str | None, public: bool, overwrite_card: bool,
         dry_run: bool) -> None:
    """Push a run's model and its model card to the Hugging Face Hub, in one commit; with
    --dataset, the project's train/eval split and its dataset card.

    The token comes from OVERBRAINER_HF_TOKEN only. A push cut off is resumed by running it again.
    It needs the `hub` extra (pip install 'overbrainer[hub]'); --dry-run does not.
    """
    if dataset and run_id is not None:
        raise UsageError("push --dataset pushes the project's data/train.jsonl and data/eval.jsonl: give no RUN_ID")
    if not dry_run:
        extras.require("hub", "overbrainer push")
    if dataset:
        with app.open_project(write=True) as config:
            dataset_push_flow(app.session(config), repo=repo, public=public, overwrite_card=overwrite_card,
                              dry_run=dry_run)
        return
    if run_id is None:
        raise UsageError("push needs a RUN_ID (or --dataset to push the train/eval split)")
    ids.validate(run_id)
    with app.open_project(write=True) as config:
        push_flow(app.session(config), run_id, repo=repo, public=public, overwrite_card=overwrite_card,
                  dry_run=dry_run)
