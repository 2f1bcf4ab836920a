"""`split` on the project's files, streaming: the rule of split.py, without holding the examples.

Pass 1 indexes answers.jsonl (answer_index: per question ID the offset of its latest line, its
topic and subtopic, usable or why excluded) and marks the IDs that questions.jsonl holds. The
quotas come from the counts (split.layout); each subtopic's usable answers are ordered by
(xxh3-64(id, seed), id). Pass 2 writes train.jsonl and eval.jsonl together, each through a
temp file line by line (jsonl.rewriting), reading every chosen answer again at its offset and
writing it as `rewrite` would. Memory: the index, plus while one subtopic is ordered its
usable answers' sort keys; never the examples (docs/data-files.md#memory).

Decontamination (decontam.py, docs/stages.md#decontamination): with benchmarks, pass 1 screens
every usable answer (its question and answer texts) and a hit is left out before the quotas,
counted under the benchmark's name. With `eval_ngram`, pass 2 writes eval first while it
indexes the n-grams of the eval examples' questions (a HashIndex, 8 bytes per distinct n-gram:
a question is short, so a few KB per hundred eval examples; the eval answers' n-grams would make
it grow with the dataset, 15 MB at 5,000 eval examples), then writes train without the examples
whose question overlaps it (counted as `eval`).
"""

from __future__ import annotations

import logging
from array import array
from typing import Callable, Iterable, Mapping

from overbrainer.errors import OverbrainerError

from .answer_index import USABLE, AnswerIndex, index_answers
from .quality.decontam import HashIndex, Screen, units
from .ids import packed, unpacked
from .jsonl import LineReader, LineWriter, iter_records, rewriting
from .records import EXCLUSIONS, Example, Question
from .split import ORPHANED_WARNING, SplitResult, counting, layout, seeded_hash
from .quality.verdicts import GATE_REASONS, gate_drops, gated_numbers

EVAL = "eval"  # the source name of an overlap with the eval split

log = logging.getLogger(__name__)


def run_split(paths, topics: Iterable, eval_ratio: float, seed: int, *,
              counted: str | Iterable[str] | None = None, benchmarks: Screen | None = None,
              eval_ngram: int | None = None, gate: Mapping[str, str] | None = None) -> SplitResult:
    """Split the answers of `paths` (ProjectPaths) and rewrite train/eval, with the result of
    split.split_examples on the same records (without decontamination and the gate). Warns when
    everything usable is orphaned. `topics`: the configured ones (names or objects with `.name`);
    `counted`: see split.split; `benchmarks`: the benchmark files' Screen (an answer that
    overlaps one is left out); `eval_ngram`: the n of the train-against-eval check (None: no
    check); `gate`: the gate's current settings (check -> digest, pipeline/gate.gate_settings): a
    usable answer whose verdict is drop is left out, counted as gated. Events and history are the
    caller's."""
    is_counted = counting(counted)
    if benchmarks:
        index = index_answers(paths.answers, lambda ex: benchmarks.overlaps(question_text(ex), answer_text(ex)))
    else:
        index = index_answers(paths.answers)
    gated = gated_numbers(paths.answers, index, gate_drops(paths.gate, gate)) if gate else {}
    known = _known(index, paths.questions)
    sources = [EVAL] + [label for label, _ in benchmarks.sources] if benchmarks else [EVAL]
    result, members = _tally(index, known, topics, is_counted, dict.fromkeys(sources, 0), gated)
    if result.all_orphaned:
        log.warning(ORPHANED_WARNING, result.orphaned_usable)
    _write(paths, index, members, (eval_ratio, seed, eval_ngram), is_counted, result)
    return result


def question_text(ex: Example) -> str:
    return "\n".join(m.content for m in ex.messages if m.role == "user")


def answer_text(ex: Example) -> str:
    return "\n".join(m.content for m in ex.messages if m.role == "assistant")


def _known(index: AnswerIndex, questions_path) -> bytearray:
    """known[n]: question number n of the index is in questions.jsonl."""
    known = bytearray(len(index))
    number = index.number
    for q in iter_records(questions_path, Question):
        n = number.get(packed(q.id))  # type: ignore[attr-defined]
        if n is not None:
            known[n] = 1
    return known


