"""The deterministic, stratified train/eval split (docs/stages.md#split).

Orphaned answers (topic no longer configured, or question no longer in questions.jsonl) and
excluded answers are counted and left out. The eval size for n usable answers is
clamp(round(n × ratio), 1, n − 1) (0 when n < 2, round half away from zero); it is spread over
topics, then over each topic's subtopics, by largest remainder (ties: xxh3-64(seed, name), then
name); within a subtopic, examples sorted by (xxh3-64(seed, id), id) go to eval first. The
result depends only on topics, subtopics, IDs, the ratio and the seed, never on file order.
Order in both files: topics by name, subtopics by name, then the hash order above.

The rule, its in-memory reference (`split_examples`), and `run_split`, which splits the
project's files by the same rule in two streaming passes, without holding the examples:

Pass 1 indexes answers.jsonl (answer_index: per question ID the offset of its latest line, its
topic and subtopic, usable or why excluded) and marks the IDs that questions.jsonl holds. The
quotas come from the counts (`layout`); each subtopic's usable answers are ordered by
(xxh3-64(id, seed), id). Pass 2 writes train.jsonl and eval.jsonl together, each through a
temp file line by line (jsonl.rewriting), reading every chosen answer again at its offset and
writing it as `rewrite` would. Memory: the index, plus while one subtopic is ordered its
usable answers' sort keys; never the examples (docs/data-files.md#memory).

Decontamination (quality/decontam.py, docs/stages.md#decontamination): with benchmarks, pass 1 screens
every usable answer (its question and answer texts) and a hit is left out before the quotas,
counted under the benchmark's name. With `eval_ngram`, pass 2 writes eval first while it
indexes the n-grams of the eval examples' questions (a HashIndex, 8 bytes per distinct n-gram:
a question is short, so a few KB per hundred eval examples; the eval answers' n-grams would make
it grow with the dataset, 15 MB at 5,000 eval examples), then writes train without the examples
whose question overlaps it (counted as `eval`).
"""

from __future__ import annotations

import logging
import math
from array import array
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping

import xxhash

from overbrainer.errors import OverbrainerError

from .answer_index import USABLE, AnswerIndex, index_answers
from .ids import packed, unpacked
from .jsonl import LineReader, LineWriter, iter_records, rewriting
from .quality.decontam import HashIndex, Screen, units
from .quality.verdicts import GATE_REASONS, gate_drops, gated_numbers
from .records import EXCLUSIONS, Example, Question, latest

_U64 = (1 << 64) - 1
EVAL = "eval"  # the source name of an overlap with the eval split

log = logging.getLogger(__name__)


def seeded_hash(data: str, seed: int) -> int:
    """xxh3-64 of `data`'s UTF-8 bytes with `seed` taken modulo 2⁶⁴."""
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
                   key=lambda i: (-(groups[i][1] * units % total), seeded_hash(groups[i][0], seed), groups[i][0]))
    left = max(0, units - sum(quotas))
    for i in order[:left]:
        quotas[i] += 1
    return quotas


def layout(sizes: dict[str, dict[str, int]], ratio: float, seed: int) -> Iterator[tuple[str, str, int]]:
    """(topic, subtopic, eval quota) of every subtopic, in output order, from the number of
    usable answers per topic and subtopic (`sizes[topic][subtopic]`, each above 0)."""
    n = sum(sum(subtopics.values()) for subtopics in sizes.values())
    topics = sorted(sizes)
    topic_quotas = allocate([(t, sum(sizes[t].values())) for t in topics], eval_count(n, ratio), seed)
    for topic, topic_quota in zip(topics, topic_quotas):
        subtopics = sorted(sizes[topic])
        quotas = allocate([(s, sizes[topic][s]) for s in subtopics], topic_quota, seed)
        for subtopic, quota in zip(subtopics, quotas):
            yield topic, subtopic, quota


def stratify(examples: Iterable[Example], ratio: float, seed: int) -> tuple[list[Example], list[Example]]:
    """(train, eval) of usable `examples`, in memory (the files are split by `run_split`)."""
    tree: dict[str, dict[str, list[Example]]] = {}
    for ex in examples:
        tree.setdefault(ex.topic, {}).setdefault(ex.subtopic, []).append(ex)
    sizes = {topic: {subtopic: len(group) for subtopic, group in subtopics.items()}
             for topic, subtopics in tree.items()}
    train: list[Example] = []
    eval_: list[Example] = []
    for topic, subtopic, quota in layout(sizes, ratio, seed):
        group = sorted(tree[topic][subtopic], key=lambda ex: (seeded_hash(ex.id, seed), ex.id))
        eval_.extend(group[:quota])
        train.extend(group[quota:])
    return train, eval_


