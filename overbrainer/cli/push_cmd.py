"""`overbrainer push RUN_ID [--repo NS/NAME] [--public] [--overwrite-card] [--dry-run]`. Takes the
project lock (the dry run too: it writes the card copy)."""

from __future__ import annotations

import click

from overbrainer.cli import complete
from overbrainer.cli.context import pass_app
from overbrainer.hub.flow import push_flow
from overbrainer.jobs import ids


@click.command("push")
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--repo", metavar="NS/NAME", default=None,
              help="The Hub repo (default: [hub] repo, else <your HF user>/<project name>).")
@click.option("--public", is_flag=True,
              help="Create the repo public (default: private). An existing repo keeps its own.")
@click.option("--overwrite-card", "overwrite_card", is_flag=True,
              help="Replace the repo's own README.md with the model card.")
@click.option("--dry-run", "dry_run", is_flag=True,
              help="Print what would be pushed and write the card to runs/<id>/hub/README.md; send nothing.")
@pass_app
def push(app, run_id: str, repo: str | None, public: bool, overwrite_card: bool, dry_run: bool) -> None:
    """Push a run's model and its model card to the Hugging Face Hub, in one commit.

    The token comes from OVERBRAINER_HF_TOKEN only. A push cut off is resumed by running it again.
    """
    ids.validate(run_id)
    with app.open_project(write=True) as config:
        push_flow(app.session(), config, run_id, repo=repo, public=public, overwrite_card=overwrite_card,
                  dry_run=dry_run)
