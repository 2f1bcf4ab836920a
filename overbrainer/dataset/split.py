"""The deterministic, stratified train/eval split (docs/stages.md#split).

Orphaned answers (topic no longer configured, or question no longer in questions.jsonl) and
excluded answers are counted and left out. The eval size for n usable answers is
clamp(round(n × ratio), 1, n − 1) (0 when n < 2, round half away from zero); it is spread over
topics, then over each topic's subtopics, by largest remainder (ties: xxh3-64(seed, name), then
name); within a subtopic, examples sorted by (xxh3-64(seed, id), id) go to eval first. The
result depends only on topics, subtopics, IDs, the ratio and the seed, never on file order.
Order in both files: topics by name, subtopics by name, then the hash order above.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import xxhash

from .jsonl import read_records, rewrite
from .records import EXCLUSIONS, Example, Question, latest

log = logging.getLogger(__name__)

_U64 = (1 << 64) - 1


def _hash(data: str, seed: int) -> int:
    return xxhash.xxh3_64_intdigest(data.encode("utf-8"), seed=seed & _U64)


def round_half_away(x: float) -> int:
    """Round half away from zero (Rust's f64::round), not Python's banker's rounding."""
    a = abs(x)
    f = math.floor(a)
    r = f + 1 if a - f >= 0.5 else f
    return int(-r if x < 0 else r)


def eval_count(total: int, ratio: float) -> int:
    """Eval size for `total` usable examples: clamp(round(total × ratio), 1, total − 1); 0 below 2."""
    if total < 2:
        return 0
    if 0.0 <= ratio <= 1.0:
        steps = round_half_away(float(total) * ratio)
    else:  # the original's definition, which the closed form equals for ratios in [0, 1]
        steps = sum(1 for i in range(total)
                    if round_half_away(float(i + 1) * ratio) > round_half_away(float(i) * ratio))
    return min(max(steps, 1), total - 1)


def allocate(groups: list[tuple[str, int]], units: int, seed: int) -> list[int]:
    """Spread `units` over named groups in proportion to size, by largest remainder; ties go to
    the smaller xxh3-64(seed, name), then the smaller name."""
    total = sum(size for _, size in groups)
    if total == 0:
        return [0] * len(groups)
    quotas = [size * units // total for _, size in groups]
    order = sorted(range(len(groups)),
                   key=lambda i: (-(groups[i][1] * units % total), _hash(groups[i][0], seed), groups[i][0]))
    left = max(0, units - sum(quotas))
    for i in order[:left]:
        quotas[i] += 1
    return quotas


def stratify(examples: Iterable[Example], ratio: float, seed: int) -> tuple[list[Example], list[Example]]:
    """(train, eval) of usable `examples`."""
    tree: dict[str, dict[str, list[Example]]] = {}
    n = 0
    for ex in examples:
        tree.setdefault(ex.topic, {}).setdefault(ex.subtopic, []).append(ex)
        n += 1
    topics = sorted(tree)
    topic_quotas = allocate([(t, sum(map(len, tree[t].values()))) for t in topics], eval_count(n, ratio), seed)
    train: list[Example] = []
    eval_: list[Example] = []
    for topic, topic_quota in zip(topics, topic_quotas):
        subtopics = sorted(tree[topic])
        quotas = allocate([(s, len(tree[topic][s])) for s in subtopics], topic_quota, seed)
        for subtopic, quota in zip(subtopics, quotas):
            group = sorted(tree[topic][subtopic], key=lambda ex: (_hash(ex.id, seed), ex.id))
            eval_.extend(group[:quota])
            train.extend(group[quota:])
    return train, eval_


@dataclass
class SplitResult:
    train: list[Example]
    eval: list[Example]
    train_count: int = 0  # of the counted topics (all topics without --topic)
    eval_count: int = 0
    excluded: dict[str, int] = field(default_factory=dict)  # reason -> n, fixed order, n > 0 only
    orphaned: int = 0
    total: int = 0  # answers of the counted topics (StageStarted total)
    orphaned_usable: int = 0  # usable answers orphaned, all topics
    usable: int = 0  # usable answers split, all topics

    @property
    def excluded_total(self) -> int:
        return sum(self.excluded.values())

    @property
    def all_orphaned(self) -> bool:
        """True when answers would have been usable but every one of them is orphaned."""
        return self.orphaned_usable > 0 and self.usable == 0

    def summary(self) -> str:
        """`split: 90 train, 10 eval, 3 excluded (truncated 3), 2 orphaned`."""
        excluded = f"{self.excluded_total} excluded"
        if self.excluded:
            excluded += " (" + ", ".join(f"{k} {v}" for k, v in self.excluded.items()) + ")"
        return f"split: {self.train_count} train, {self.eval_count} eval, {excluded}, {self.orphaned} orphaned"

    def to_dict(self) -> dict:
        return {"stage": "split", "train": self.train_count, "eval": self.eval_count,
                "excluded": self.excluded_total, "excluded_by_reason": dict(self.excluded),
                "orphaned": self.orphaned}


def split(examples: Iterable[Example], questions: Iterable[Question | str], topics: Iterable,
          eval_ratio: float, seed: int, *, counted: str | Iterable[str] | None = None) -> SplitResult:
    """Split the answers. `topics`: the configured topics (names or objects with `.name`);
    `questions`: Question records or their IDs; `counted`: a topic name (--topic) or names that
    restrict what is counted (the files always hold every topic's usable answers). Of several
    answers to one question only the last counts (records.latest)."""
    configured = {t if isinstance(t, str) else t.name for t in topics}
    known = {q if isinstance(q, str) else q.id for q in questions}
    if counted is None:
        is_counted = lambda topic: True  # noqa: E731
    else:
        names = {counted} if isinstance(counted, str) else set(counted)
        is_counted = names.__contains__
    result = SplitResult([], [])
    reasons = dict.fromkeys(EXCLUSIONS, 0)
    usable: list[Example] = []
    for ex in latest(examples):
        c = is_counted(ex.topic)
        result.total += c
        reason = ex.meta.excluded
        if ex.topic not in configured or ex.id not in known:
            result.orphaned += c
            result.orphaned_usable += reason is None
        elif reason is not None:
            if c:
                reasons[reason] += 1
        else:
            usable.append(ex)
    result.usable = len(usable)
    result.excluded = {k: v for k, v in reasons.items() if v}
    result.train, result.eval = stratify(usable, eval_ratio, seed)
    result.train_count = sum(1 for ex in result.train if is_counted(ex.topic))
    result.eval_count = sum(1 for ex in result.eval if is_counted(ex.topic))
    return result


def write_split(result: SplitResult, train_path: str | Path, eval_path: str | Path) -> None:
    """Rewrite train.jsonl and eval.jsonl atomically (each: temp file, fsync, rename)."""
    rewrite(train_path, result.train)
    rewrite(eval_path, result.eval)


def run_split(paths, topics: Iterable, eval_ratio: float, seed: int, *,
              counted: str | Iterable[str] | None = None) -> SplitResult:
    """Read answers and questions of `paths` (ProjectPaths), split, warn when everything usable
    is orphaned, write train/eval. Events and history are the caller's."""
    answers = read_records(paths.answers, Example)
    questions = read_records(paths.questions, Question)
    result = split(answers, questions, topics, eval_ratio, seed, counted=counted)
    if result.all_orphaned:
        log.warning("all %d usable answers are orphaned (topic no longer configured or question no "
                    "longer in data/questions.jsonl): train and eval will be empty", result.orphaned_usable)
    write_split(result, paths.train, paths.eval)
    return result
