"""`split` on the project's files, streaming: the rule of split.py, without holding the examples.

Pass 1 indexes answers.jsonl (answer_index: per question ID the offset of its latest line, its
topic and subtopic, usable or why excluded) and marks the IDs that questions.jsonl holds. The
quotas come from the counts (split.layout); each subtopic's usable answers are ordered by
(xxh3-64(id, seed), id). Pass 2 writes train.jsonl and eval.jsonl together, each through a
temp file line by line (jsonl.rewriting), reading every chosen answer again at its offset and
writing it as `rewrite` would. Memory: the index, plus while one subtopic is ordered its
usable answers' sort keys; never the examples (docs/data-files.md#memory).
"""

from __future__ import annotations

import logging
from array import array
from typing import Callable, Iterable

from overbrainer.errors import OverbrainerError

from .answer_index import USABLE, AnswerIndex, index_answers
from .ids import packed, unpacked
from .jsonl import LineReader, LineWriter, iter_records, rewriting
from .records import EXCLUSIONS, Example, Question
from .split import ORPHANED_WARNING, SplitResult, counting, layout, seeded_hash

log = logging.getLogger(__name__)


def run_split(paths, topics: Iterable, eval_ratio: float, seed: int, *,
              counted: str | Iterable[str] | None = None) -> SplitResult:
    """Split the answers of `paths` (ProjectPaths) and rewrite train/eval, with the result of
    split.split_examples on the same records. Warns when everything usable is orphaned.
    `topics`: the configured ones (names or objects with `.name`); `counted`: see split.split.
    Events and history are the caller's."""
    is_counted = counting(counted)
    index = index_answers(paths.answers)
    known = _known(index, paths.questions)
    result, members = _tally(index, known, topics, is_counted)
    if result.all_orphaned:
        log.warning(ORPHANED_WARNING, result.orphaned_usable)
    _write(paths, index, members, eval_ratio, seed, is_counted, result)
    return result


def _known(index: AnswerIndex, questions_path) -> bytearray:
    """known[n]: question number n of the index is in questions.jsonl."""
    known = bytearray(len(index))
    number = index.number
    for q in iter_records(questions_path, Question):
        n = number.get(packed(q.id))  # type: ignore[attr-defined]
        if n is not None:
            known[n] = 1
    return known


def _tally(index: AnswerIndex, known: bytearray, topics: Iterable,
           is_counted: Callable[[str], bool]) -> tuple[SplitResult, list[array]]:
    """The counts, and per group of the index the numbers of its usable answers."""
    configured = {t if isinstance(t, str) else t.name for t in topics}
    in_config = [topic in configured for topic, _ in index.groups]
    counted = [is_counted(topic) for topic, _ in index.groups]
    members = [array("I") for _ in index.groups]
    reasons = [0] * len(EXCLUSIONS)
    result = SplitResult()
    for n, (g, status) in enumerate(zip(index.group, index.status)):
        c = counted[g]
        result.total += c
        if not in_config[g] or not known[n]:
            result.orphaned += c
            result.orphaned_usable += status == USABLE
        elif status != USABLE:
            if c:
                reasons[status] += 1
        else:
            members[g].append(n)
    result.usable = sum(map(len, members))
    result.excluded = {reason: k for reason, k in zip(EXCLUSIONS, reasons) if k}
    return result, members


def _write(paths, index: AnswerIndex, members: list[array], ratio: float, seed: int,
           is_counted: Callable[[str], bool], result: SplitResult) -> None:
    """Pass 2: train.jsonl and eval.jsonl in output order, train renamed first."""
    group_of = {pair: g for g, pair in enumerate(index.groups) if members[g]}
    sizes: dict[str, dict[str, int]] = {}
    for (topic, subtopic), g in group_of.items():
        sizes.setdefault(topic, {})[subtopic] = len(members[g])
    with LineReader(paths.answers) as source, rewriting(paths.eval) as eval_out, rewriting(paths.train) as train_out:
        for topic, subtopic, quota in layout(sizes, ratio, seed):
            order = _ordered(index, members[group_of[(topic, subtopic)]], seed)
            picked, rest = order[:quota], order[quota:]
            result.kept_output_tokens += _copy(source, index, picked, eval_out) + _copy(source, index, rest, train_out)
            if is_counted(topic):
                result.eval_count += len(picked)
                result.train_count += len(rest)
    result.written_train, result.written_eval = train_out.count, eval_out.count


def _ordered(index: AnswerIndex, numbers: array, seed: int) -> list[int]:
    """`numbers` sorted by (xxh3-64(id, seed), id)."""
    keys = index.keys
    if index.text_ids:
        def key(n: int) -> tuple:
            text = unpacked(keys[n])
            return seeded_hash(text, seed), text
    else:  # every key an integer, ordered as its text
        def key(n: int) -> tuple:
            k = keys[n]
            return seeded_hash(unpacked(k), seed), k
    return sorted(numbers, key=key)


def _copy(source: LineReader, index: AnswerIndex, numbers: list[int], out: LineWriter) -> int:
    """Copy the answers `numbers` to `out`; their output tokens in all (the kept share's)."""
    tokens = 0
    for n in numbers:
        ex = source.record_at(index.offset[n], Example)
        if packed(ex.id) != index.keys[n]:
            raise OverbrainerError(f"{source.path} changed while it was being split: run split again")
        out.append(ex)
        tokens += ex.meta.output_tokens
    return tokens
