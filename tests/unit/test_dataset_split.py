import json
import logging
import random
from collections import Counter

import pytest
import xxhash

from overbrainer.dataset import ids
from overbrainer.dataset.jsonl import dumps, read_records, rewrite
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.dataset.records import Example, Message, Meta, Question
from overbrainer.dataset.split import allocate, eval_count, round_half_away, run_split, split, split_examples, stratify


def example(subtopic, n, topic="t", excluded=None):
    return Example(ids.of(subtopic, str(n)), topic, subtopic,
                   [Message("user", f"q{n}"), Message("assistant", "a")],
                   Meta("m", 1, 2, "stop", "raw", excluded))


def grid(topics, subtopics, size):
    return [example(f"{t}{s}", n, topic=t) for t in topics for s in range(subtopics) for n in range(size)]


def uniform(groups, size):
    return [example(f"s{g}", n) for g in range(groups) for n in range(size)]


def sizes(pair):
    train, eval_ = pair
    return len(train), len(eval_)


def test_each_subtopic_contributes_its_share():
    data = [example("a", n) for n in range(20)] + [example("b", n) for n in range(10)]
    train, eval_ = stratify(data, 0.1, 42)
    assert len(train) + len(eval_) == 30
    assert Counter(e.subtopic for e in eval_) == {"a": 2, "b": 1}


def test_many_small_subtopics_still_give_an_eval_set():
    assert sizes(stratify(uniform(20, 1), 0.1, 42)) == (18, 2)
    assert stratify(uniform(20, 1), 0.1, 42) == stratify(uniform(20, 1), 0.1, 42)


def test_the_ratio_holds_on_the_whole_set():
    train, eval_ = stratify(uniform(7, 15), 0.1, 42)
    assert (len(train), len(eval_)) == (94, 11)
    counts = Counter(e.subtopic for e in eval_)
    assert all(1 <= counts[f"s{g}"] <= 2 for g in range(7))


def test_every_topic_gets_its_share():
    _, eval_ = stratify(grid("abcd", 10, 5), 0.1, 42)
    assert Counter(e.topic for e in eval_) == {"a": 5, "b": 5, "c": 5, "d": 5}
    _, eval_ = stratify(grid("abc", 30, 3), 0.1, 42)
    assert Counter(e.topic for e in eval_) == {"a": 9, "b": 9, "c": 9}


def test_small_sets():
    assert sizes(stratify(uniform(1, 1), 0.1, 42)) == (1, 0)
    assert sizes(stratify(uniform(2, 1), 0.1, 42)) == (1, 1)
    assert sizes(stratify(uniform(2, 1), 0.9, 42)) == (1, 1)
    assert sizes(stratify(uniform(1, 1), 0.9, 42)) == (1, 0)
    assert sizes(stratify(uniform(1, 10), 0.99, 42)) == (1, 9)
    assert stratify([], 0.1, 42) == ([], [])


def test_rounding_is_half_away_from_zero():
    assert [round_half_away(x) for x in (0.5, 1.5, 2.5, -2.5, 0.49999999999999994, 2.4)] == [1, 2, 3, -3, 0, 2]
    assert eval_count(25, 0.1) == 3  # Python's round(2.5) would give 2
    assert eval_count(5, 0.1) == 1
    assert eval_count(105, 0.1) == 11


def test_allocation_breaks_ties_by_seeded_hash_then_name():
    groups = [("x", 1), ("y", 1), ("z", 1)]
    order = sorted("xyz", key=lambda n: (xxhash.xxh3_64_intdigest(n.encode(), seed=9), n))
    quotas = dict(zip("xyz", allocate(groups, 1, 9)))
    assert quotas[order[0]] == 1 and sum(quotas.values()) == 1
    assert allocate([("a", 0)], 0, 1) == [0]
    # floors 1 and 0, remainders 2 and 2: the left-over unit goes by the seeded hash
    first = min("ab", key=lambda n: xxhash.xxh3_64_intdigest(n.encode(), seed=0))
    assert allocate([("a", 3), ("b", 1)], 2, 0) == ([2, 0] if first == "a" else [1, 1])
    assert allocate([("a", 5), ("b", 3)], 3, 0) == [2, 1]  # remainders 7 and 1


def test_deterministic_independent_of_file_order_and_seeded():
    data = [example("a", n) for n in range(20)] + [example("b", n) for n in range(10)]
    assert stratify(data, 0.2, 7) == stratify(list(reversed(data)), 0.2, 7)
    assert stratify(data, 0.2, 1)[1] != stratify(data, 0.2, 2)[1]
    picked = lambda seed: {e.subtopic for e in stratify(grid("abc", 30, 3), 0.1, seed)[1]}  # noqa: E731
    assert picked(1) == picked(1) and picked(1) != picked(2)