@dataclass
class SplitResult:
    """What a split did, in counts (the examples themselves are only in the files)."""

    written_train: int = 0  # examples in train.jsonl (every topic)
    written_eval: int = 0
    train_count: int = 0  # of the counted topics (all topics without --topic)
    eval_count: int = 0
    excluded: dict[str, int] = field(default_factory=dict)  # reason -> n, fixed order, n > 0 only
    orphaned: int = 0
    total: int = 0  # answers of the counted topics (StageStarted total)
    orphaned_usable: int = 0  # usable answers orphaned, all topics
    usable: int = 0  # usable answers split, all topics
    contaminated: dict[str, int] = field(default_factory=dict)  # source ("eval", a benchmark) -> n > 0
    gated: dict[str, int] = field(default_factory=dict)  # gate reason -> n (dataset/quality/verdicts.py), n > 0 only
    kept_output_tokens: int = 0  # meta.output_tokens of the answers in train and eval, all topics

    @property
    def contaminated_total(self) -> int:
        return sum(self.contaminated.values())

    @property
    def excluded_total(self) -> int:
        return sum(self.excluded.values())

    @property
    def all_orphaned(self) -> bool:
        """True when answers would have been usable but every one of them is orphaned."""
        return self.orphaned_usable > 0 and self.usable == 0

    def summary(self) -> str:
        """`split: 90 train, 10 eval, 3 excluded (truncated 3), 2 contaminated (eval 1,
        gsm8k_test.jsonl 1), 2 orphaned` (see `split_summary`)."""
        return split_summary(self.train_count, self.eval_count, self.excluded, self.gated, self.contaminated,
                            self.orphaned)

    def to_dict(self) -> dict:
        return {"stage": "split", "train": self.train_count, "eval": self.eval_count,
                "excluded": self.excluded_total, "excluded_by_reason": dict(self.excluded),
                "contaminated": self.contaminated_total, "contaminated_by_source": dict(self.contaminated),
                "orphaned": self.orphaned}


def split_summary(train: int, eval_: int, excluded: dict[str, int], gated: dict[str, int],
                 contaminated: dict[str, int], orphaned: int) -> str:
    """The split's summary line, from its counts (each dict in its fixed order; zeros left out):
    `split: 90 train, 10 eval, 3 excluded (truncated 3), 1 gated (language 1), 2 contaminated
    (eval 1, gsm8k_test.jsonl 1), 2 orphaned` (gated and contaminated only when there are some)."""
    text = f"{sum(excluded.values())} excluded" + _parts(excluded)
    if any(gated.values()):
        text += f", {sum(gated.values())} gated" + _parts(gated)
    return f"split: {train} train, {eval_} eval, {text}, {_contaminated_text(contaminated)}{orphaned} orphaned"


def _parts(counts: dict[str, int]) -> str:
    shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v > 0)
    return f" ({shown})" if shown else ""


def _contaminated_text(by_source: dict[str, int]) -> str:
    """`2 contaminated (eval 1, gsm8k_test.jsonl 1), ` or nothing when there is none."""
    if not by_source:
        return ""
    return (f"{sum(by_source.values())} contaminated ("
            + ", ".join(f"{k} {v}" for k, v in by_source.items()) + "), ")


def counting(counted: str | Iterable[str] | None) -> Callable[[str], bool]:
    """Whether a topic is counted: every topic, or the --topic name, or the names given."""
    if counted is None:
        return lambda topic: True
    return ({counted} if isinstance(counted, str) else set(counted)).__contains__


def split(examples: Iterable[Example], questions: Iterable[Question | str], topics: Iterable,
          eval_ratio: float, seed: int, *, counted: str | Iterable[str] | None = None) -> SplitResult:
    """`split_examples`' counts."""
    return split_examples(examples, questions, topics, eval_ratio, seed, counted=counted)[0]


def split_examples(examples: Iterable[Example], questions: Iterable[Question | str], topics: Iterable,
                   eval_ratio: float, seed: int, *,
                   counted: str | Iterable[str] | None = None) -> tuple[SplitResult, list[Example], list[Example]]:
    """The split in memory, with its (train, eval) examples: the rule's reference, for tests and
    benchmarks (the files are split by `run_split`, which gives the same result).
    `topics`: the configured topics (names or objects with `.name`); `questions`: Question
    records or their IDs; `counted`: a topic name (--topic) or names that restrict what is
    counted (the files always hold every topic's usable answers). Of several answers to one
    question only the last counts (records.latest)."""
    configured = {t if isinstance(t, str) else t.name for t in topics}
    known = {q if isinstance(q, str) else q.id for q in questions}
    is_counted = counting(counted)
    result = SplitResult()
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
    train, eval_ = stratify(usable, eval_ratio, seed)
    result.written_train, result.written_eval = len(train), len(eval_)
    result.kept_output_tokens = sum(ex.meta.output_tokens for ex in train + eval_ if ex.meta is not None)
    result.train_count = sum(1 for ex in train if is_counted(ex.topic))
    result.eval_count = sum(1 for ex in eval_ if is_counted(ex.topic))
    return result, train, eval_


ORPHANED_WARNING = ("all %d usable answers are orphaned (topic no longer configured or question no "
                    "longer in data/questions.jsonl): train and eval will be empty")


# --- `split` on the project's files, streaming (the module docstring's two passes).


def run_split(paths, topics: Iterable, eval_ratio: float, seed: int, *,
              counted: str | Iterable[str] | None = None, benchmarks: Screen | None = None,
              eval_ngram: int | None = None, gate: Mapping[str, str] | None = None) -> SplitResult:
    """Split the answers of `paths` (ProjectPaths) and rewrite train/eval, with the result of
    `split_examples` on the same records (without decontamination and the gate). Warns when
    everything usable is orphaned. `topics`: the configured ones (names or objects with `.name`);
    `counted`: see `split`; `benchmarks`: the benchmark files' Screen (an answer that
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
