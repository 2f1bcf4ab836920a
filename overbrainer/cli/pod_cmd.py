"""`overbrainer pod ls|rm|gpus|datacenters|volumes|ssh`: the Runpod pods of this project's runs
and the account's catalog. All of them print one JSON object with --json."""

from __future__ import annotations

import os

import click

from overbrainer.cli import complete
from overbrainer.cli.context import pass_app
from overbrainer.cli.help import HelpGroup
from overbrainer.jobs.homes import Homes
from overbrainer.runpod.commands import datacenters_flow, gpus_flow, ls_flow, rm_flow, ssh_argv, volumes_flow


@click.group("pod", cls=HelpGroup)
def pod() -> None:
    """Runpod pods: list, delete, the GPU catalog, the ssh line of a run's pod."""


@pod.command("ls", short_help="This project's pods and every overbrainer pod of the account.")
@pass_app
def ls_cmd(app) -> None:
    """Every pod of this project's runs and every overbrainer pod of the account (never deletes)."""
    with app.open_project(write=False) as config:
        ls_flow(app.session(config), Homes.of(app.project_dir))


@pod.command("rm")
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--force", is_flag=True, help="Delete even when the run is in progress or not in runs/.")
@pass_app
def rm_cmd(app, run_id: str, force: bool) -> None:
    """Delete the pods of a run and confirm each delete."""
    with app.open_project(write=True) as config:
        rm_flow(app.session(config), Homes.of(app.project_dir), run_id=run_id, force=force)


@pod.command("gpus")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True, help="GPUs per pod.")
@click.option("--min-vram", "min_vram", type=click.FloatRange(min=1), default=None, metavar="GB",
              help="Only types with at least this much memory per GPU, in GB.")
@click.option("--max-price", "max_price", type=click.FloatRange(min=0, min_open=True), default=None, metavar="USD",
              help="Only types whose Secure Cloud list price is at most this, in USD per GPU per hour.")
@click.option("--in-stock", "in_stock", is_flag=True, help="Only types in stock now.")
@click.option("--data-center", "data_center", default=None, metavar="ID",
              help="Only types this data center offers (with --in-stock: in stock there); "
                   "`pod datacenters` lists them.")
@pass_app
def gpus_cmd(app, count: int, min_vram, max_price, in_stock: bool, data_center) -> None:
    """Secure Cloud GPU types, cheapest first."""
    with app.open_project(write=False) as config:
        gpus_flow(app.session(config), count=count, min_vram=min_vram, max_price=max_price,
                  in_stock=in_stock, data_center=data_center)


@pod.command("datacenters")
@pass_app
def datacenters_cmd(app) -> None:
    """Runpod's data centers and the GPU types in stock in each."""
    with app.open_project(write=False) as config:
        datacenters_flow(app.session(config))


@pod.command("volumes")
@pass_app
def volumes_cmd(app) -> None:
    """The account's network volumes."""
    with app.open_project(write=False) as config:
        volumes_flow(app.session(config))


@pod.command("ssh", short_help="Print (or run) the ssh command line of a run's pod.")
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--exec", "do_exec", is_flag=True, help="Run ssh instead of printing its command line.")
@pass_app
def ssh_cmd(app, run_id: str, do_exec: bool) -> None:
    """Print (or run) the `ssh -F runs/<id>/ssh/config overbrainer-<id>` line of a run's pod."""
    app.require_project()
    argv, line = ssh_argv(Homes.of(app.project_dir), run_id)
    if do_exec:
        os.execvp(argv[0], argv)
    app.report(line, {"run": run_id, "command": line, "argv": argv})
