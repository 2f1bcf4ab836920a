"""The list items a stage holds back: a topic (subtopics) or a subtopic (questions) whose last
round added nothing, recorded in `.overbrainer/stalls.json` (dataset/stalls.py) under the key of
its prompt. Held while that key is the same (the topic's settings, the template text, the
generator's provider and model); `--force` holds nothing back. The stages, `--plan` and the
saved figures' shortcut ask the same `Held`."""

from __future__ import annotations

from collections import Counter

from overbrainer.config.model import Topic
from overbrainer.dataset import stalls as dataset_stalls
from overbrainer.dataset.stalls import Stall
from overbrainer.pipeline.context import StageContext

TEMPLATES = {"subtopics": "subtopics.txt", "questions": "questions.txt"}
HINT = ("edit the topic's description or counts, the prompt (prompts/{template}) or the generator's model "
        "to ask again, or rerun with --force")


class Held:
    """`kind`: "subtopics" or "questions". Templates are read only when a stall needs its key."""

    def __init__(self, ctx: StageContext, kind: str, force: bool = False):
        self.kind = kind
        self._ctx = ctx
        self.force = force
        self.stalls = dataset_stalls.load(ctx.paths)
        self._keys: dict[str, str] = {}
        self._source: str | None = None
        self.count = 0  # items held back so far (`hold`)
        self.latest: str | None = None  # the latest date among them

    def key(self, topic: Topic) -> str:
        key = self._keys.get(topic.name)
        if key is None:
            if self._source is None:
                name = TEMPLATES[self.kind]
                self._source = self._ctx.templates(name).source(name)
            role = self._ctx.role("generator")
            key = self._keys[topic.name] = dataset_stalls.prompt_key(topic, self._source, role.provider, role.model)
        return key

    def stall(self, topic: Topic, item: str | None = None) -> Stall | None:
        """The recorded stall of `item` (default: the topic itself) under its prompt's current key."""
        if self.force:
            return None
        item = topic.name if item is None else item
        if not self.stalls.of_item(self.kind, item):
            return None
        return self.stalls.held(self.kind, item, self.key(topic))

    def of_topic(self, topic: Topic) -> list[Stall]:
        """questions: the topic's held subtopics (their stalls under the current key)."""
        if self.force:
            return []
        return [s for _, s in self.stalls.of_topic(self.kind, topic.name) if s.key == self.key(topic)]

    def hold(self, stall: Stall, n: int = 1) -> None:
        """`n` items held back, stalled at `stall.at` (counted for the summary)."""
        self.count += n
        if self.latest is None or stall.at > self.latest:
            self.latest = stall.at

    def record(self, topic: Topic, item: str, have: int) -> None:
        self.stalls.record(self.kind, item, topic.name, self.key(topic), have)

    def clear(self, item: str) -> None:
        self.stalls.clear(self.kind, item)

    def save(self) -> None:
        self.stalls.save()


def hint(kind: str) -> str:
    return HINT.format(template=TEMPLATES[kind])


def fills(stalls: list[Stall]) -> Counter[int]:
    """How many of `stalls` had each number of items."""
    return Counter(s.have for s in stalls)
