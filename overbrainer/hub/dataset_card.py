"""The dataset card (`README.md` of a `push --dataset` repo), rendered from `DatasetFacts` only.

Layout: YAML front matter the Hub reads (`license` when set, `task_categories`, `tags`,
`size_categories`, and `configs`, which names each split's Parquet file for the dataset viewer
and `load_dataset`); the title and one sentence; `## Use it`; `## How it was made` (a table of
the models, counts, drops, cost and license; the topics; the prompts' hashes); the same footer
and last line (`card.MARKER`) as the model card, by which a later push knows the card is its own.
"""

from __future__ import annotations

from overbrainer.hub.card import MARKER, cell, decontamination_text, prose, yaml_scalar
from overbrainer.hub.dataset_facts import DatasetFacts

# The Hub's size_categories, by upper bound (exclusive) of the number of examples.
SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
         (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"))
COLUMNS = ("`id`, `topic`, `subtopic`, `messages` (a list of `role`, `content` and, where the parent "
           "showed it, `reasoning_content`) and `meta` (`model`, `input_tokens`, `output_tokens`, "
           "`finish_reason`, `reasoning_kind`, `excluded`)")


def size_category(n: int) -> str:
    return next((name for bound, name in SIZES if n < bound), "n>1B")


def _front_matter(f: DatasetFacts) -> list[str]:
    lines = ["---"]
    if f.license:
        lines.append(f"license: {yaml_scalar(f.license)}")
    lines += ["task_categories:", "- text-generation", "tags:", "- overbrainer", "- distillation", "- synthetic",
              "size_categories:", f"- {yaml_scalar(size_category(f.train.rows + f.eval.rows))}",
              "configs:", "- config_name: default", "  data_files:"]
    for split, path in f.files.items():
        lines += [f"  - split: {split}", f"    path: {yaml_scalar(path)}"]
    return lines + ["---", ""]


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
    lines = _front_matter(f)
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
