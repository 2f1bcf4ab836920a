"""`overbrainer init [DIR]`: create a project. Never overwrites, never asks."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from overbrainer.cli.context import AppContext, pass_app
from overbrainer.config.init import init_project


@click.command("init")
@click.argument("directory", metavar="[DIR]", required=False, type=click.Path(file_okay=False))
@pass_app
def init(app: AppContext, directory: str | None) -> None:
    """Create a project in DIR (default: the -C directory): overbrainer.toml, .env.example,
    prompts/, .gitignore and .overbrainer/version. Refuses when a file already exists."""
    target = Path(directory) if directory else app.project_dir
    result = init_project(target)
    lines = [f"created {target / rel}" for rel in result.created]
    if result.gitignore != "unchanged":
        lines.append(f"{result.gitignore} {target / '.gitignore'}")
    # The README's way first (export the variables), .env as the other; the command is shell-quoted.
    lines.append(f"next: export OVERBRAINER_PROVIDERS__LLM__BASE_URL (and __API_KEY for a hosted provider), or "
                 f"set them in {target / '.env'} ({target / '.env.example'} lists them), "
                 f"then run `overbrainer -C {shlex.quote(str(target))} config check`")
    app.report("\n".join(lines), {
        "project_dir": str(target),
        "created": [str(target / rel) for rel in result.created],
        "gitignore": result.gitignore,
    })
