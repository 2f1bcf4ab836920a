"""The model card (`README.md` of the pushed repo), rendered from `CardFacts` only.

Layout: YAML front matter; the title and one sentence; `## Use it`; `## How it was made` (what
the data kept, a table of facts, the topics, the GPU line); `## Benchmarks` (the newest
`overbrainer eval`, hub/card_eval.py, when there is one); `## Reproduce` (the allowlisted TOML
excerpt); a footer and, as the last line, `MARKER`, by which a later push knows the card is its
own and may replace it. Prose is one line with `<` and `>` as entities; `|` is escaped in table
cells.
"""

from __future__ import annotations

import re

from overbrainer.hub.card_eval import eval_section
from overbrainer.hub.card_facts import CardFacts
from overbrainer.support.fmt import duration

MARKER = "<!-- overbrainer:card -->"
_PLAIN_YAML = re.compile(r"^[A-Za-z][A-Za-z0-9._/-]*\Z")
_AMBIGUOUS = {"yes", "no", "on", "off", "true", "false", "null", "none", "y", "n", "~"}


def prose(text: object) -> str:
    s = " ".join(str(text).split())
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cell(text: object) -> str:
    return prose(text).replace("|", "\\|")


def _numeric(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def yaml_scalar(text: str) -> str:
    """A YAML scalar, quoted when a plain one would be read as something else (`no`, `1.0`, …)."""
    if _PLAIN_YAML.match(text) and text.lower() not in _AMBIGUOUS and not _numeric(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _adapter_word(f: CardFacts) -> str:
    return {"lora": "LoRA", "qlora": "QLoRA"}.get(f.adapter or "", "none (full fine-tune)")


def _front_matter(f: CardFacts) -> list[str]:
    lines = ["---"]
    if f.base_model and f.base_is_hub:
        lines += [f"base_model: {yaml_scalar(f.base_model)}",
                  f"base_model_relation: {'adapter' if f.adapter else 'finetune'}"]
    lines.append(f"library_name: {'peft' if f.adapter else 'transformers'}")
    if f.license:
        lines.append(f"license: {yaml_scalar(f.license)}")
    lines += ["pipeline_tag: text-generation", "tags:", "- overbrainer", "- distillation"]
    if f.gguf_types:
        lines.append("- gguf")
    return lines + ["---", ""]


def _use_it(f: CardFacts) -> list[str]:
    lines = ["## Use it", ""]
    if f.gguf_types:
        tag = "Q4_K_M" if "Q4_K_M" in f.gguf_types else f.gguf_types[0]
        return lines + ["```sh", f"ollama run hf.co/{f.repo}:{tag}", f"llama-cli -hf {f.repo}:{tag}", "```", ""]
    lines.append("```python")
    if f.adapter:
        lines += ["from peft import AutoPeftModelForCausalLM", "from transformers import AutoTokenizer", "",
                  f'model = AutoPeftModelForCausalLM.from_pretrained("{f.repo}")',
                  f'tokenizer = AutoTokenizer.from_pretrained("{f.base_model or f.repo}")']
    else:
        lines += ["from transformers import AutoModelForCausalLM, AutoTokenizer", "",
                  f'model = AutoModelForCausalLM.from_pretrained("{f.repo}")',
                  f'tokenizer = AutoTokenizer.from_pretrained("{f.repo}")']
    return lines + ["```", ""]


def _num(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _table(f: CardFacts) -> list[str]:
    rows: list[tuple[str, str]] = []
    for label, value in (("Parent", f.parent), ("Generator", f.generator), ("Judge", f.judge),
                         ("Base model", f.base_model)):
        if value:
            rows.append((label, value))
    rows.append(("Adapter", _adapter_word(f)))
    if f.train_count is not None:
        rows.append(("Examples", f"{f.train_count} train, {f.eval_count or 0} eval"))
    for label, value in (("Epochs", f.epochs), ("Learning rate", f.learning_rate),
                         ("Sequence length", f.sequence_len)):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append((label, _num(value)))
    losses = [f"{v:.2f} {name}" for v, name in ((f.train_loss, "train"), (f.eval_loss, "eval")) if v is not None]
    if losses:
        rows.append(("Final loss", ", ".join(losses)))
    if f.training_secs is not None:
        rows.append(("Training time", duration(f.training_secs, words=True)))
    if f.decontamination is not None:
        rows.append(("Decontamination", decontamination_text(f.decontamination)))
    return ["| | |", "|---|---|"] + [f"| {cell(k)} | {cell(v)} |" for k, v in rows]


def decontamination_text(d: dict) -> str:
    """`13-gram overlap with the eval split, gsm8k_test.jsonl: 3 examples left out (eval 1,
    gsm8k_test.jsonl 2)`, or `none` when nothing was checked."""
    against = (["the eval split"] if d["eval"] else []) + list(d["benchmarks"])
    if not against:
        return "none"
    n = sum(d["contaminated"].values())
    left = f"{n} example{'' if n == 1 else 's'} left out"
    if n:
        left += " (" + ", ".join(f"{k} {v}" for k, v in d["contaminated"].items()) + ")"
    return f"{d['ngram']}-gram overlap with {', '.join(against)}: {left}"


def render(f: CardFacts) -> str:
    lines = _front_matter(f)
    lines += [f"# {prose(f.repo)}", "",
              "[![made with overbrainer](https://img.shields.io/badge/made%20with-overbrainer-blue)]"
              "(https://pypi.org/project/overbrainer/)", ""]
    how = f"fine-tuned ({_adapter_word(f)})" if f.adapter else "fully fine-tuned"
    count = f"{f.train_count} questions" if f.train_count is not None else "questions"
    base, parent = f.base_model or "A base model", f.parent or "a parent model"
    lines += [prose(f"{base} {how} on {count} answered by {parent}."), ""]
    lines += _use_it(f)
    lines += ["## How it was made", "",
              prose(f"Distilled with overbrainer {f.version} (run {f.run_id}). "
                    f"Kept from the parent: {f.kept}."), ""]
    lines += _table(f) + [""]
    if f.topics:
        lines += ["Topics:", ""]
        lines += [f"- {prose(name)}" + (f": {prose(desc)}" if desc else "") for name, desc in f.topics]
        lines.append("")
    if f.gpu:
        spend = f", about ${f.spend:.2f}" if f.spend is not None else ""
        lines += [prose(f"Trained on a Runpod {f.gpu}{spend}."), ""]
    lines += eval_section(f.evals, cell)
    lines += ["## Reproduce", "", "```sh", "pip install overbrainer", "```", "", "`overbrainer.toml` (excerpt):",
              "", "```toml", f.reproduce.rstrip("\n").replace("```", "'''"), "```", ""]
    lines += ["---", "", prose(f"Card written by overbrainer {f.version}."), MARKER]
    return "\n".join(lines) + "\n"


def is_ours(text: str) -> bool:
    """Whether a README.md was written by overbrainer (a later push may replace it)."""
    return MARKER in text
