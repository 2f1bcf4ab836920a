"""The Axolotl config of a run (docs/runs.md#axolotl-config): `[training]`, `axolotl_extra` merged last.

`build_config(training, root, has_eval, resume_checkpoint)` gives the dict, `dump_yaml` its text
(keys sorted, strings double-quoted, PyYAML reads it back to the same dict). `training` is the
`config.model.Training` record (attribute names = the TOML keys), which holds the defaults (also in
docs/runs.md#axolotl-config).
"""

from __future__ import annotations

import copy
import logging
import math
import os
import re
from pathlib import Path
from typing import Any

import yaml

from overbrainer.config.model import Training
from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.support.atomic import atomic_write_text

log = logging.getLogger(__name__)

PLUGIN_CLASS = "overbrainer_metrics.OverbrainerMetricsPlugin"

# Keys overbrainer writes itself: `axolotl_extra` may not set them.
MANAGED_KEYS = (
    "datasets", "test_datasets", "val_set_size", "output_dir", "dataset_prepared_path", "plugins",
    "resume_from_checkpoint",
)

# Axolotl keys (and the TOML names) that have their own typed setting in `[training]`.
TYPED_KEYS = (
    "target", "base_model", "adapter", "epochs", "num_epochs", "learning_rate", "lora_r", "lora_alpha",
    "lora_dropout", "sequence_len", "micro_batch_size", "gradient_accumulation_steps", "optimizer",
    "lr_scheduler", "sample_packing", "evals_per_epoch", "saves_per_epoch", "merge", "hub_model_id",
)

# `[training] distributed`, on Axolotl's own keys: `fsdp_version`/`fsdp_config` (FSDP2, the wrapped
# layers taken from the model's own no-split modules), or `deepspeed` naming a ZeRO config the run
# ships (DEEPSPEED_FILE, its "auto" values filled by the trainer from the Axolotl config). "ddp" adds
# no key: one process per GPU replicates the model, as Axolotl's launcher and torchrun do anyway.
DEEPSPEED_FILE = "deepspeed.json"
FSDP_CONFIG = {"auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "state_dict_type": "FULL_STATE_DICT",
               "reshard_after_forward": True, "offload_params": False, "cpu_ram_efficient_loading": True}
_AUTO = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
         "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
         "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}}
ZERO: dict[str, dict[str, Any]] = {
    "deepspeed_zero2": {"zero_optimization": {"stage": 2, "overlap_comm": True, "contiguous_gradients": True}},
    "deepspeed_zero3": {"zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True,
                                              "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                                              "stage3_param_persistence_threshold": "auto",
                                              "stage3_gather_16bit_weights_on_model_save": True}},
}

# Chat templates of Axolotl 0.19 that render the assistant's `reasoning_content`
# (overbrainer inserts no <think> tags: the template must render it, or the child never sees it).
REASONING_TEMPLATES = ("qwen3", "qwen3_5", "exaone4", "gemma4", "gemma4_unified")


def setting(training: Training, name: str) -> Any:
    """A `[training]` value by its TOML name (its default when not set: config/model.Training)."""
    return getattr(training, name)  # by name: `name` is a field of Training


def adapter_of(training: Training) -> str:
    return str(training.adapter or "").lower()


def extra_of(training: Training) -> dict[str, Any]:
    extra = training.axolotl_extra or {}
    if not isinstance(extra, dict):
        raise ConfigError("invalid configuration", ["training.axolotl_extra must be a table"])
    return extra


def extra_problems(extra: dict[str, Any], *, typed: bool = False) -> list[str]:
    """What `axolotl_extra` may not hold: managed keys, `save_only_model = true` and, with
    `typed=True` (the config validation's choice), keys that have a typed `[training]` setting."""
    problems = []
    for key in extra:
        if key in MANAGED_KEYS:
            problems.append(f"training.axolotl_extra.{key} is set by overbrainer: remove it")
        elif typed and key in TYPED_KEYS:
            problems.append(f"training.axolotl_extra.{key} has its own setting: set training.{key} instead")
    if extra.get("save_only_model") is True:
        problems.append("training.axolotl_extra.save_only_model = true would make snapshots unresumable: remove it")
    return problems


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """A mapping into a mapping merges key by key; anything else replaces. Returns a new dict."""
    merged = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def dataset_entry(path: str) -> dict[str, Any]:
    return {
        "ds_type": "json",
        "field_messages": "messages",
        "field_thinking": "reasoning_content",
        "path": path,
        "roles_to_train": ["assistant"],
        "train_on_eos": "turn",
        "type": "chat_template",
    }


def evaluates_never(training: Training) -> bool:
    """True when Axolotl would never evaluate with these settings: it turns `evals_per_epoch` into
    `eval_steps = 1 / (evals_per_epoch * num_epochs)` and uses it only below 1.0, so 1 evaluation per
    epoch over 1 epoch gives none. `build_config` writes `eval_strategy: "epoch"` instead."""
    return setting(training, "evals_per_epoch") * setting(training, "epochs") <= 1


