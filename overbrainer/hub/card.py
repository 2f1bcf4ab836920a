"""The model card (`README.md` of the pushed repo): what it may show, read from the run's own
files and the settings, and its text.

What it may show is an allowlist: each fact is read by name into `CardFacts` (`gather`), and the
card renders nothing else. Keys, hosts, URLs, provider names and target names are never read; a
Hub model ID is shown as it is, a local path (a base model on disk) cut to its last component,
and no setting whose key could carry a secret, a host or a path (`secretish`). An unreadable value
drops its row, with a warning. The newest `overbrainer eval` (`runs/<run>/evals/*/eval.json`, the
newest by `created`) gives the Benchmarks section: only the eval's ID, lm-eval's version, the limit
and seed, and per task its name, metric, the child's and parent's scores, the ratio with its 95 %
interval and the number of samples are read (an unreadable eval.json is skipped with a warning).

The Reproduce section's `overbrainer.toml` excerpt (`reproduce`, written by tomli_w) keeps the
topics, the model of each role (not its provider), `[training]` without `target` and
`hub_model_id` (a local base model cut to its last component, `axolotl_extra` without keys that
could carry a secret, host or path), and `[pipeline]`. Never: providers, targets, runpod, hub,
keys, hosts, URLs. The front matter is written by PyYAML (`front_matter`).

Layout (`render`): YAML front matter; the title and one sentence; `## Use it`; `## How it was
made` (what the data kept, a table of facts, the topics, the GPU line); `## Benchmarks` (when
there is an eval); `## Reproduce` (the excerpt); a footer and, as the last line, `MARKER`, by
which a later push knows the card is its own and may replace it. Prose is one line with `<` and
`>` as entities; `|` is escaped in table cells. The dataset card (dataset_card.py) shares the
front matter, the prose rules and the footer.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w
import yaml

from overbrainer.config.model import Config
from overbrainer.errors import OverbrainerError
from overbrainer.jobs.run_record import EVAL_JSON, EVALS
from overbrainer.runpod.pod_record import PodRecord
from overbrainer.support.fmt import duration
from overbrainer.train.metrics import summarize_file

log = logging.getLogger(__name__)


# --- what a card may name ----------------------------------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# axolotl_extra keys and values that could carry a secret, a host or a path are left out.
_SECRETISH = re.compile(r"token|key|secret|passw|auth|cred|url|host|endpoint|path|dir|wandb|mlflow|hub|push",
                        re.IGNORECASE)


def is_hub_id(name: str | None) -> bool:
    return bool(name) and bool(_HUB_ID.match(name or "")) and not os.path.exists(name or "")


def model_name(name: str | None) -> str | None:
    """A Hub ID as it is; a local path cut to its last component."""
    if not name:
        return None
    if is_hub_id(name):
        return name
    return Path(name.rstrip("/\\")).name or None


def secretish(key: str) -> bool:
    return bool(_SECRETISH.search(key))


# --- the facts ---------------------------------------------------------------------------------

@dataclass
class CardFacts:
    repo: str
    run_id: str
    version: str
    base_model: str | None = None  # a Hub ID, or the last component of a local path
    base_is_hub: bool = False
    adapter: str | None = None  # lora | qlora | None (full fine-tune)
    epochs: Any = None
    learning_rate: Any = None
    sequence_len: Any = None
    train_count: int | None = None
    eval_count: int | None = None
    kept: str = "unknown"  # answers and reasoning | answers only | unknown
    train_loss: float | None = None
    eval_loss: float | None = None
    training_secs: float | None = None
    gguf_types: list[str] = field(default_factory=list)
    gpu: str | None = None
    spend: float | None = None
    parent: str | None = None
    generator: str | None = None
    judge: str | None = None
    topics: list[tuple[str, str | None]] = field(default_factory=list)
    license: str | None = None
    reproduce: str = ""
    decontamination: dict | None = None  # {"ngram", "eval", "benchmarks": [file names], "contaminated"}
    evals: dict | None = None  # the newest `overbrainer eval` (eval_facts)


def axolotl_settings(run_dir: Path) -> dict:
    path = run_dir / "axolotl.yaml"
    try:
        data = yaml.safe_load(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, ImportError) as e:
        log.warning("push: card without the training settings: cannot read %s (%s)", path.name, type(e).__name__)
        return {}
    except Exception as e:  # noqa: BLE001 - a YAML error: the card drops the rows
        log.warning("push: card without the training settings: %s is not valid YAML (%s)", path.name,
                    type(e).__name__)
        return {}


def _count(path: Path) -> tuple[int | None, bool]:
    """(records in a JSONL file, whether any assistant turn carries reasoning)."""
    try:
        n, reasoning = 0, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                n += 1
                if not reasoning and '"reasoning_content"' in line:
                    record = json.loads(line)
                    reasoning = any(m.get("reasoning_content") for m in record.get("messages", [])
                                    if isinstance(m, dict))
        return n, reasoning
    except FileNotFoundError:
        return None, False
    except (OSError, ValueError) as e:
        log.warning("push: card without the %s count (%s)", path.stem, type(e).__name__)
        return None, False


def _decontamination(path: Path) -> dict | None:
    """The run's data/decontamination.json (runs/prepare.py), benchmark paths cut to their file
    names; None when absent or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        contaminated: dict[str, int] = {}
        for k, v in data["contaminated"].items():
            name = Path(str(k)).name
            contaminated[name] = contaminated.get(name, 0) + int(v)
        return {"ngram": int(data["ngram"]), "eval": bool(data["eval"]),
                "benchmarks": [Path(str(b)).name for b in data["benchmarks"]], "contaminated": contaminated}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        log.warning("push: card without the decontamination (%s)", type(e).__name__)
        return None


