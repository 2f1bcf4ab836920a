"""What a side job's own pod asks Runpod for (jobs.side_job's `SideJob.pod`): its `max_hours`
(`[export] max_hours` / `[compare] max_hours`, default 1), its image (a compare's), and for a
target with `gpu_types = "auto"` and no `min_vram_gb` a VRAM floor (`runpod.catalog.vram_floor`:
ceil(1.2 × bytes / 1e9) + 2 GB) from the model the job loads: for an export, the base model's size
from the Hugging Face Hub's metadata (`GET /api/models/<repo>?expand[]=safetensors`, 10 s at most;
16-bit weights: 2 bytes a parameter), else a warning and no floor; for a compare, its GGUF's size.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from overbrainer.config.model import Config, RunpodTarget, Target
from overbrainer.errors import OverbrainerError
from overbrainer.runpod.catalog import vram_floor
from overbrainer.support import http

log = logging.getLogger(__name__)

HUB_SECS = 10.0
BYTES_PER_PARAMETER = 2  # the merge and the converter work in 16 bits


def needs_floor(target: Target) -> bool:
    return isinstance(target, RunpodTarget) and target.gpu_types == "auto" and target.min_vram_gb is None


def settings(target: Target, max_hours: float, *, image: str | None = None, model_bytes: int | None = None) -> dict:
    """The target's settings for a side job's pod (only for a runpod target; {} otherwise)."""
    if not isinstance(target, RunpodTarget):
        return {}
    out: dict[str, Any] = {"max_hours": max_hours, "nodes": 1}  # a side job needs one pod, never a cluster
    if image:
        out["image"] = image
    if needs_floor(target) and model_bytes:
        out["min_vram_gb"] = vram_floor(model_bytes)
        log.info("the pod needs at least %d GB of VRAM (gpu_types = \"auto\")", out["min_vram_gb"])
    return out


def base_model_bytes(config: Config, base_model: str | None) -> int | None:
    """What the base model weighs in 16 bits: a local folder's safetensors, else the Hub's count of
    its parameters (10 s at most); None (warned) when neither says."""
    if not base_model:
        log.warning("the run's axolotl.yaml names no base_model: no VRAM floor for gpu_types = \"auto\" "
                    "(set min_vram_gb)")
        return None
    local = Path(base_model)
    if local.is_absolute() and local.is_dir():
        return sum(p.stat().st_size for p in local.glob("*.safetensors")) or None
    try:
        return hub_parameters(config, base_model) * BYTES_PER_PARAMETER
    except OverbrainerError as e:
        log.warning("cannot read the size of %s on the Hugging Face Hub (%s): no VRAM floor for "
                    "gpu_types = \"auto\"; set min_vram_gb on the target", base_model, e)
        return None


def hub_parameters(config: Config, repo: str) -> int:
    """The parameter count the Hub's metadata gives for `repo` (OverbrainerError saying why not)."""
    base = config.hub.url.rstrip("/")
    headers = {"Accept": "application/json"}
    token = config.hf_token
    if token is not None:
        headers["Authorization"] = f"Bearer {token.resolve()}"
    s = http.session(base, headers=headers)
    try:
        answer = http.exchange(s, "GET", f"{base}/api/models/{repo}", params={"expand[]": "safetensors"},
                               timeout=(HUB_SECS, HUB_SECS), deadline=time.monotonic() + HUB_SECS,
                               cap=4 << 20, allow_redirects=False)
    except http.Unanswered as e:
        raise OverbrainerError(f"the Hub did not answer: {http.describe(e.kind)}") from None
    except http.TooLarge:
        raise OverbrainerError("the Hub's answer was too large") from None
    finally:
        s.close()
    if answer.status != 200:
        raise OverbrainerError(f"the Hub answered {answer.status}")
    try:
        total = (json.loads(answer.body).get("safetensors") or {}).get("total")
    except (ValueError, AttributeError):
        total = None
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        raise OverbrainerError("its metadata gives no safetensors parameter count")
    return total
