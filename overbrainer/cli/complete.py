"""Dynamic shell completion (click's `_OVERBRAINER_COMPLETE=<shell>_source`): run IDs, topic
names and target names, read from the project named by -C (else `.`). Never prints anything;
an unreadable project gives no candidates."""

from __future__ import annotations

import tomllib
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError
from overbrainer.jobs.run_record import RUN_JSON


def _project(ctx: click.Context) -> Path:
    return Path(ctx.find_root().params.get("project_dir") or ".")


def _toml(ctx: click.Context) -> dict:
    try:
        with open(_project(ctx) / "overbrainer.toml", "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def run_ids(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Run IDs from runs/*/run.json, with "<state>, <target>" as help, oldest first."""
    items = []
    try:
        dirs = sorted(ProjectPaths(_project(ctx)).runs.iterdir())
    except OSError:
        return []
    for d in dirs:
        if d.name.startswith(".") or not d.name.startswith(incomplete):
            continue
        try:
            record = RUN_JSON.read(d / "run.json")
        except (OverbrainerError, OSError):
            continue
        help_text = f"{record.get('state', '?')}, {record.get('target', '?')}"
        items.append((record.get("created", ""), CompletionItem(d.name, help=help_text)))
    return [item for _, item in sorted(items, key=lambda pair: (str(pair[0]), pair[1].value))]


def topics(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    names = [t.get("name") for t in _toml(ctx).get("topics", []) if isinstance(t, dict)]
    return [CompletionItem(n) for n in names if isinstance(n, str) and n.startswith(incomplete)]


def targets(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    table = _toml(ctx).get("targets", {})
    if not isinstance(table, dict):
        return []
    return [CompletionItem(n, help=str(t.get("kind", "")) if isinstance(t, dict) else None)
            for n, t in table.items() if n.startswith(incomplete)]
