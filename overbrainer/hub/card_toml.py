"""The `overbrainer.toml` excerpt of a model card's Reproduce section, from an allowlist.

Kept: `[[topics]]`, the model of each role (not its provider), `[training]` without `target` and
`hub_model_id` (a local base model cut to its last component, `axolotl_extra` without keys that
could carry a secret, host or path), and `[pipeline]`. Never: providers, targets, runpod, hub,
keys, hosts, URLs.
"""

from __future__ import annotations

import json
from typing import Any

from overbrainer.config.model import Config
from overbrainer.hub.card_rules import model_name, secretish

_ROLE_FIELDS = ("model", "reasoning", "max_tokens", "temperature", "reasoning_effort", "thinking_budget")
_TRAINING_FIELDS = ("base_model", "adapter", "epochs", "learning_rate", "lora_r", "lora_alpha", "lora_dropout",
                    "sequence_len", "micro_batch_size", "gradient_accumulation_steps", "optimizer",
                    "lr_scheduler", "sample_packing", "evals_per_epoch", "saves_per_epoch", "merge")
_PIPELINE_FIELDS = ("concurrency", "max_retries", "dedup_threshold", "embedding_threshold",
                    "question_batch_size", "request_timeout_secs", "eval_ratio", "seed", "include_system_prompt")


def value(v: Any) -> str | None:
    """A TOML literal for a plain value; None for anything else (left out)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        if "://" in v:
            return None  # a URL never goes into a card
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        items = [value(x) for x in v]
        return None if any(x is None for x in items) else "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
    return None


def _pathish(v: Any) -> bool:
    """A value of axolotl_extra that could name a local file, a host or an account."""
    if isinstance(v, list):
        return any(_pathish(x) for x in v)
    return isinstance(v, str) and (v.startswith(("/", "~", ".")) or "\\" in v or "@" in v)


def _inline(fields: dict[str, Any]) -> str:
    parts = [f"{k} = {lit}" for k, v in fields.items() if v is not None and (lit := value(v)) is not None]
    return "{ " + ", ".join(parts) + " }"


def reproduce(config: Config) -> str:
    lines: list[str] = []
    for t in config.topics:
        lines += ["[[topics]]", f"name = {value(t.name)}"]
        if t.description:
            lines.append(f"description = {value(t.description)}")
        lines += [f"subtopics = {t.subtopics}", f"questions_per_subtopic = {t.questions_per_subtopic}", ""]
    lines.append("[roles]")
    for name, role in config.roles.all():
        fields = {f: getattr(role, f) for f in _ROLE_FIELDS}  # by name: the allowlist's fields
        fields["model"] = model_name(role.model)
        fields = {k: v for k, v in fields.items() if v not in (None, False) or k == "model"}
        lines.append(f"{name} = {_inline(fields)}")
    lines.append("")
    training = config.training
    if training is not None:
        lines.append("[training]")
        for f in _TRAINING_FIELDS:
            v = getattr(training, f)  # by name: the allowlist's fields
            if f == "base_model":
                v = model_name(v)
            lit = value(v) if v is not None else None
            if lit is not None:
                lines.append(f"{f} = {lit}")
        extra = {k: v for k, v in sorted(training.axolotl_extra.items()) if not secretish(k)}
        if extra:
            kept = {k: v for k, v in extra.items() if value(v) is not None and not _pathish(v)}
            if kept:
                lines.append(f"axolotl_extra = {_inline(kept)}")
        lines.append("")
    lines.append("[pipeline]")
    lines += [f"{f} = {value(getattr(config.pipeline, f))}" for f in _PIPELINE_FIELDS]
    return "\n".join(lines).rstrip() + "\n"