def test_within_a_subtopic_seeded_hash_order_goes_to_eval_first():
    data = [example("a", n) for n in range(10)]
    train, eval_ = stratify(data, 0.3, 5)
    ordered = sorted(data, key=lambda e: (xxhash.xxh3_64_intdigest(e.id.encode(), seed=5), e.id))
    assert eval_ == ordered[:3] and train == ordered[3:]


def test_output_order_topics_then_subtopics_by_name():
    data = grid("ba", 2, 4)
    train, eval_ = stratify(data, 0.25, 3)
    assert [(e.topic, e.subtopic) for e in train] == sorted((e.topic, e.subtopic) for e in train)
    assert [e.topic for e in eval_] == sorted(e.topic for e in eval_)


def questions_for(examples):
    return [Question(e.id, e.topic, "sid", e.subtopic, "q") for e in examples]


def test_orphaned_and_excluded_are_counted_and_left_out():
    usable = uniform(3, 30)
    excluded = [example("s0", 100 + i, excluded=r) for i, r in enumerate(["truncated"] * 3 + ["refused"])]
    gone_topic = [example("x", 1, topic="old")]
    gone_question = [example("s1", 999)]
    answers = usable + excluded + gone_topic + gone_question
    questions = questions_for(usable + excluded + gone_topic)
    result = split(answers, questions, ["t"], 0.1, 42)
    assert (result.train_count, result.eval_count) == (81, 9)
    assert result.excluded == {"truncated": 3, "refused": 1}
    assert result.orphaned == 2 and result.total == 96
    assert result.summary() == "split: 81 train, 9 eval, 4 excluded (truncated 3, refused 1), 2 orphaned"
    assert not result.all_orphaned


def test_summary_without_exclusions_and_reason_order():
    result = split(uniform(1, 4), questions_for(uniform(1, 4)), ["t"], 0.1, 42)
    assert result.summary() == "split: 3 train, 1 eval, 0 excluded, 0 orphaned"
    reasons = ["no_raw_reasoning", "empty", "truncated", "refused", "empty"]
    ex = [example("s", i, excluded=r) for i, r in enumerate(reasons)]
    result = split(ex, questions_for(ex), ["t"], 0.1, 42)
    assert result.summary() == ("split: 0 train, 0 eval, 5 excluded "
                                "(truncated 1, empty 2, refused 1, no_raw_reasoning 1), 0 orphaned")


def test_topic_option_only_restricts_counting():
    data = grid("ab", 2, 10)
    extra = [example("a0", 50, topic="a", excluded="empty"), example("b0", 50, topic="b", excluded="empty")]
    answers = data + extra
    all_topics = split_examples(answers, questions_for(answers), ["a", "b"], 0.1, 42)
    only_a = split_examples(answers, questions_for(answers), ["a", "b"], 0.1, 42, counted="a")
    assert only_a[1:] == all_topics[1:]
    only_a = only_a[0]
    assert (only_a.train_count, only_a.eval_count, only_a.excluded, only_a.total) == (18, 2, {"empty": 1}, 21)


def test_everything_orphaned_warns_and_writes_empty_files(tmp_path, caplog):
    paths = ProjectPaths(tmp_path)
    rewrite(paths.answers, uniform(1, 3))
    paths.train.write_text("stale\n")
    with caplog.at_level(logging.WARNING):
        result = run_split(paths, ["t"], 0.1, 42)
    assert result.summary() == "split: 0 train, 0 eval, 0 excluded, 3 orphaned"
    assert "all 3 usable answers are orphaned" in caplog.text
    assert paths.train.read_text() == "" and paths.eval.read_text() == ""


def test_run_split_writes_train_and_eval(tmp_path):
    paths = ProjectPaths(tmp_path)
    data = uniform(2, 10)
    rewrite(paths.answers, list(reversed(data)))
    rewrite(paths.questions, questions_for(data))
    result = run_split(paths, ["t"], 0.1, 42)
    reference, train, eval_ = split_examples(data, questions_for(data), ["t"], 0.1, 42)
    assert read_records(paths.train, Example) == train and result.written_train == 18
    assert read_records(paths.eval, Example) == eval_ and result.written_eval == 2
    assert result == reference and result.to_dict()["train"] == 18


@pytest.mark.parametrize("n, ratio, expected", [(10, 0.5, 5), (3, 0.5, 2), (100, 0.05, 5), (7, 0.01, 1)])
def test_eval_count_table(n, ratio, expected):
    assert eval_count(n, ratio) == expected


