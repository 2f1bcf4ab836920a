"""Events → one JSON object per line on stderr (`--json`): `ev.to_dict()` and nothing else."""

from __future__ import annotations

import json
import math
from typing import IO, Any

from overbrainer.front import terminal
from overbrainer.front.events import Event
from overbrainer.support.redact import redact


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def event_line(ev: Event) -> str:
    """The JSON line of an event (non-finite numbers → null, secrets masked)."""
    return redact(json.dumps(_finite(ev.to_dict()), ensure_ascii=False, allow_nan=False))


class JsonRenderer:
    def __init__(self, stream: IO[str] | None = None):
        self.stream = stream

    def handle(self, ev: Event) -> None:
        terminal.write_line(event_line(ev), self.stream)

    def close(self) -> None:
        pass
