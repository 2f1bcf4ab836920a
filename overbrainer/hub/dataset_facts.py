"""The facts a dataset card may show (`push --dataset`), read by name from the project's own
files and settings, like the model card's (card_facts.py): an allowlist.

- models: the generator's, the parent's and the grader's model names (a local path cut to its
  last component), never their providers, keys or URLs;
- prompts: the SHA-256 of each template the dataset was made with (subtopics, questions,
  answer_system, and grader when `roles.grader` is set), as they are now, and where each comes
  from (`prompts/<name>.txt` or `built-in`);
- counts: the examples in the Parquet files written (per split and per topic); what the split
  that wrote data/train.jsonl and data/eval.jsonl left out (.overbrainer/split.json, when those
  files are still the ones it wrote): excluded by kind, gated by reason (data/gate.jsonl's
  verdicts), contaminated by source (benchmark paths cut to file names), orphaned;
- cost: the total of .overbrainer/history.jsonl (every stage, as `overbrainer history` sums it),
  and the kept share of the output tokens paid for (dataset/accounting/history.kept_share);
- license: `[hub] dataset_license`.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer.config.templates import load_templates
from overbrainer.dataset import state
from overbrainer.dataset.accounting.history import kept_share, read_history, totals
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError
from overbrainer.hub.card_rules import model_name
from overbrainer.hub.parquet import SplitFile

log = logging.getLogger(__name__)

TEMPLATES = ("subtopics", "questions", "answer_system")


@dataclass
class DatasetFacts:
    repo: str
    version: str
    train: SplitFile
    eval: SplitFile
    files: dict[str, str] = field(default_factory=dict)  # split -> repo path (a split without rows has none)
    generator: str | None = None
    parent: str | None = None
    grader: str | None = None
    license: str | None = None
    topics: list[tuple[str, str | None]] = field(default_factory=list)
    prompts: list[tuple[str, str, str]] = field(default_factory=list)  # (name, origin, sha256)
    split: dict | None = None  # {"excluded", "gated", "contaminated", "orphaned"}; None: unknown
    decontamination: dict | None = None  # {"ngram", "eval", "benchmarks": [names], "contaminated"}
    cost: str = "cost unknown"  # `$0.0123`, `$0.0123+` (some prices unknown), `cost unknown`
    tokens: tuple[int, int] = (0, 0)  # input, output of every stage
    kept: str | None = None  # the kept share (accounting/history.kept_share): `N of M paid output tokens (x%) are in …`


def names(counts: Any) -> dict[str, int]:
    """A {source: n} map with each source (a benchmark path, or `eval`) cut to its file name."""
    out: dict[str, int] = {}
    for k, v in dict(counts or {}).items():
        name = Path(str(k)).name
        out[name] = out.get(name, 0) + int(v)
    return out


def prompts(project_dir: Path, config: Any) -> list[tuple[str, str, str]]:
    """(name, origin, SHA-256 of its text) of each template the dataset's stages use."""
    wanted = TEMPLATES + (("grader",) if config.roles.grader is not None else ())
    try:
        templates = load_templates(project_dir, wanted)
    except OverbrainerError as e:
        log.warning("push: card without the prompts' hashes: %s", e)
        return []
    return [(n, templates.origin(n), hashlib.sha256(templates.source(n).encode("utf-8")).hexdigest())
            for n in wanted]


def split_counts(paths: ProjectPaths) -> dict | None:
    """What the split that wrote the current train and eval files left out; None when unknown."""
    data = state.last_split(paths)
    try:
        result = data["result"]  # type: ignore[index]
        return {"excluded": {str(k): int(v) for k, v in result["excluded"].items()},
                "gated": {str(k): int(v) for k, v in result["gated"].items()},
                "contaminated": names(result["contaminated"]), "orphaned": int(result["orphaned"])}
    except (TypeError, KeyError, ValueError, AttributeError):
        log.warning("push: card without the split's exclusions: data/train.jsonl and data/eval.jsonl "
                    "changed since the last split (run `overbrainer split`)")
        return None


def decontamination(paths: ProjectPaths) -> dict | None:
    d = state.decontamination_facts(paths)
    if d is None:
        return None
    return {**d, "benchmarks": [Path(b).name for b in d["benchmarks"]], "contaminated": names(d["contaminated"])}


def gather(config: Any, project_dir: Path, repo: str, version: str, train: SplitFile, eval_: SplitFile,
           files: dict[str, str]) -> DatasetFacts:
    paths = ProjectPaths(project_dir)
    facts = DatasetFacts(repo=repo, version=version, train=train, eval=eval_, files=files,
                         license=config.hub.dataset_license)
    for name in ("generator", "parent", "grader"):
        role = getattr(config.roles, name, None)
        setattr(facts, name, model_name(role.model) if role is not None else None)
    facts.topics = [(t.name, t.description) for t in config.topics]
    facts.prompts = prompts(project_dir, config)
    facts.split = split_counts(paths)
    facts.decontamination = decontamination(paths)
    entries = read_history(project_dir)
    _, total = totals(entries)
    facts.cost, facts.tokens = str(total.cost), (total.input_tokens, total.output_tokens)
    share = kept_share(entries)
    facts.kept = share.text() if share is not None else None
    return facts
