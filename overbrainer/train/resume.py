"""The resume check of `train --resume-from`: may a new run continue a stopped run's checkpoint?

The stopped run's `axolotl.yaml` is compared, top-level key by key, with the config the current
`[training]` would give *for the old run's root* (its `output_dir` minus `/output`). Keys that only
steer saving, evaluation, logging or the Hub may differ; any other difference refuses the resume.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from overbrainer.errors import OverbrainerError
from overbrainer.train.axolotl_config import build_config

MAY_DIFFER = frozenset({
    "resume_from_checkpoint", "hub_model_id", "hub_strategy", "evals_per_epoch", "eval_steps",
    "eval_strategy", "saves_per_epoch", "save_steps", "save_strategy", "save_total_limit",
    "logging_steps", "use_tensorboard", "use_wandb", "use_mlflow", "use_comet",
})
MAY_DIFFER_PREFIXES = ("wandb_", "mlflow_", "comet_")


def may_differ(key: str) -> bool:
    return key in MAY_DIFFER or key.startswith(MAY_DIFFER_PREFIXES)


def read_old_config(path: str | os.PathLike) -> dict[str, Any]:
    """The stopped run's Axolotl config; an `OverbrainerError` naming the file when unreadable."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise OverbrainerError(f"cannot read {path}: {exc.strerror}") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise OverbrainerError(f"{path} is not a valid Axolotl config{where}") from None
    if not isinstance(data, dict) or not isinstance(data.get("output_dir"), str):
        raise OverbrainerError(f"{path} is not a valid Axolotl config: it has no output_dir")
    return data


def old_root(config: dict[str, Any]) -> str:
    output_dir = str(config["output_dir"]).rstrip("/")
    if not output_dir.endswith("/output"):
        raise OverbrainerError(f"the run's output_dir {output_dir} does not end with /output")
    return output_dir[: -len("/output")] or "/"


def resume_differences(old_config_path: str | os.PathLike, training: Any, has_eval: bool) -> list[str]:
    """Top-level keys (sorted) whose value differs between the stopped run's config and the one the
    current `[training]` gives; empty when the run may resume."""
    old = read_old_config(old_config_path)
    new = build_config(training, old_root(old), has_eval)
    keys = set(old) | set(new)
    return sorted(k for k in keys if not may_differ(str(k)) and old.get(k) != new.get(k))