def eval_warning(training: Training, has_eval: bool) -> str | None:
    """The warning logged when `build_config` corrects settings that would give no evaluation."""
    if not has_eval or "eval_steps" in extra_of(training) or not evaluates_never(training):
        return None
    return (f"training.evals_per_epoch = {setting(training, 'evals_per_epoch')} with training.epochs = "
            f"{setting(training, 'epochs')} gives no evaluation in Axolotl (it skips an eval_steps of 1.0): "
            'the run evaluates at the end of each epoch instead (eval_strategy: "epoch" in axolotl.yaml)')


def build_config(training: Training, root: str, has_eval: bool, resume_checkpoint: str | None = None) -> dict[str, Any]:
    """The Axolotl config as a dict. `root` is the run directory as the job sees it (host path or
    `/workspace/run`); `resume_checkpoint` is `<root>/resume/checkpoint-N` or None.

    Raises `ConfigError` when `axolotl_extra` sets a managed key.
    """
    extra = extra_of(training)
    problems = extra_problems(extra)
    if problems:
        raise ConfigError("invalid configuration", problems)
    root = root.rstrip("/") or "/"
    base_model = training.base_model
    if not base_model:
        raise ConfigError("invalid configuration", ["training.base_model is not set"])
    config = _core_keys(training, base_model, root)
    config.update(_adapter_keys(training))
    config.update(_eval_and_save_keys(training, extra, root, has_eval))
    hub_model_id = training.hub_model_id
    if hub_model_id:
        config["hub_model_id"] = hub_model_id
    if resume_checkpoint:
        config["resume_from_checkpoint"] = resume_checkpoint
    config.update(distributed_keys(training, root))
    merged = deep_merge(config, extra)
    if not has_eval:
        for key in ("eval_steps", "eval_strategy"):
            merged.pop(key, None)
    return merged


def distributed_keys(training: Training, root: str) -> dict[str, Any]:
    """The Axolotl keys of `[training] distributed` (none when unset or "ddp")."""
    kind = getattr(training, "distributed", None)
    if kind == "fsdp":
        return {"fsdp_version": 2, "fsdp_config": dict(FSDP_CONFIG)}
    if kind in ZERO:
        return {"deepspeed": f"{root.rstrip('/')}/{DEEPSPEED_FILE}"}
    return {}


def deepspeed_config(training: Training) -> dict[str, Any] | None:
    """The DeepSpeed config the run ships as DEEPSPEED_FILE (None unless `distributed` is ZeRO)."""
    zero = ZERO.get(getattr(training, "distributed", None) or "")
    return None if zero is None else {**copy.deepcopy(zero), **copy.deepcopy(_AUTO)}


def _core_keys(training: Training, base_model: str, root: str) -> dict[str, Any]:
    """The model, the optimisation settings, and where the job reads and writes."""
    return {
        "base_model": base_model,
        "sequence_len": setting(training, "sequence_len"),
        "sample_packing": setting(training, "sample_packing"),
        "num_epochs": setting(training, "epochs"),
        "micro_batch_size": setting(training, "micro_batch_size"),
        "gradient_accumulation_steps": setting(training, "gradient_accumulation_steps"),
        "learning_rate": setting(training, "learning_rate"),
        "optimizer": setting(training, "optimizer"),
        "lr_scheduler": setting(training, "lr_scheduler"),
        "val_set_size": 0,
        "eval_sample_packing": False,
        "attn_implementation": "sdpa",
        "warmup_ratio": 0.1,
        "gradient_checkpointing": True,
        "logging_steps": 1,
        "output_dir": f"{root}/output",
        "dataset_prepared_path": f"{root}/prepared",
        "plugins": [PLUGIN_CLASS],
        "datasets": [dataset_entry(f"{root}/data/train.jsonl")],
    }


def _adapter_keys(training: Training) -> dict[str, Any]:
    """LoRA/QLoRA settings, none for a full fine-tune (ConfigError for another adapter)."""
    adapter = adapter_of(training)
    if adapter == "full":
        return {}
    if adapter not in ("lora", "qlora"):
        raise ConfigError("invalid configuration", ["training.adapter must be lora, qlora or full"])
    return {
        "adapter": adapter,
        "load_in_4bit": adapter == "qlora",
        "load_in_8bit": False,
        "lora_r": setting(training, "lora_r"),
        "lora_alpha": setting(training, "lora_alpha"),
        "lora_dropout": setting(training, "lora_dropout"),
        "lora_target_linear": True,
    }