def random_answer(rng, item_id, topics):
    topic = rng.choice(topics)
    subtopic = rng.choice(["Borrowing", "Ünïcödé 🙂", "b", "B", "z z"])
    excluded = rng.choice([None, None, None, "truncated", "empty", "refused", "no_raw_reasoning"])
    text = rng.choice(["plain", "é ü 日本 🙂", 'quote " and \\ backslash', "line\nbreak"])
    return Example(item_id, topic, subtopic, [Message("user", text), Message("assistant", "a", rng.choice([None, "r"]))],
                   Meta("m", rng.randrange(100), rng.randrange(100), "stop", "raw", excluded))


def write_lines(path, records, rng):
    """Compact lines as the tool writes them, or spaced and ASCII-escaped ones (split rewrites
    them compact); sometimes a valid last line without its newline."""
    lines = [json.dumps(r.to_dict()) if rng.random() < 0.3 else dumps(r) for r in records]
    text = "\n".join(lines) + ("" if lines and rng.random() < 0.3 else "\n") if lines else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("case", range(40))
def test_streaming_split_equals_the_in_memory_reference(tmp_path, case):
    rng = random.Random(case)
    topics = ["a", "b", "ü", "old"]
    ids_ = [ids.of("q", str(case), str(n)) for n in range(rng.randrange(0, 60))]
    ids_ += rng.sample(["Q-1", "F" * 32, "short", "ÿ"], rng.randrange(0, 5))  # IDs not 32 lowercase hex
    answers = [random_answer(rng, rng.choice(ids_), topics) for _ in range(rng.randrange(0, 90))] if ids_ else []
    questions = [Question(i, "a", "sid", "s", "q") for i in ids_ if rng.random() < 0.85]
    paths = ProjectPaths(tmp_path)
    write_lines(paths.answers, answers, rng)
    write_lines(paths.questions, questions, rng)
    configured = rng.sample(topics[:3], rng.randrange(1, 4))
    counted = rng.choice([None, "a", ["a", "ü"]])
    ratio, seed = rng.choice([0.0, 0.1, 0.5, 0.99, 1.0, rng.random()]), rng.choice([0, 42, -1, 2**64 + 5])
    reference, train, eval_ = split_examples(read_records(paths.answers, Example), read_records(paths.questions, Question),
                                             configured, ratio, seed, counted=counted)
    result = run_split(paths, configured, ratio, seed, counted=counted)
    assert result == reference
    assert paths.train.read_bytes() == "".join(dumps(e) + "\n" for e in train).encode("utf-8")
    assert paths.eval.read_bytes() == "".join(dumps(e) + "\n" for e in eval_).encode("utf-8")
    assert sorted(p.name for p in paths.data.iterdir()) == sorted(
        {"answers.jsonl", "questions.jsonl", "train.jsonl", "eval.jsonl"})


def test_a_superseded_answer_is_split_by_its_latest_line(tmp_path):
    paths = ProjectPaths(tmp_path)
    first = example("s", 1, excluded="truncated")
    again = Example(first.id, "t", "s", [Message("user", "q1"), Message("assistant", "better")], Meta("m", 1, 2, "stop", "raw"))
    others = uniform(1, 3)
    rewrite(paths.answers, [first] + others + [again])
    rewrite(paths.questions, questions_for(others + [first]))
    result = run_split(paths, ["t"], 0.25, 42)
    written = read_records(paths.train, Example) + read_records(paths.eval, Example)
    assert result.summary() == "split: 3 train, 1 eval, 0 excluded, 0 orphaned"
    assert again in written and first not in written and len(written) == 4


def test_an_answers_file_changed_between_the_passes_is_an_error(tmp_path, monkeypatch):
    from overbrainer.dataset import split as split_module
    from overbrainer.errors import OverbrainerError

    paths = ProjectPaths(tmp_path)
    data = uniform(1, 4)
    rewrite(paths.answers, data)
    rewrite(paths.questions, questions_for(data))
    paths.train.write_text("old\n")
    real = split_module.index_answers

    def index_then_change(path, *screen):
        index = real(path, *screen)
        rewrite(path, list(reversed(data)))  # same lengths, other IDs at the offsets
        return index

    monkeypatch.setattr(split_module, "index_answers", index_then_change)
    with pytest.raises(OverbrainerError, match="changed while it was being split"):
        run_split(paths, ["t"], 0.25, 42)
    assert paths.train.read_text() == "old\n" and not paths.eval.exists()
    assert sorted(p.name for p in paths.data.iterdir()) == ["answers.jsonl", "questions.jsonl", "train.jsonl"]
