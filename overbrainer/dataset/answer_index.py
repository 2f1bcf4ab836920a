"""The answer of every question in answers.jsonl (its last line with the ID: records.latest)
without the answers themselves: per question ID, the byte offset of that line, its topic and
subtopic (interned: a number) and whether it is usable or why it is excluded. Built in one
streaming pass; memory about 150 bytes per question ID, whatever the answers' size
(docs/data-files.md#memory)."""

from __future__ import annotations

import os
from array import array
from typing import Callable

from .ids import packed
from .jsonl import iter_records
from .records import EXCLUSIONS, Example

USABLE = -1  # status of a usable answer; otherwise the index of its reason in EXCLUSIONS
_STATUS = {reason: n for n, reason in enumerate(EXCLUSIONS)}


class AnswerIndex:
    """Question IDs numbered in the order of their first line; per number, the latest line's
    `offset`, `group` (an index into `groups`, the (topic, subtopic) pairs) and `status`."""

    def __init__(self) -> None:
        self.number: dict[int | str, int] = {}  # packed ID (ids.packed) -> its number
        self.keys: list[int | str] = []  # number -> packed ID
        self.offset = array("Q")
        self.group = array("I")
        self.status = array("b")
        self.groups: list[tuple[str, str]] = []
        self._group_of: dict[tuple[str, str], int] = {}
        self.text_ids = False  # some ID is not 32 lowercase hex digits (kept as its text)
        self.hits: dict[int, str] = {}  # number -> the source its usable answer overlaps (decontamination)

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, offset: int, ex: Example) -> None:
        """The line at `offset` holds `ex`: it supersedes any earlier answer with its ID."""
        pair = (ex.topic, ex.subtopic)
        g = self._group_of.get(pair)
        if g is None:
            g = self._group_of[pair] = len(self.groups)
            self.groups.append(pair)
        reason = ex.meta.excluded
        status = USABLE if reason is None else _STATUS[reason]
        key = packed(ex.id)
        n = self.number.get(key)
        if n is None:
            self.number[key] = len(self.keys)
            self.keys.append(key)
            self.offset.append(offset)
            self.group.append(g)
            self.status.append(status)
            self.text_ids = self.text_ids or isinstance(key, str)
        else:
            self.offset[n] = offset
            self.group[n] = g
            self.status[n] = status

    def topic(self, n: int) -> str:
        return self.groups[self.group[n]][0]

    def reason(self, n: int) -> str | None:
        status = self.status[n]
        return None if status == USABLE else EXCLUSIONS[status]


def index_answers(path: str | os.PathLike,
                  screen: Callable[[Example], str | None] | None = None) -> AnswerIndex:
    """Read answers.jsonl at `path` once (strictly, like every reader) into an AnswerIndex.
    `screen(ex)`: for a usable answer, the source of contamination it overlaps, or None; the
    latest answer of a question that overlaps one is in `index.hits`."""
    index = AnswerIndex()
    for offset, ex in iter_records(path, Example, offsets=True):
        index.add(offset, ex)  # type: ignore[arg-type]
        if screen is not None:
            n = index.number[packed(ex.id)]  # type: ignore[attr-defined]
            source = screen(ex) if ex.meta.excluded is None else None  # type: ignore[attr-defined]
            if source is None:
                index.hits.pop(n, None)
            else:
                index.hits[n] = source
    return index
