"""What each run's Runpod pod has cost, read from `runs/<id>/pod.json` at every scrape or write."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from overbrainer.errors import OverbrainerError
from overbrainer.runpod.pod_record import PodRecord

log = logging.getLogger(__name__)


def runpod_spend(runs_dir: Path, now: float | None = None) -> dict[str, float]:
    """USD per run ID: a deleted pod's final estimate, a live one's rate × uptime. A run without a
    pod.json, or whose spend is unknown (no rate yet), has no entry; an unreadable pod.json is
    left out (`runs ls` and `pod ls` say what is wrong with it)."""
    paths = sorted(Path(runs_dir).glob("*/pod.json"))
    if not paths:
        return {}
    now = time.time() if now is None else now
    out: dict[str, float] = {}
    for path in paths:
        try:
            record = PodRecord.load(path)
        except OverbrainerError as e:
            log.debug("metrics: %s", e)
            continue
        spend = record.spend_so_far(now)
        if spend is not None:
            out[record.run_id] = spend
    return out
