"""Rounds that added nothing (`.overbrainer/stalls.json`): a topic whose subtopics request came
back with no new name, a subtopic whose question batches stalled. Each is kept under its kind
(`subtopics`: by topic name; `questions`: by subtopic ID) with the key of what made its prompt
(`prompt_key`: the topic's settings, the template text, the generator's provider and model), the
date of the try and how many items it had then. While its key is unchanged the stages do not ask
it again (a paid round that cannot add anything); any change of what the key covers, or
`--force`, asks again.

The file is small (one entry per stalled item) and rewritten atomically (support/atomic.py). An
unreadable or unknown file counts as empty: the items are asked again, never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import asdict, dataclass

from overbrainer.support.atomic import atomic_write_bytes

from .paths import ProjectPaths

log = logging.getLogger(__name__)

FORMAT = 1
KINDS = ("subtopics", "questions")


def prompt_key(topic, template: str, provider: str, model: str) -> str:
    """What decides a list prompt of `topic` and its answer, hashed: the topic's name,
    description and counts, the template's text, the generator's provider and model."""
    parts = {"topic": topic.name, "description": topic.description or "", "subtopics": int(topic.subtopics),
             "questions_per_subtopic": int(topic.questions_per_subtopic), "template": template,
             "provider": provider, "model": model}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


@dataclass(frozen=True)
class Stall:
    """One item that added nothing at its last try: its topic, the prompt's key, the date (UTC,
    YYYY-MM-DD) and how many items (subtopics of the topic, questions of the subtopic) it had."""

    topic: str
    key: str
    at: str
    have: int


class Stalls:
    """The stalls of a project, by kind then item. Thread-safe; `save()` writes them when
    something changed."""

    def __init__(self, paths: ProjectPaths, entries: dict[str, dict[str, Stall]] | None = None):
        self._path = paths.stalls
        self._entries = {kind: dict((entries or {}).get(kind, {})) for kind in KINDS}
        self._lock = threading.Lock()
        self._changed = False

    def held(self, kind: str, item: str, key: str) -> Stall | None:
        """The stall of `item` when it was recorded under this same `key`, else None."""
        stall = self._entries[kind].get(item)
        return stall if stall is not None and stall.key == key else None

    def of_item(self, kind: str, item: str) -> bool:
        return item in self._entries[kind]

    def of_topic(self, kind: str, topic: str) -> list[tuple[str, Stall]]:
        return [(item, s) for item, s in self._entries[kind].items() if s.topic == topic]

    def record(self, kind: str, item: str, topic: str, key: str, have: int) -> None:
        with self._lock:
            self._entries[kind][item] = Stall(topic, key, today(), int(have))
            self._changed = True

    def clear(self, kind: str, item: str) -> None:
        with self._lock:
            if self._entries[kind].pop(item, None) is not None:
                self._changed = True

    def to_json(self) -> dict:
        return {"format": FORMAT,
                **{kind: {item: asdict(s) for item, s in sorted(self._entries[kind].items())} for kind in KINDS}}

    def save(self) -> None:
        """Rewrite the file when an entry changed. A failure only logs: the items are asked again."""
        with self._lock:
            if not self._changed:
                return
            data = json.dumps(self.to_json(), separators=(",", ":")).encode()
            self._changed = False
        try:
            atomic_write_bytes(self._path, data)
        except OSError as e:
            log.warning("cannot write %s: %s (what added nothing is asked again)", self._path, e.strerror)


def load(paths: ProjectPaths) -> Stalls:
    """The project's stalls (none when the file is missing, unreadable or of another format)."""
    try:
        with open(paths.stalls, "rb") as f:
            data = json.loads(f.read())
        if data.get("format") != FORMAT:
            return Stalls(paths)
        entries = {kind: {item: Stall(str(s["topic"]), str(s["key"]), str(s["at"]), int(s["have"]))
                          for item, s in data.get(kind, {}).items()} for kind in KINDS}
        return Stalls(paths, entries)
    except FileNotFoundError:
        return Stalls(paths)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        log.debug("%s: not used (%s); every item is asked again", paths.stalls, e)
        return Stalls(paths)
