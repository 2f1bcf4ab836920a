"""Decontamination: the n-gram rule, the hash index, the benchmark readers, the configuration
and the split's exclusions (docs/stages.md#decontamination)."""

from __future__ import annotations

import json
import sys

import pytest

from overbrainer.config.model import Benchmark
from overbrainer.config.read import parse_config
from overbrainer.dataset.jsonl import read_records, rewrite
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.dataset.quality import benchmarks
from overbrainer.dataset.quality.decontam import HashIndex, Screen, units, words
from overbrainer.dataset.records import Example, Message, Meta, Question
from overbrainer.dataset.split import run_split
from overbrainer.errors import ConfigError

LONG = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May."


def test_words_follow_the_harness_normalization():
    # ASCII letters lowercased, ASCII punctuation deleted (not replaced), split on whitespace.
    assert words("Don't STOP, x-y!  Über\tdone.") == ["dont", "stop", "xy", "Über", "done"]
    assert words(" ,,  ... ") == []


def test_units_are_13_grams_of_a_long_text():
    ws = words(LONG)
    assert len(ws) == 20
    assert len(units(LONG)) == 20 - 13 + 1
    # Case, punctuation and spacing do not matter; one changed word in every 13-gram does.
    assert units(LONG.upper().replace(",", " ;").replace(" ", "  ")) == units(LONG)
    assert units(LONG) & units("Preface: " + LONG + " The end.")
    changed = " ".join(w if i != 10 else "X" for i, w in enumerate(LONG.split()))
    assert not units(LONG) & units(changed)  # word 10 is in each of the 8 13-grams of 20 words
    changed = " ".join(w if i != 0 else "X" for i, w in enumerate(LONG.split()))
    assert len(units(LONG) & units(changed)) == 7  # only the first 13-gram holds word 0
    assert units(LONG, 3) != units(LONG)


def test_a_short_text_is_one_unit_its_whole_text():
    assert units("What is 2 + 2?") == units("what is 2 2")
    assert len(units("What is 2 + 2?")) == 1
    # Never found inside a longer text, and a text without a word has no unit.
    assert not units("what is 2 2") & units("So, what is 2 + 2 and three more words here now ok fine")
    assert units("?!") == set() and units("") == set()


def test_hash_index_merges_its_runs_and_keeps_each_hash_once(monkeypatch):
    monkeypatch.setattr(HashIndex, "PENDING", 4)
    index = HashIndex()
    for start in range(0, 100, 3):
        index.add(range(start, start + 5))  # overlapping ranges: duplicates across runs
    assert len(index) == 104
    assert 0 in index and 103 in index and 104 not in index
    assert index.hits([500, 7]) and not index.hits([500, 600])
    index.add([2**64 - 1])
    assert 2**64 - 1 in index and len(index) == 105
    assert not HashIndex().hits([1])


def test_screen_names_the_first_source_a_text_overlaps():
    screen = Screen()
    screen.add_source("a.jsonl", ["unrelated text", LONG])
    screen.add_source("b.jsonl", ["What is 2 + 2?"])
    assert screen.overlaps("Please answer: " + LONG.lower()) == "a.jsonl"
    assert screen.overlaps("something else", "what is 2 2") == "b.jsonl"
    assert screen.overlaps("What is 2 + 2 exactly?") is None
    assert screen.overlaps("") is None


def test_jsonl_benchmark_reads_every_string_or_the_fields(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps({"q": "first", "n": 3, "choices": ["x", {"t": "y"}], "a": "ans"}) + "\n\n"
                    + json.dumps({"q": "second", "a": None}) + "\n")
    assert list(benchmarks.texts(tmp_path, Benchmark("b.jsonl"))) == ["first", "x", "y", "ans", "second"]
    assert list(benchmarks.texts(tmp_path, Benchmark("b.jsonl", ("q", "missing")))) == ["first", "second"]


