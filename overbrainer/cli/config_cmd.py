"""`overbrainer config check [--resolve]`: read-only, no lock."""

from __future__ import annotations

import click

from overbrainer.cli.context import AppContext, pass_app
from overbrainer.errors import OverbrainerError


@click.group("config")
def config() -> None:
    """Show and check the resolved configuration."""


@config.command("check")
@click.option("--resolve", is_flag=True,
              help="Also resolve every secret (literal or vault: reference) and say which failed.")
@pass_app
def check(app: AppContext, resolve: bool) -> None:
    """Print the resolved configuration, one `key = value` line per key (secrets as ***)."""
    from overbrainer.config import check as show

    with app.open_project(write=False) as cfg:
        data = show.data(cfg)
        if not app.json_mode:
            app.report(show.text(cfg), data)
        if not resolve:
            if app.json_mode:
                app.report(show.text(cfg), data)
            return
        resolved: list[str] = []
        failure: OverbrainerError | None = None
        secrets = cfg.secrets()
        for key, secret in secrets:
            try:
                secret.resolve()
            except OverbrainerError as e:
                failure = OverbrainerError(f"cannot resolve {key}: {e}")
                data["failed"] = {"key": key, "error": str(e)}
                break
            resolved.append(key)
            if not app.json_mode:
                app.report(f"{key}: resolved", {"resolved": key})
        data["resolved"] = resolved
        if app.json_mode:
            app.report(show.text(cfg), data)
        elif not secrets:
            app.report("no secret is set", {"resolved": []})
        if failure is not None:
            raise failure
