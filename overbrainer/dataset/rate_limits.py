"""The rate limits the providers published (`.overbrainer/rate_limits.json`), kept from one
command to the next: by provider name and model, a minute's limit of each kind (`requests`,
`tokens`, `input_tokens`, `output_tokens`: llm/rate_headers.py), as last published, and OpenAI's
batch queue limit (`batch_queue_tokens`: the input tokens a model's batches in progress may
hold), as a refused batch stated it.

A command starts its pacers with them (llm/pacing.py: no first request alone to learn them),
`--plan` says with them how long the online stages will take, and batch mode sizes its
submissions to the queue's room (pipeline/batch_submit.py); the next answers correct them.
The file is small and rewritten atomically (support/atomic.py); an unreadable or unknown file
counts as empty, never an error.
"""

from __future__ import annotations

import json
import logging
import threading

from overbrainer.support.atomic import atomic_write_bytes

from .paths import ProjectPaths

log = logging.getLogger(__name__)

FORMAT = 1
KINDS = ("requests", "tokens", "input_tokens", "output_tokens", "batch_queue_tokens")
QUEUE = "batch_queue_tokens"
Known = dict[tuple[str, str], dict[str, float]]  # (provider, model) -> {kind: a minute's limit}

_LOCK = threading.Lock()  # a process's read-merge-write of the file (the TUI's tasks)


def read(paths: ProjectPaths) -> Known:
    """The limits recorded for each (provider, model); {} when none or unreadable."""
    try:
        doc = json.loads(paths.rate_limits.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("providers"), dict):
        return {}
    out: Known = {}
    for provider, models in doc["providers"].items():
        if not isinstance(models, dict):
            continue
        for model, entry in models.items():
            limits = {k: float(v) for k, v in (entry if isinstance(entry, dict) else {}).items()
                      if k in KINDS and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0}
            if limits:
                out[(str(provider), str(model))] = limits
    return out


def record(paths: ProjectPaths, learned: Known) -> None:
    """Keep `learned` (what this command's answers published) beside what was recorded before;
    nothing is written when it changes nothing. A write that fails is logged, never raised: the
    limits are learned again."""
    if not learned:
        return
    with _LOCK:
        known = read(paths)
        merged = {key: dict(limits) for key, limits in known.items()}
        for key, limits in learned.items():
            merged[key] = {**merged.get(key, {}), **{k: float(v) for k, v in limits.items() if k in KINDS}}
        if merged == known:
            return
        providers: dict[str, dict[str, dict[str, float | int]]] = {}
        for (provider, model), limits in sorted(merged.items()):
            entry = {k: (int(v) if v.is_integer() else v) for k, v in limits.items()}
            providers.setdefault(provider, {})[model] = entry
        data = json.dumps({"format": FORMAT, "providers": providers}, indent=1, sort_keys=True).encode() + b"\n"
        try:
            paths.state.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(paths.rate_limits, data)
        except OSError as e:
            log.warning("the rate limits learned could not be kept in %s: %s", paths.rate_limits, e)