def _tally(index: AnswerIndex, known: bytearray, topics: Iterable, is_counted: Callable[[str], bool],
           contaminated: dict[str, int], gated: Mapping[int, int]) -> tuple[SplitResult, list[array]]:
    """The counts, and per group of the index the numbers of its usable answers."""
    configured = {t if isinstance(t, str) else t.name for t in topics}
    in_config = [topic in configured for topic, _ in index.groups]
    counted = [is_counted(topic) for topic, _ in index.groups]
    members = [array("I") for _ in index.groups]
    reasons = [0] * len(EXCLUSIONS)
    hits = index.hits
    gate_reasons = [0] * len(GATE_REASONS)
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
        elif n in gated:
            gate_reasons[gated[n]] += c
        elif n in hits:
            if c:
                contaminated[hits[n]] += 1
        else:
            members[g].append(n)
    result.usable = sum(map(len, members))
    result.excluded = {reason: k for reason, k in zip(EXCLUSIONS, reasons) if k}
    result.contaminated = contaminated
    result.gated = {reason: k for reason, k in zip(GATE_REASONS, gate_reasons) if k}
    return result, members


def _write(paths, index: AnswerIndex, members: list[array], settings: tuple[float, int, int | None],
           is_counted: Callable[[str], bool], result: SplitResult) -> None:
    """Pass 2: eval.jsonl, then train.jsonl (without what overlaps eval), in output order; train
    renamed first. `settings`: (eval_ratio, seed, eval_ngram)."""
    ratio, seed, ngram = settings
    group_of = {pair: g for g, pair in enumerate(index.groups) if members[g]}
    sizes: dict[str, dict[str, int]] = {}
    for (topic, subtopic), g in group_of.items():
        sizes.setdefault(topic, {})[subtopic] = len(members[g])
    seen = HashIndex() if ngram is not None else None
    rests: list[tuple[bool, array]] = []
    with LineReader(paths.answers) as source, rewriting(paths.eval) as eval_out, rewriting(paths.train) as train_out:
        for topic, subtopic, quota in layout(sizes, ratio, seed):
            order = _ordered(index, members[group_of[(topic, subtopic)]], seed)
            dropped, tokens = _copy(source, index, order[:quota], eval_out, learn=(seen, ngram))
            result.kept_output_tokens += tokens
            rests.append((is_counted(topic), array("I", order[quota:])))
            result.eval_count += quota if is_counted(topic) else 0
        for counted, rest in rests:
            dropped, tokens = _copy(source, index, rest, train_out, leak=(seen, ngram))
            result.kept_output_tokens += tokens
            if counted:
                result.train_count += len(rest) - dropped
                if dropped:
                    result.contaminated[EVAL] += dropped
    result.contaminated = {k: v for k, v in result.contaminated.items() if v}
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


def _copy(source: LineReader, index: AnswerIndex, numbers, out: LineWriter, *,
          learn: tuple[HashIndex | None, int | None] = (None, None),
          leak: tuple[HashIndex | None, int | None] = (None, None)) -> tuple[int, int]:
    """Copy the answers `numbers` to `out`; `learn`: (index, n) that takes in their questions'
    n-grams; `leak`: (index, n) whose overlap with a question leaves it out.
    Returns how many were left out, and the output tokens of those copied (the kept share's)."""
    seen, n = learn
    eval_index, leak_n = leak
    dropped = tokens = 0
    for k in numbers:
        ex = source.record_at(index.offset[k], Example)
        if packed(ex.id) != index.keys[k]:
            raise OverbrainerError(f"{source.path} changed while it was being split: run split again")
        if eval_index is not None and eval_index.hits(units(question_text(ex), leak_n)):  # type: ignore[arg-type]
            dropped += 1
            continue
        if seen is not None:
            seen.add(units(question_text(ex), n))  # type: ignore[arg-type]
        out.append(ex)
        tokens += ex.meta.output_tokens
    return dropped, tokens