def _metrics(path: Path) -> tuple[float | None, float | None, float | None]:
    """(final train loss, final eval loss, seconds from the first to the last plugin line), read
    the way every reader of metrics.jsonl reads it (train/metrics.py)."""
    try:
        summary = summarize_file(path)
    except OSError as e:
        log.warning("push: card without losses: cannot read metrics.jsonl (%s)", type(e).__name__)
        return None, None, None
    loss = summary.last_train["loss"] if summary.last_train else None
    return loss, summary.eval_loss, summary.span()


def _pod(run_dir: Path) -> tuple[str | None, float | None]:
    """(the GPU line, the pod's estimated spend) from the run's pod.json (runpod/pod_record.py)."""
    try:
        pod = PodRecord.load_if_any(PodRecord.path_in(run_dir))
    except (OverbrainerError, OSError) as e:
        log.warning("push: card without the GPU line: %s", e)
        return None, None
    if pod is None:
        return None, None
    gpu = pod.gpu_type
    if gpu and pod.gpu_count > 1:
        gpu = f"{pod.gpu_count} × {gpu}"
    return gpu, pod.estimated_spend


def gguf_types(paths: list[str], run_id: str) -> list[str]:
    """The quantization types of pushed `<run-id>-<TYPE>.gguf` files."""
    out = []
    for p in paths:
        if "/" not in p and p.startswith(run_id + "-") and p.endswith(".gguf"):
            out.append(p[len(run_id) + 1:-len(".gguf")])
    return sorted(out)


def gather(config: Config, run_dir: Path, run_id: str, repo: str, paths: list[str], version: str,
           license: str | None = None) -> CardFacts:
    ax = axolotl_settings(run_dir)
    facts = CardFacts(repo=repo, run_id=run_id, version=version, license=license)
    training = config.training
    base = ax.get("base_model") if isinstance(ax.get("base_model"), str) else None
    base = base or (training.base_model if training else None)
    facts.base_model = model_name(base)
    facts.base_is_hub = is_hub_id(base)
    adapter = ax.get("adapter") if ax else (training.adapter if training else None)
    if adapter in ("lora", "qlora"):
        facts.adapter = "qlora" if ax.get("load_in_4bit") is True or adapter == "qlora" else "lora"
    facts.epochs = ax.get("num_epochs")
    facts.learning_rate = ax.get("learning_rate")
    facts.sequence_len = ax.get("sequence_len")
    facts.train_count, r1 = _count(run_dir / "data" / "train.jsonl")
    facts.eval_count, r2 = _count(run_dir / "data" / "eval.jsonl")
    if facts.train_count is not None:
        facts.kept = "answers and reasoning" if (r1 or r2) else "answers only"
    facts.decontamination = _decontamination(run_dir / "data" / "decontamination.json")
    facts.train_loss, facts.eval_loss, facts.training_secs = _metrics(run_dir / "metrics.jsonl")
    facts.gguf_types = gguf_types(paths, run_id)
    facts.gpu, facts.spend = _pod(run_dir)
    for name in ("parent", "generator", "judge"):
        role = config.role(name)
        setattr(facts, name, model_name(role.model) if role is not None else None)
    facts.topics = [(t.name, t.description) for t in config.topics]
    facts.reproduce = reproduce(config)
    facts.evals = eval_facts(run_dir)
    return facts


