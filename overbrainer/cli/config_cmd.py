"""`overbrainer config check [--resolve]`: read-only, no lock."""

from __future__ import annotations

from typing import Any

import click

from overbrainer.cli.context import AppContext, pass_app
from overbrainer.cli.help import HelpGroup
from overbrainer.config import check as show
from overbrainer.config import prompt_files, ready
from overbrainer.dataset.quality import benchmarks
from overbrainer.errors import ConfigError, OverbrainerError, PersonMustAct
from overbrainer.llm import price_db


@click.group("config", cls=HelpGroup)
def config() -> None:
    """Show and check the resolved configuration."""


@config.command("check", short_help="Print the resolved configuration; --probe proves it works.")
@click.option("--resolve", is_flag=True,
              help="Also resolve every secret (literal or vault: reference) and say which failed.")
@click.option("--probe", is_flag=True,
              help="Also prove the setup works: each role's model listed and a 1-token chat answered with "
                   "its key; with [training], each target reached and running axolotl (Runpod: the key and "
                   "the GPU types).")
@pass_app
def check(app: AppContext, resolve: bool, probe: bool) -> None:
    """Print the resolved configuration, one `key = value` line per key (secrets as ***).

    Exits 2 when a role's provider has no URL, the parent cannot return the reasoning asked for
    or (--probe) a Runpod target asks for more GPUs a pod than its GPU type allows; 1 when a
    secret cannot be resolved or a probe fails (one line each, naming the provider or target
    and what to fix)."""
    if resolve or probe:
        app.start_work()  # a vault or a provider is asked: it may log (retries), take a while
    with app.open_project(write=False) as cfg:
        # What --json prints, built only then: the text lines say it all (start-up time).
        data = show.data(cfg, price_db.describe) if app.json_mode else {}
        if not app.json_mode:
            app.report(show.text(cfg, price_db.describe), data)
        failure = _resolve(app, cfg, data) if resolve else None
        refused: list[str] = []
        if probe:
            probe_failure, refused = _probe(app, cfg, data)
            failure = probe_failure or failure
        problems = ready.problems(cfg) + _unpriced(cfg) + _prompt_problems(app.project_dir) + refused
        if cfg.pipeline.decontaminate:
            problems += benchmarks.problems(app.project_dir, cfg.pipeline.decontaminate)
        data["problems"] = problems
        if app.json_mode:
            app.report(show.text(cfg, price_db.describe), data)
        if len(problems) == 1:
            raise ConfigError(problems[0])
        if problems:
            raise ConfigError("the configuration cannot run yet", problems)
        if failure is not None:
            raise failure


def _prompt_problems(root) -> list[str]:
    """One problem per prompt override that cannot be used (config/templates.problems)."""
    if not prompt_files.overrides(root):
        return []
    from overbrainer.config.templates import problems  # lazy: Jinja2, for a project's own prompts only

    return problems(root)


def _unpriced(cfg) -> list[str]:
    """Under a spend cap, the roles `run` sends with that can have no price: `run` would refuse."""
    if cfg.pipeline.max_cost_usd is None:
        return []
    return price_db.refusals([(f"roles.{name}", role, cfg.providers[role.provider])
                              for name, role in cfg.roles.all()
                              if name in ("generator", "parent", "grader") and role.provider in cfg.providers])


def _resolve(app: AppContext, cfg, data: dict) -> OverbrainerError | None:
    """Resolve every secret (stopping at the first failure, which is returned)."""
    resolved: list[str] = []
    failure: OverbrainerError | None = None
    secrets = cfg.secrets()
    for key, secret in secrets:
        try:
            secret.resolve()
        except OverbrainerError as e:
            kind = next(k for k in (ConfigError, PersonMustAct, OverbrainerError) if isinstance(e, k))
            failure = kind(f"cannot resolve {key}: {e}")
            data["failed"] = {"key": key, "error": str(e)}
            break
        resolved.append(key)
        if not app.json_mode:
            app.report(f"{key}: resolved", {"resolved": key})
    data["resolved"] = resolved
    if not secrets and not app.json_mode:
        app.report("no secret is set", {"resolved": []})
    return failure


def _probe(app: AppContext, cfg, data: dict) -> tuple[OverbrainerError | None, list[str]]:
    """The probes' failure (None: none failed) and the shapes Runpod refuses (configuration
    problems: exit 2, one line each naming the key)."""
    # lazy: --probe only: the HTTP and SSH stacks
    from overbrainer.checks.probe import probe, probe_targets

    results = probe(cfg)
    targets = probe_targets(cfg)
    data["probe"] = [r.to_dict() for r in results]
    data["probe_targets"] = [t.to_dict() for t in targets]
    if not app.json_mode:
        both: list[Any] = [*results, *targets]  # two kinds, each with line() and to_dict()
        for r in both:
            app.report(r.line(), r.to_dict())
        if cfg.training is None:
            app.report("probe targets: none probed (no [training] section)", {"probe_targets": []})
    refused = [t.detail for t in targets if t.refused]
    failed = [r.role for r in results if not r.ok] + [f"target {t.target}" for t in targets
                                                      if not t.ok and not t.refused]
    if failed:
        # A refused key or spent credit among the failures: a person must act, whatever else failed.
        act = any(not r.ok and r.act for r in results) or any(not t.ok and t.act for t in targets)
        kind = PersonMustAct if act else OverbrainerError
        return kind(f"probe failed for {', '.join(failed)}: see the lines above"), refused
    return None, refused
