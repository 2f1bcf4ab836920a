"""`overbrainer batches ls|cancel`: the batch mode's submissions (docs/batch.md#commands)."""

from __future__ import annotations

import click

from overbrainer.cli.context import AppContext, pass_app
from overbrainer.pipeline.batch_admin import cancel_flow, ls_flow


@click.group(short_help="Batch mode's submissions: list them, cancel them.")
def batches() -> None:
    """The submissions of batch mode ([pipeline] mode = "batch"), from the journal in
    .overbrainer/batches/ and the provider."""


@batches.command("ls", short_help="List the submissions and their status.")
@pass_app
def ls(app: AppContext) -> None:
    """One line per submission, oldest first: its id, stage, state (submitting, submitted,
    collected, lost), the provider's status (asked again for the open ones), its requests, the
    batch id and since when. Takes no lock and writes nothing."""
    with app.open_project(write=False) as config:
        ls_flow(app.session(config))


@batches.command("cancel", short_help="Cancel a submission's batch on the provider.")
@click.argument("submission", required=False)
@click.option("--all", "every", is_flag=True, help="Every open submission.")
@pass_app
def cancel(app: AppContext, submission: str | None, every: bool) -> None:
    """Cancel SUBMISSION's batch (or every open one, --all) on the provider and record it. What
    it answered before the cancel is collected by the next run; its other items are sent again
    (a cancel is not counted as a failure)."""
    with app.open_project(write=True) as config:
        cancel_flow(app.session(config), submission, every)
