"""The dataset card (`README.md` of a `push --dataset` repo): what it may show, read by name from
the project's own files and settings (an allowlist, like the model card's in card.py), and its text.

What it shows (`DatasetFacts`, `gather`):
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

Layout (`render`): YAML front matter the Hub reads (`license` when set, `task_categories`, `tags`,
`size_categories`, and `configs`, which names each split's Parquet file for the dataset viewer
and `load_dataset`); the title and one sentence; `## Use it`; `## How it was made` (a table of
the models, counts, drops, cost and license; the topics; the prompts' hashes); the same footer
and last line (`card.MARKER`) as the model card, by which a later push knows the card is its own.
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
from overbrainer.hub.card import MARKER, cell, decontamination_text, front_matter, model_name, prose
from overbrainer.hub.parquet import SplitFile

log = logging.getLogger(__name__)


# --- the facts ---------------------------------------------------------------------------------

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


# --- the text ----------------------------------------------------------------------------------

# The Hub's size_categories, by upper bound (exclusive) of the number of examples.
SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
         (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"))
COLUMNS = ("`id`, `topic`, `subtopic`, `messages` (a list of `role`, `content` and, where the parent "
           "showed it, `reasoning_content`) and `meta` (`model`, `input_tokens`, `output_tokens`, "
           "`finish_reason`, `reasoning_kind`, `excluded`)")


def size_category(n: int) -> str:
    return next((name for bound, name in SIZES if n < bound), "n>1B")


def _metadata(f: DatasetFacts) -> dict[str, Any]:
    data: dict[str, Any] = {"license": f.license} if f.license else {}
    data.update(task_categories=["text-generation"], tags=["overbrainer", "distillation", "synthetic"],
                size_categories=[size_category(f.train.rows + f.eval.rows)],
                configs=[{"config_name": "default",
                          "data_files": [{"split": split, "path": path} for split, path in f.files.items()]}])
    return data


def counts_text(counts: dict[str, int]) -> str:
    """`3 (language 1, length 1, format 1)`, or `0`."""
    n = sum(counts.values())
    return f"{n} (" + ", ".join(f"{k} {v}" for k, v in counts.items() if v) + ")" if n else "0"


def _table(f: DatasetFacts) -> list[str]:
    rows = [(label, value) for label, value in (("Generator", f.generator), ("Parent", f.parent),
                                                ("Grader", f.grader)) if value]
    rows.append(("Examples", f"{f.train.rows} train, {f.eval.rows} eval"))
    if f.split is not None:
        rows += [("Excluded (unusable answers)", counts_text(f.split["excluded"])),
                 ("Left out by the quality gate", counts_text(f.split["gated"])),
                 ("Orphaned (topic or question no longer configured)", str(f.split["orphaned"]))]
    else:
        rows.append(("Left out", "unknown (the data files changed since the last split)"))
    if f.decontamination is not None:
        rows.append(("Decontamination", decontamination_text(f.decontamination)))
    rows.append(("Cost", f"{f.cost} (tokens {f.tokens[0]} in, {f.tokens[1]} out, every stage)"))
    if f.kept:
        rows.append(("Kept", f.kept))
    rows.append(("License", f.license or "not set"))
    return ["| | |", "|---|---|"] + [f"| {cell(k)} | {cell(v)} |" for k, v in rows]


def _topics(f: DatasetFacts) -> list[str]:
    if not f.topics:
        return []
    lines = ["Topics:", ""]
    for name, desc in f.topics:
        n = f"{f.train.topics.get(name, 0)} train, {f.eval.topics.get(name, 0)} eval"
        lines.append(f"- {prose(name)} ({n})" + (f": {prose(desc)}" if desc else ""))
    return lines + [""]


def _prompts(f: DatasetFacts) -> list[str]:
    if not f.prompts:
        return []
    lines = ["Prompt templates (SHA-256 of each one's text when the dataset was pushed):", "",
             "| Template | Source | SHA-256 |", "|---|---|---|"]
    lines += [f"| {cell(name)} | {cell(origin)} | `{digest}` |" for name, origin, digest in f.prompts]
    return lines + [""]


def render(f: DatasetFacts) -> str:
    lines = front_matter(_metadata(f))
    lines += [f"# {prose(f.repo)}", "",
              "[![made with overbrainer](https://img.shields.io/badge/made%20with-overbrainer-blue)]"
              "(https://pypi.org/project/overbrainer/)", ""]
    kept = "answers and reasoning" if (f.train.reasoning or f.eval.reasoning) else "answers"
    by = f" by {f.parent}" if f.parent else ""
    lines += [prose(f"Questions on {len(f.topics)} topic{'' if len(f.topics) == 1 else 's'}, {kept}{by}: "
                    f"{f.train.rows} train and {f.eval.rows} eval examples in chat format, for distillation."), ""]
    lines += ["## Use it", "", "```python", "from datasets import load_dataset", "",
              f'dataset = load_dataset("{f.repo}")', "```", "",
              prose("Splits: " + ", ".join(f"{s} ({p})" for s, p in f.files.items()) + ".") + " Columns: "
              + COLUMNS + ".", ""]
    lines += ["## How it was made", "", prose(f"Made with overbrainer {f.version}."), ""]
    lines += _table(f) + [""] + _topics(f) + _prompts(f)
    lines += ["---", "", prose(f"Card written by overbrainer {f.version}."), MARKER]
    return "\n".join(lines) + "\n"