def test_parquet_benchmark_reads_by_batches(tmp_path):
    pa = pytest.importorskip("pyarrow")  # in the `test` extra: installed wherever the suite runs
    import pyarrow.parquet as pq

    table = pa.table({"problem": [f"problem {i}" for i in range(600)], "level": list(range(600)),
                      "answer": [f"answer {i}" for i in range(600)]})
    pq.write_table(table, tmp_path / "m.parquet", row_group_size=100)
    got = list(benchmarks.texts(tmp_path, Benchmark("m.parquet")))
    assert len(got) == 1200 and got[:2] == ["problem 0", "answer 0"]
    assert list(benchmarks.texts(tmp_path, Benchmark("m.parquet", ("answer",))))[-1] == "answer 599"
    screen = benchmarks.screen(tmp_path, [Benchmark("m.parquet", ("problem",))], 13)
    assert screen.overlaps("Problem 42") == "m.parquet" and screen.overlaps("answer 42") is None


def test_benchmark_problems_are_configuration_errors(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"^pipeline.decontaminate: bench/x.jsonl: no such file$"):
        benchmarks.check(tmp_path, [Benchmark("bench/x.jsonl")])
    (tmp_path / "bench").mkdir()
    with pytest.raises(ConfigError, match=r"bench: not a file"):
        benchmarks.check(tmp_path, [Benchmark("bench")])
    (tmp_path / "bad.jsonl").write_text('{"q": "ok"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"pipeline.decontaminate: bad.jsonl: line 2 is not a JSON record"):
        benchmarks.screen(tmp_path, [Benchmark("bad.jsonl")], 13)
    (tmp_path / "m.parquet").write_bytes(b"not parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ConfigError, match=r"m.parquet: reading Parquet needs pyarrow: "
                                          r"pip install 'overbrainer\[parquet\]'") as e:
        benchmarks.check(tmp_path, [Benchmark("m.parquet")])
    assert e.value.exit_code == 2


def test_a_file_that_is_not_parquet_is_a_configuration_error(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "m.parquet").write_bytes(b"not parquet")
    with pytest.raises(ConfigError, match=r"m.parquet: not a readable Parquet file"):
        benchmarks.screen(tmp_path, [Benchmark("m.parquet")], 13)


def test_labels_are_file_names_unless_two_are_the_same():
    got = benchmarks.labels([Benchmark("a/test.jsonl"), Benchmark("b/test.jsonl"), Benchmark("c/gsm8k.jsonl")])
    assert got == ["a/test.jsonl", "b/test.jsonl", "gsm8k.jsonl"]


BASE = {"project": {"name": "p"}, "providers": {"l": {"protocol": "openai"}},
        "roles": {"generator": {"provider": "l", "model": "m"}, "parent": {"provider": "l", "model": "m"}}}


def _pipeline(pipeline: dict, environ: dict | None = None):
    return parse_config(dict(BASE, pipeline=pipeline), environ or {}).pipeline


def test_configuration_of_decontamination():
    p = _pipeline({})
    assert (p.decontaminate, p.decontaminate_ngram, p.decontaminate_eval) == ((), 13, True)
    p = _pipeline({"decontaminate": ["bench/g.jsonl", {"path": "m.parquet", "fields": ["problem"]}],
                   "decontaminate_ngram": 8, "decontaminate_eval": False})
    assert p.decontaminate == (Benchmark("bench/g.jsonl"), Benchmark("m.parquet", ("problem",)))
    assert (p.decontaminate_ngram, p.decontaminate_eval) == (8, False)
    env = {"OVERBRAINER_PIPELINE__DECONTAMINATE": "a.jsonl, b.parquet"}
    assert _pipeline({}, env).decontaminate == (Benchmark("a.jsonl"), Benchmark("b.parquet"))


@pytest.mark.parametrize("pipeline, problem", [
    ({"decontaminate": "a.jsonl"}, "pipeline.decontaminate: expected a list of paths"),
    ({"decontaminate": [""]}, "pipeline.decontaminate[0]: expected a path"),
    ({"decontaminate": [{"fields": ["q"]}]}, "missing field `pipeline.decontaminate[0].path`"),
    ({"decontaminate": [{"path": "a", "fields": "q"}]}, "pipeline.decontaminate[0].fields: expected a list"),
    ({"decontaminate": [{"path": "a", "other": 1}]}, "unknown field `pipeline.decontaminate[0].other`"),
    ({"decontaminate_ngram": 0}, "pipeline.decontaminate_ngram: must be at least 1"),
    ({"decontaminate_ngram": 65}, "pipeline.decontaminate_ngram: must be at most 64"),
])
def test_configuration_errors(pipeline, problem):
    with pytest.raises(ConfigError) as e:
        _pipeline(pipeline)
    assert any(p.startswith(problem) for p in e.value.problems), e.value.problems


# --- the split ------------------------------------------------------------------------------


def _example(i: int, question: str, answer: str = "an answer") -> Example:
    return Example(f"{i:032x}", "t", "s", [Message("user", question), Message("assistant", answer)],
                   Meta("m", 1, 1, "stop", "none"))


def _project(tmp_path, examples: list[Example]) -> ProjectPaths:
    paths = ProjectPaths(tmp_path)
    rewrite(paths.answers, examples)
    rewrite(paths.questions, [Question(e.id, e.topic, "sid", e.subtopic, e.messages[0].content) for e in examples])
    return paths


def _question(i: int) -> str:
    return f"Question number {i}: explain how the {i}th widget of the factory line is calibrated each morning."


def test_split_leaves_out_what_overlaps_a_benchmark(tmp_path):
    examples = [_example(i, _question(i)) for i in range(20)]
    examples[3] = _example(3, "Copy: " + LONG)  # the question is a benchmark item
    examples[7] = _example(7, _question(7), "As they say, " + LONG)  # the answer quotes one
    paths = _project(tmp_path, examples)
    screen = Screen()
    screen.add_source("gsm8k.jsonl", [LONG])
    result = run_split(paths, ["t"], 0.2, 42, benchmarks=screen)
    assert result.contaminated == {"gsm8k.jsonl": 2}
    assert (result.train_count, result.eval_count) == (14, 4)
    assert result.summary() == "split: 14 train, 4 eval, 0 excluded, 2 contaminated (gsm8k.jsonl 2), 0 orphaned"
    kept = {e.id for e in read_records(paths.train, Example) + read_records(paths.eval, Example)}
    assert kept == {e.id for e in examples} - {examples[3].id, examples[7].id}
    assert result.to_dict()["contaminated_by_source"] == {"gsm8k.jsonl": 2}


def test_split_drops_from_train_the_copies_of_eval_questions(tmp_path):
    originals = [_example(i, _question(i)) for i in range(40)]
    copies = [_example(100 + i, "  " + _question(i).upper() + " ") for i in range(40)]  # each one copied
    paths = _project(tmp_path, originals + copies)
    result = run_split(paths, ["t"], 0.25, 42, eval_ngram=13)
    train, eval_ = read_records(paths.train, Example), read_records(paths.eval, Example)
    eval_units = set().union(*(units(e.messages[0].content) for e in eval_))
    assert not any(units(e.messages[0].content) & eval_units for e in train)
    # Exactly the train copies of an eval question went, nothing else.
    pairs = {e.id: int(e.id, 16) % 100 for e in originals + copies}
    in_eval = {pairs[e.id] for e in eval_}
    expected = sum(1 for e in originals + copies if pairs[e.id] in in_eval and e not in eval_)
    assert result.contaminated == {"eval": expected} and expected > 0
    assert len(train) == 80 - len(eval_) - expected == result.train_count
    without = run_split(_project(tmp_path / "b", originals + copies), ["t"], 0.25, 42)
    assert without.contaminated == {} and without.train_count == 80 - len(eval_)
