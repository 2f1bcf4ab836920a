"""The questions the `answers` stage asks, streamed from questions.jsonl: those of the selected
topics with no answer yet (with `retry_excluded`: whose latest answer is excluded), each once, in
file order. Memory: a compact key per answered (or retried) question ID, and per question asked
unless the dataset's figures say no ID stands twice; never a record's text but that of the
questions in flight."""

from __future__ import annotations

from typing import Iterable, Iterator

from overbrainer.dataset.figures import Figures
from overbrainer.dataset.ids import packed
from overbrainer.dataset.jsonl import iter_records
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.dataset.records import Example, Question


class PendingQuestions:
    """`answers`: the stored answers (an iterable of Example, read once, here). Iterate it for
    the questions to ask; `count()` says how many there are without keeping them."""

    def __init__(self, paths: ProjectPaths, names: set[str], answers: Iterable[Example],
                 retry_excluded: bool = False, *, unique: bool = False):
        self._paths = paths
        self._names = names
        self._retry = retry_excluded
        self._unique = unique  # no question ID stands twice in questions.jsonl: nothing to skip
        if retry_excluded:
            latest: dict[int | str, bool] = {}
            for ex in answers:
                latest[packed(ex.id)] = ex.excluded is not None
            self._keys = {key for key, excluded in latest.items() if excluded}
        else:
            self._keys = {packed(ex.id) for ex in answers}

    def _asks(self, key: int | str) -> bool:
        return (key in self._keys) if self._retry else (key not in self._keys)

    def _walk(self, counted: list[int] | None = None) -> Iterator[Question]:
        taken: set[int | str] | None = None if self._unique else set()
        for q in iter_records(self._paths.questions, Question):
            if q.topic not in self._names:
                continue
            if counted is not None:
                counted[0] += 1
            key = packed(q.id)
            if not self._asks(key) or (taken is not None and key in taken):
                continue
            if taken is not None:
                taken.add(key)
            yield q

    def __iter__(self) -> Iterator[Question]:
        return self._walk()

    def count(self, figures: Figures | None = None) -> tuple[int, int]:
        """(questions to ask, question records of the selected topics): from `figures` when they
        are given (the saved figures of these very files), else by reading questions.jsonl."""
        if figures is not None and not figures.duplicates:
            return pending_count(figures, self._names, self._retry)
        counted = [0]
        pending = sum(1 for _ in self._walk(counted))
        return pending, counted[0]


def pending_count(figures: Figures, names: Iterable[str], retry_excluded: bool = False) -> tuple[int, int]:
    """(questions to ask, question records) of the topics `names`, from the dataset's figures."""
    pending = total = 0
    for name in names:
        t = figures.topics.get(name)
        if t is not None:
            pending += t.retry if retry_excluded else t.unanswered
            total += t.questions
    return pending, total
