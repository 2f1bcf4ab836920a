"""What the Project view shows: the resolved configuration with each value's origin, the
dataset's counts, and what was spent per stage and model (`history`) and on pods.

Origins: `env` (an `OVERBRAINER_*` variable of the shell; `.env` when the project's `.env` set
it; the variable is named), `file` (overbrainer.toml), `default`, and `guessed` (a provider's
dialect guessed from its URL). Secrets show as `set` or `unset`, never their value; URLs lose
their credentials and query (as in `config check`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

from overbrainer.config import envmap
from overbrainer.config.check import show_url
from overbrainer.config.read import read_toml, require_project
from overbrainer.dataset.accounting.history import Total, read_history, totals
from overbrainer.dataset.accounting.stages import STAGES
from overbrainer.dataset.accounting.stats import dataset_stats
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.jobs.records import project_costs

SECRET_KEYS = ("api_key", "hf_token")
URL_KEYS = ("base_url",)
# Fields that restate another (metrics' host and port come from listen) or are bookkeeping.
SKIPPED = frozenset({"name", "dialect_guessed", "host_port", "warnings", "log"})


@dataclass(frozen=True)
class Row:
    key: str  # dotted: pipeline.concurrency
    value: str
    origin: str  # env OVERBRAINER_… | .env OVERBRAINER_… | file | default | guessed


@dataclass(frozen=True)
class SpendRow:
    stage: str
    model: str
    runs: int
    input_tokens: int
    output_tokens: int
    cost: str


def _fmt(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def _lookup(tree: Any, parts: list[str]) -> bool:
    for part in parts:
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


class Origins:
    """Where a dotted key's value came from: the environment laid over the file, else the file."""

    def __init__(self, file_data: Mapping[str, Any], environ: Mapping[str, str], dotenv_keys: Iterable[str] = ()):
        self.file = file_data
        self.env = envmap.overlay(environ, [])
        self.dotenv = set(dotenv_keys)

    def of(self, dotted: str) -> str:
        parts = dotted.split(".")
        if _lookup(self.env, parts):
            var = envmap.env_var_for(dotted)
            return f"{'.env' if var in self.dotenv else 'env'} {var}"
        if _lookup(self.file, parts):
            return "file"
        return "default"


def _value(key: str, value: Any) -> str:
    last = key.rsplit(".", 1)[-1]
    if last in SECRET_KEYS:
        return "set" if value is not None else "unset"
    if last in URL_KEYS:
        return _fmt(show_url(value))
    if isinstance(value, dict):  # axolotl_extra: its keys only (a value may be anything)
        return ", ".join(sorted(value)) or "(none)"
    return _fmt(value)


def _fields(prefix: str, obj: Any, origins: Origins) -> list[Row]:
    rows = []
    for f in fields(obj):
        if f.name in SKIPPED or (prefix == "metrics" and f.name in ("host", "port")):
            continue
        key = f"{prefix}.{f.name}"
        value = getattr(obj, f.name)
        origin = origins.of(key)
        if f.name == "dialect" and getattr(obj, "dialect_guessed", False):
            origin = "guessed"
        rows.append(Row(key, _value(key, value), origin))
    return rows


def config_rows(config: Any, origins: Origins) -> list[Row]:
    """One row per key of the resolved configuration, in the order of `config check`."""
    rows = [Row("project.name", config.project.name, origins.of("project.name"))]
    for t in config.topics:
        rows.append(Row(f"topics.{t.name}", f"{t.subtopics} subtopics x {t.questions_per_subtopic} questions",
                        "file"))
    for name, provider in config.providers.items():
        rows += _fields(f"providers.{name}", provider, origins)
    for name, role in config.roles.all():
        rows += _fields(f"roles.{name}", role, origins)
    rows += _fields("pipeline", config.pipeline, origins)
    if config.training is not None:
        rows += _fields("training", config.training, origins)
    for name, target in config.targets.items():
        rows += _fields(f"targets.{name}", target, origins)
    for section in ("runpod", "export", "hub", "compare", "metrics"):
        rows += _fields(section, getattr(config, section), origins)
    rows.append(Row("hf_token", _value("hf_token", config.hf_token), origins.of("hf_token")))
    return rows


def spend_rows(entries: list) -> list[SpendRow]:
    """What `history` recorded, per stage (in stage order) and model, then per stage and in all."""
    per: dict[tuple[str, str], Total] = {}
    for e in entries:
        per.setdefault((e.stage, e.model or "-"), Total()).add(e)
    order = {s: i for i, s in enumerate(STAGES)}
    rows = [SpendRow(stage, model, t.runs, t.input_tokens, t.output_tokens, str(t.cost))
            for (stage, model), t in sorted(per.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1]))]
    _, total = totals(entries)
    if entries:
        rows.append(SpendRow("total", "", total.runs, total.input_tokens, total.output_tokens, str(total.cost)))
    return rows


@dataclass
class ProjectFacts:
    rows: list[Row]
    dataset: list[str]  # `dataset stats` lines
    spend: list[SpendRow]
    pods: str | None  # what the project's pods cost (`history`'s pod line)


def gather(project_dir: Path, config: Any, environ: Mapping[str, str], dotenv_keys: Iterable[str] = ()) -> ProjectFacts:
    """Everything the Project view shows, read now (reads only: no lock needed)."""
    origins = Origins(read_toml(require_project(project_dir)), environ, dotenv_keys)
    stats = dataset_stats(project_dir, list(config.topics))
    pods = project_costs(ProjectPaths(project_dir).runs)
    return ProjectFacts(config_rows(config, origins), stats.lines(), spend_rows(read_history(project_dir)),
                        pods[0] if pods else None)
