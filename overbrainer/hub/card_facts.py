"""The facts a model card may show, read from the run's own files and the settings.

This is an allowlist: each fact is read by name into `CardFacts`, and the card renders nothing
else. Keys, hosts, URLs, provider names and target names are never read; a local path (a base
model on disk) is cut to its last component. An unreadable value drops its row, with a warning.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from overbrainer.config.model import Config
from overbrainer.errors import OverbrainerError
from overbrainer.hub.card_eval import eval_facts
from overbrainer.hub.card_rules import is_hub_id, model_name
from overbrainer.hub.card_toml import reproduce
from overbrainer.runpod.pod_record import PodRecord
from overbrainer.train.metrics import summarize_file

log = logging.getLogger(__name__)


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
    evals: dict | None = None  # the newest `overbrainer eval` (hub/card_eval.eval_facts)


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
