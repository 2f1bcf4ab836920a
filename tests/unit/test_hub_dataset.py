"""push --dataset's pieces: the Parquet writer (hub/parquet.py) and the dataset card
(hub/dataset_card.py) rendered from facts."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from overbrainer.hub.dataset_card import DatasetFacts, names, render, size_category
from overbrainer.hub.parquet import SplitFile, write_split
from tests.fixtures.hub_cards import dataset_card_problems, front_matter


def example(i: int, topic: str = "t", reasoning: str | None = None) -> dict:
    answer = {"role": "assistant", "content": f"answer {i} é ✓"}
    if reasoning is not None:
        answer["reasoning_content"] = reasoning
    return {"id": f"q{i:04d}", "topic": topic, "subtopic": f"s{i % 3}",
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"question {i}?"},
                         answer],
            "meta": {"model": "parent", "input_tokens": i, "output_tokens": 2 * i, "finish_reason": "stop",
                     "reasoning_kind": "raw" if reasoning else "none", "excluded": None}}


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records))


def test_a_split_reads_back_equal_in_row_groups_of_the_size_asked(tmp_path):
    records = [example(i, topic="a" if i < 4 else "b", reasoning="think" if i % 2 else None) for i in range(10)]
    write_jsonl(tmp_path / "train.jsonl", records)
    out = write_split(tmp_path / "train.jsonl", tmp_path / "train.parquet", rows=3)
    assert (out.rows, out.topics, out.reasoning) == (10, {"a": 4, "b": 6}, True)
    assert out.size == (tmp_path / "train.parquet").stat().st_size
    f = pq.ParquetFile(tmp_path / "train.parquet")
    assert f.num_row_groups == 4 and f.schema_arrow.names == ["id", "topic", "subtopic", "messages", "meta"]
    back = f.read().to_pylist()
    assert back == [{**r, "messages": [{"reasoning_content": None, **m} for m in r["messages"]]} for r in records]
    assert not list(tmp_path.glob(".*.tmp"))


def test_row_groups_also_end_at_the_text_budget_and_the_output_is_the_same_bytes_each_time(tmp_path):
    write_jsonl(tmp_path / "eval.jsonl", [example(i) for i in range(6)])
    write_split(tmp_path / "eval.jsonl", tmp_path / "a.parquet", rows=1000, chars=30)
    assert pq.ParquetFile(tmp_path / "a.parquet").num_row_groups == 6  # each example holds 31 characters
    write_split(tmp_path / "eval.jsonl", tmp_path / "b.parquet")
    write_split(tmp_path / "eval.jsonl", tmp_path / "c.parquet")
    assert (tmp_path / "b.parquet").read_bytes() == (tmp_path / "c.parquet").read_bytes()  # a rerun resumes


def test_an_empty_split_is_an_empty_file_and_a_bad_line_names_its_place(tmp_path):
    (tmp_path / "eval.jsonl").write_text("")
    assert write_split(tmp_path / "eval.jsonl", tmp_path / "e.parquet").rows == 0
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0
    (tmp_path / "train.jsonl").write_text(json.dumps(example(1)) + "\n{\"id\": 1}\n")
    from overbrainer.errors import OverbrainerError

    with pytest.raises(OverbrainerError, match=r"train.jsonl:2: invalid record"):
        write_split(tmp_path / "train.jsonl", tmp_path / "t.parquet")


@pytest.mark.parametrize("n, category", [(0, "n<1K"), (999, "n<1K"), (1000, "1K<n<10K"), (54_321, "10K<n<100K"),
                                         (1_000_000, "1M<n<10M"), (2_000_000_000, "n>1B")])
def test_size_categories(n, category):
    assert size_category(n) == category


def facts(**kw) -> DatasetFacts:
    base = dict(repo="alice/demo-data", version="0.1.0", train=SplitFile(rows=1500, topics={"rust": 1500}),
                eval=SplitFile(rows=0), files={"train": "data/train-00000-of-00001.parquet"},
                generator="gen/model", parent="par/model", license="other", topics=[("rust", "Rust | <b>")],
                prompts=[("questions", "prompts/questions.txt", "ab" * 32)],
                split={"excluded": {"truncated": 2}, "gated": {}, "contaminated": {}, "orphaned": 1},
                decontamination=None, cost="$1.2345+", tokens=(10, 20))
    return DatasetFacts(**{**base, **kw})


def test_the_card_is_metadata_the_hub_accepts_and_says_what_the_facts_say():
    card = render(facts())
    assert dataset_card_problems(card) == []
    meta = front_matter(card)
    assert meta["license"] == "other" and meta["size_categories"] == ["1K<n<10K"]
    assert meta["configs"][0]["data_files"] == [{"split": "train", "path": "data/train-00000-of-00001.parquet"}]
    assert "| Excluded (unusable answers) | 2 (truncated 2) |" in card
    assert "| Left out by the quality gate | 0 |" in card and "| Cost | $1.2345+ (tokens 10 in" in card
    assert "- rust (1500 train, 0 eval): Rust | &lt;b&gt;" in card
    assert f"| questions | prompts/questions.txt | `{'ab' * 32}` |" in card
    no_license = render(facts(license=None, split=None))
    assert "license" not in front_matter(no_license) and "| License | not set |" in no_license
    assert "| Left out | unknown" in no_license
    yaml.safe_load(card.split("---\n")[1])


def test_benchmark_paths_are_cut_to_file_names():
    assert names({"/home/me/bench/gsm8k_test.jsonl": 2, "eval": 1, "other/gsm8k_test.jsonl": 1}) == {
        "gsm8k_test.jsonl": 3, "eval": 1}