def _eval_and_save_keys(training: Training, extra: dict[str, Any], root: str, has_eval: bool) -> dict[str, Any]:
    """The eval set and how often to evaluate and save, unless `axolotl_extra` says so itself."""
    keys: dict[str, Any] = {}
    if has_eval:
        keys["test_datasets"] = [dict(dataset_entry(f"{root}/data/eval.jsonl"), split="train")]
        if "eval_steps" not in extra:
            if evaluates_never(training):
                keys["eval_strategy"] = "epoch"
            else:
                keys["evals_per_epoch"] = setting(training, "evals_per_epoch")
    if "save_steps" not in extra:
        keys["saves_per_epoch"] = setting(training, "saves_per_epoch")
    if "save_total_limit" not in extra:
        keys["save_total_limit"] = 2
    return keys


# --- YAML ------------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*\Z")
_BOOLISH = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "nan", "inf"}


def _dumper():
    class Dumper(yaml.SafeDumper):
        """Block style, lists indented under their key, keys plain when safe, values double-quoted."""

        def ignore_aliases(self, data):
            return True

        def increase_indent(self, flow=False, indentless=False):
            return super().increase_indent(flow, False)

        def represent_mapping(self, tag, mapping, flow_style=None):
            value = []
            node = yaml.MappingNode(tag, value, flow_style=False)
            for key in sorted(mapping, key=str):
                if isinstance(key, str) and _PLAIN_KEY.match(key) and key.lower() not in _BOOLISH:
                    key_node = yaml.ScalarNode("tag:yaml.org,2002:str", key, style=None)
                else:
                    key_node = self.represent_data(key)
                value.append((key_node, self.represent_data(mapping[key])))
            return node

        def represent_str(self, data):
            return self.represent_scalar("tag:yaml.org,2002:str", data, style='"')

        def represent_float(self, data):
            if not math.isfinite(data):
                return super().represent_float(data)
            text = repr(data)
            if "e" in text:
                mantissa, exp = text.split("e")
                if "." not in mantissa:
                    mantissa += ".0"
                sign = "-" if exp.startswith("-") else "+"
                text = f"{mantissa}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"
            elif "." not in text:
                text += ".0"
            return self.represent_scalar("tag:yaml.org,2002:float", text)

    Dumper.add_representer(str, Dumper.represent_str)
    Dumper.add_representer(float, Dumper.represent_float)
    Dumper.add_representer(dict, Dumper.represent_dict)
    return Dumper


def dump_yaml(config: dict[str, Any]) -> str:
    """The config as YAML text: keys sorted, strings double-quoted (so `"no"` stays a string)."""
    return yaml.dump(config, Dumper=_dumper(), default_flow_style=False, allow_unicode=True,
                     width=1 << 30, sort_keys=True)


def write_config(path: str | os.PathLike, config: dict[str, Any]) -> None:
    atomic_write_text(path, dump_yaml(config))


# --- checks at training start ----------------------------------------------------------------

def has_examples(path: str | os.PathLike) -> bool:
    """True when the JSONL file exists and holds a non-blank line."""
    try:
        with open(path, "rb") as f:
            return any(line.strip() for line in f)
    except FileNotFoundError:
        return False


def require_examples(path: str | os.PathLike, shown: str | None = None) -> None:
    """Refuse to train on a missing or empty `train.jsonl`. `shown` is the path as the user knows
    it (e.g. `data/train.jsonl`); default: `path`."""
    try:
        ok = has_examples(path)
    except OSError as exc:
        raise OverbrainerError(f"cannot read {shown or path}: {exc.strerror}") from exc
    if not ok:
        raise OverbrainerError(f"{shown or path} has no example: run `overbrainer split` first")


def template_warning(training: Training) -> str | None:
    """The warning printed at training start when the chat template may drop the reasoning, or
    None when it renders `reasoning_content` (rules: docs/runs.md#axolotl-config)."""
    extra = extra_of(training)
    jinja = extra.get("chat_template_jinja")
    template = extra.get("chat_template")
    base_model = str(training.base_model or "")
    if jinja is not None:
        if "reasoning_content" in str(jinja):
            return None
        why = "training.axolotl_extra.chat_template_jinja does not mention reasoning_content"
    elif template is not None and str(template) != "tokenizer_default":
        if str(template) in REASONING_TEMPLATES:
            return None
        why = f"chat template `{template}` does not render reasoning_content"
    else:
        if "qwen3" in base_model.lower():
            return None
        why = f"the chat template of {base_model} may not render reasoning_content"
    return (f"{why}: the child would learn the answers without the parent's reasoning; "
            f"use one of {', '.join(REASONING_TEMPLATES)} or a chat_template_jinja that renders it")


def recorded_adapter(run_dir: str | os.PathLike) -> str:
    """`adapter:` of a run's own axolotl.yaml (`full` when absent or unreadable)."""
    try:
        data = yaml.safe_load(Path(run_dir, "axolotl.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return "full"
    adapter = data.get("adapter") if isinstance(data, dict) else None
    return str(adapter) if adapter else "full"
