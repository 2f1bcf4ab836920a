"""`overbrainer serve up|ls|down`: a served provider's pods by hand, for a long session
(docs/serving.md#by-hand). All of them print one JSON object with --json."""

from __future__ import annotations

import click

from overbrainer.cli.context import pass_app
from overbrainer.cli.help import HelpGroup
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.runpod.serve_commands import down_flow, ls_flow, up_flow


@click.group("serve", cls=HelpGroup)
def serve() -> None:
    """Served providers' pods: bring them up for a long session, list them, take them down."""


@serve.command("up")
@click.argument("providers", nargs=-1)
@pass_app
def up_cmd(app, providers: tuple[str, ...]) -> None:
    """Bring up the pods of the served providers (all of them by default) and leave them up."""
    with app.open_project(write=True) as config:
        up_flow(app.session(), config, ProjectPaths(app.project_dir).serves, providers)


@serve.command("ls")
@pass_app
def ls_cmd(app) -> None:
    """This project's serves, from their records (`pod ls` looks at the pods themselves)."""
    app.require_project()
    ls_flow(app.session(), ProjectPaths(app.project_dir).serves)


@serve.command("down")
@click.argument("names", nargs=-1)
@pass_app
def down_cmd(app, names: tuple[str, ...]) -> None:
    """Delete the pods of the serves of these providers (or serve IDs; all by default)."""
    with app.open_project(write=True) as config:
        down_flow(app.session(), config, ProjectPaths(app.project_dir).serves, names)