# --- the newest eval ---------------------------------------------------------------------------

def _number(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _row(task: str, row: dict) -> dict | None:
    if not isinstance(row, dict) or not isinstance(row.get("metric"), str):
        return None
    ratio = row.get("ratio") if isinstance(row.get("ratio"), dict) else {}
    return {"task": str(task), "metric": row["metric"], "child": _number(row.get("child")),
            "parent": _number(row.get("parent")), "ratio": _number(ratio.get("ratio")),
            "low": _number(ratio.get("low")), "high": _number(ratio.get("high")),
            "samples": _number(ratio.get("n", row.get("samples")))}


def eval_facts(run_dir: Path) -> dict | None:
    """The newest eval's card facts, or None."""
    best = None
    for path in sorted(Path(run_dir).glob(f"{EVALS}/*/{EVAL_JSON}")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            log.warning("push: card without %s: %s", path.parent.name, type(e).__name__)
            continue
        if isinstance(doc, dict) and isinstance(doc.get("summary"), dict) and \
                (best is None or str(doc.get("created")) > str(best.get("created"))):
            best = doc
    if best is None:
        return None
    rows = [r for r in (_row(t, v) for t, v in best["summary"].items()) if r is not None]
    return {"eval": str(best.get("eval")), "lm_eval": str(best.get("lm_eval")), "limit": best.get("limit"),
            "seed": best.get("seed"), "rows": rows}


def _score(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def eval_section(facts: dict | None) -> list[str]:
    """The section's lines (none without an eval)."""
    if not facts or not facts["rows"]:
        return []
    limit = f", at most {facts['limit']} documents per task" if isinstance(facts.get("limit"), int) else ""
    lines = ["## Benchmarks", "",
             cell(f"lm-evaluation-harness {facts['lm_eval']} (eval {facts['eval']}): the child's GGUF and its "
                  f"parent with the same settings{limit}, seed {facts['seed']}. The interval is a paired "
                  "bootstrap over the samples."), "",
             "| Task | Metric | Child | Parent | Child / parent (95 % interval) | Samples |",
             "|---|---|---|---|---|---|"]
    for r in facts["rows"]:
        ratio = _pct(r["ratio"])
        if r["low"] is not None:
            ratio += f" ({_pct(r['low'])} to {_pct(r['high'])})"
        samples = "–" if r["samples"] is None else str(int(r["samples"]))
        lines.append(f"| {cell(r['task'])} | {cell(r['metric'])} | {_score(r['child'])} | {_score(r['parent'])} "
                     f"| {ratio} | {samples} |")
    return lines + [""]


# --- the overbrainer.toml excerpt ----------------------------------------------------------------

_ROLE_FIELDS = ("model", "reasoning", "max_tokens", "temperature", "reasoning_effort", "thinking_budget")
_TRAINING_FIELDS = ("base_model", "adapter", "epochs", "learning_rate", "lora_r", "lora_alpha", "lora_dropout",
                    "sequence_len", "micro_batch_size", "gradient_accumulation_steps", "optimizer",
                    "lr_scheduler", "sample_packing", "evals_per_epoch", "saves_per_epoch", "merge")
_PIPELINE_FIELDS = ("concurrency", "max_retries", "dedup_threshold", "embedding_threshold",
                    "question_batch_size", "request_timeout_secs", "eval_ratio", "seed", "include_system_prompt")


def _plain(v: Any) -> Any:
    """`v` when the excerpt may hold it as it is (a bool, a number, a string that is no URL, or a
    list of them); None for anything else (left out)."""
    if isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        return None if "://" in v else v  # a URL never goes into a card
    if isinstance(v, list):
        items = [_plain(x) for x in v]
        return None if any(x is None for x in items) else items
    return None


def _pathish(v: Any) -> bool:
    """A value of axolotl_extra that could name a local file, a host or an account."""
    if isinstance(v, list):
        return any(_pathish(x) for x in v)
    return isinstance(v, str) and (v.startswith(("/", "~", ".")) or "\\" in v or "@" in v)


def _kept(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: p for k, v in fields.items() if (p := _plain(v)) is not None}


def reproduce(config: Config) -> str:
    """The excerpt's TOML text (written by tomli_w: any key is quoted as TOML needs)."""
    doc: dict[str, Any] = {}
    topics = [_kept({"name": t.name, "description": t.description or None, "subtopics": t.subtopics,
                     "questions_per_subtopic": t.questions_per_subtopic}) for t in config.topics]
    if topics:
        doc["topics"] = topics
    roles = {}
    for name, role in config.roles.all():
        fields = {f: getattr(role, f) for f in _ROLE_FIELDS}  # by name: the allowlist's fields
        fields["model"] = model_name(role.model)
        roles[name] = _kept({k: v for k, v in fields.items() if v is not False})
    doc["roles"] = roles
    training = config.training
    if training is not None:
        fields = {f: getattr(training, f) for f in _TRAINING_FIELDS}  # by name: the allowlist's fields
        fields["base_model"] = model_name(fields["base_model"])
        section = _kept(fields)
        extra = _kept({k: v for k, v in sorted(training.axolotl_extra.items())
                       if not secretish(k) and not _pathish(v)})
        if extra:
            section["axolotl_extra"] = extra
        doc["training"] = section
    doc["pipeline"] = _kept({f: getattr(config.pipeline, f) for f in _PIPELINE_FIELDS})
    return tomli_w.dumps(doc)


# --- the text ----------------------------------------------------------------------------------

MARKER = "<!-- overbrainer:card -->"


def prose(text: object) -> str:
    s = " ".join(str(text).split())
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cell(text: object) -> str:
    return prose(text).replace("|", "\\|")


def front_matter(data: dict[str, Any]) -> list[str]:
    """The card's YAML metadata between `---` lines, written by PyYAML (each value reads back as
    the string it is: `no`, `1.0`, `a: b` or a newline are quoted as YAML needs)."""
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1 << 16)
    return ["---", *text.rstrip("\n").split("\n"), "---", ""]


def _adapter_word(f: CardFacts) -> str:
    return {"lora": "LoRA", "qlora": "QLoRA"}.get(f.adapter or "", "none (full fine-tune)")


def _metadata(f: CardFacts) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if f.base_model and f.base_is_hub:
        data.update(base_model=f.base_model, base_model_relation="adapter" if f.adapter else "finetune")
    data["library_name"] = "peft" if f.adapter else "transformers"
    if f.license:
        data["license"] = f.license
    data["pipeline_tag"] = "text-generation"
    data["tags"] = ["overbrainer", "distillation"] + (["gguf"] if f.gguf_types else [])
    return data


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
    lines = front_matter(_metadata(f))
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
    lines += eval_section(f.evals)
    lines += ["## Reproduce", "", "```sh", "pip install overbrainer", "```", "", "`overbrainer.toml` (excerpt):",
              "", "```toml", f.reproduce.rstrip("\n").replace("```", "'''"), "```", ""]
    lines += ["---", "", prose(f"Card written by overbrainer {f.version}."), MARKER]
    return "\n".join(lines) + "\n"


def is_ours(text: str) -> bool:
    """Whether a README.md was written by overbrainer (a later push may replace it)."""
    return MARKER in text
