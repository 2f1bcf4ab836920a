"""The model card: rendered from facts only, snapshot per variant; escaping; its YAML front matter
and TOML excerpt read back equal to what was written."""

from __future__ import annotations

import tomllib

from overbrainer.config.model import Config, Project, Role, Roles, Topic, Training
from overbrainer.hub.card import MARKER, CardFacts, gguf_types, model_name, render, reproduce
from tests.fixtures.hub_cards import front_matter

SNAPSHOT_GGUF = """---
base_model: Qwen/Qwen3-0.6B
base_model_relation: adapter
library_name: peft
license: '1.0'
pipeline_tag: text-generation
tags:
- overbrainer
- distillation
- gguf
---

# alice/rust-mentor

[![made with overbrainer](https://img.shields.io/badge/made%20with-overbrainer-blue)](https://pypi.org/project/overbrainer/)

Qwen/Qwen3-0.6B fine-tuned (QLoRA) on 412 questions answered by deepseek/deepseek-r1.

## Use it

```sh
ollama run hf.co/alice/rust-mentor:Q4_K_M
llama-cli -hf alice/rust-mentor:Q4_K_M
```

## How it was made

Distilled with overbrainer 9.9.9 (run rust_20260101-000000). Kept from the parent: answers and reasoning.

| | |
|---|---|
| Parent | deepseek/deepseek-r1 |
| Generator | qwen/qwen3-235b |
| Judge | a\\|b &lt;x&gt; |
| Base model | Qwen/Qwen3-0.6B |
| Adapter | QLoRA |
| Examples | 412 train, 46 eval |
| Epochs | 3 |
| Learning rate | 0.0002 |
| Sequence length | 4096 |
| Final loss | 0.84 train, 0.91 eval |
| Training time | 1 h 02 min |

Topics:

- ownership: borrow &lt;checker&gt; and lifetimes

Trained on a Runpod NVIDIA A40, about $0.64.

## Reproduce

```sh
pip install overbrainer
```

`overbrainer.toml` (excerpt):

```toml
[pipeline]
seed = 42
```

---

Card written by overbrainer 9.9.9.
<!-- overbrainer:card -->
"""


def gguf_facts() -> CardFacts:
    return CardFacts(
        repo="alice/rust-mentor", run_id="rust_20260101-000000", version="9.9.9", base_model="Qwen/Qwen3-0.6B",
        base_is_hub=True, adapter="qlora", epochs=3, learning_rate=0.0002, sequence_len=4096, train_count=412,
        eval_count=46, kept="answers and reasoning", train_loss=0.8412, eval_loss=0.9088, training_secs=3725,
        gguf_types=["Q8_0", "Q4_K_M"], gpu="NVIDIA A40", spend=0.64, parent="deepseek/deepseek-r1",
        generator="qwen/qwen3-235b", judge="a|b <x>", topics=[("ownership", "borrow <checker>\nand lifetimes")],
        license="1.0", reproduce="[pipeline]\nseed = 42\n")


def test_card_with_gguf_files_snapshot():
    assert render(gguf_facts()) == SNAPSHOT_GGUF


def test_full_fine_tune_of_a_local_model_has_no_base_model_metadata():
    facts = CardFacts(repo="org/m", run_id="r_20260101-000000", version="1", base_model=model_name("/srv/models/my-base/"),
                      base_is_hub=False, adapter=None, train_count=None)
    card = render(facts)
    assert card.startswith("---\nlibrary_name: transformers\npipeline_tag: text-generation\n")
    assert "base_model" not in card.split("---")[1]
    assert "my-base fully fine-tuned on questions answered by a parent model." in card
    assert 'AutoModelForCausalLM.from_pretrained("org/m")' in card
    assert "| Adapter | none (full fine-tune) |" in card and "/srv" not in card
    assert card.endswith(MARKER + "\n") and "Topics:" not in card and "Runpod" not in card


AWKWARD = ["a: b", "it's \"quoted\"", "line one\nline two", "ends in a newline\n", "- dash", "yes", "no", "on",
           "null", "~", "1.0", "007", "0x1A", "1e5", "2026-01-01", "#hash", "@at", "%pct", "[x]", "{y}", "&a", "*b",
           "!tag", "|", ">", " padded ", "tab\there", "bell\a", "é ✓", "x" * 200 + " y"]


def test_front_matter_values_read_back_as_written():
    for value in AWKWARD:
        facts = CardFacts(repo="org/m", run_id="r_20260101-000000", version="1", base_model="Qwen/Qwen3-0.6B",
                          base_is_hub=True, adapter="lora", license=value, gguf_types=["Q4_K_M"])
        assert front_matter(render(facts)) == {
            "base_model": "Qwen/Qwen3-0.6B", "base_model_relation": "adapter", "library_name": "peft",
            "license": value, "pipeline_tag": "text-generation", "tags": ["overbrainer", "distillation", "gguf"]}, value


def test_the_toml_excerpt_reads_back_with_any_key():
    config = Config(project=Project("demo"), topics=[Topic("rust", 'borrow "checker"\nand lifetimes', 10, 20)],
                    roles=Roles(generator=Role("p", "gen"), parent=Role("p", "/srv/models/parent", reasoning=True),
                                judge=Role("p", "judge", temperature=0.0)),
                    training=Training(target="t", base_model="/srv/models/base", adapter="lora", axolotl_extra={
                        "chat template": "chatml", "a.b": 1, "déjà": [1, 2.5], "warmup_steps": 3,
                        "tokens": {"pad": "x"}, "hub_token": "hf_secret", "dataset": "/home/me/data.jsonl",
                        "base": "https://host.example/x"}))
    doc = tomllib.loads(reproduce(config))
    assert doc["topics"] == [{"name": "rust", "description": 'borrow "checker"\nand lifetimes', "subtopics": 10,
                              "questions_per_subtopic": 20}]
    roles = doc["roles"]
    assert (roles["generator"]["model"], roles["parent"]["model"], roles["parent"]["reasoning"]) == ("gen", "parent", True)
    assert roles["judge"]["temperature"] == 0.0 and "reasoning" not in roles["judge"] and "provider" not in roles["judge"]
    assert (doc["training"]["base_model"], doc["training"]["adapter"]) == ("base", "lora") and "target" not in doc["training"]
    assert doc["training"]["axolotl_extra"] == {"a.b": 1, "chat template": "chatml", "déjà": [1, 2.5], "warmup_steps": 3}
    assert doc["pipeline"]["seed"] == 42


def test_gguf_types_come_from_the_run_s_file_names():
    assert gguf_types(["r-Q8_0.gguf", "r-Q4_K_M.gguf", "merged/r-F16.gguf", "other.gguf", "Modelfile"], "r") == [
        "Q4_K_M", "Q8_0"]


def test_card_states_the_decontamination(tmp_path):
    import json

    from overbrainer.hub.card import gather

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "decontamination.json").write_text(json.dumps(
        {"ngram": 13, "eval": True, "benchmarks": ["/home/u/bench/gsm8k_test.jsonl", "m/math500.parquet"],
         "contaminated": {"eval": 1, "bench/gsm8k_test.jsonl": 2}}))
    config = Config(project=Project("demo"), roles=Roles(generator=Role("p", "gen"), parent=Role("p", "parent")))
    facts = gather(config, tmp_path, "r_20260101-000000", "org/m", [], "1")
    card = render(facts)
    assert ("| Decontamination | 13-gram overlap with the eval split, gsm8k_test.jsonl, math500.parquet: "
            "3 examples left out (eval 1, gsm8k_test.jsonl 2) |") in card
    assert "/home" not in card and "bench/" not in card
    facts.decontamination = {"ngram": 8, "eval": False, "benchmarks": [], "contaminated": {}}
    assert "| Decontamination | none |" in render(facts)
    facts.decontamination = {"ngram": 13, "eval": True, "benchmarks": [], "contaminated": {}}
    assert "| Decontamination | 13-gram overlap with the eval split: 0 examples left out |" in render(facts)
    (tmp_path / "data" / "decontamination.json").unlink()  # a run made before: no row
    assert "Decontamination" not in render(gather(config, tmp_path, "r_20260101-000000", "org/m", [], "1"))


def test_card_shows_the_newest_eval(tmp_path):
    import json

    from overbrainer.hub.card import gather

    config = Config(project=Project("demo"), roles=Roles(generator=Role("p", "gen"), parent=Role("p", "parent")))

    def write(eval_id: str, created: str, ratio: float) -> None:
        folder = tmp_path / "evals" / eval_id
        folder.mkdir(parents=True)
        (folder / "eval.json").write_text(json.dumps({
            "eval": eval_id, "created": created, "lm_eval": "0.4.13", "limit": 50, "seed": 42,
            "parent": {"base_url": "http://secret-host.example/v1", "provider": "fake"},
            "summary": {"gsm8k": {"metric": "exact_match", "child": 0.41, "parent": 0.5, "samples": 50,
                                  "ratio": {"n": 50, "ratio": ratio, "low": 0.6, "high": 1.05}},
                        "mine|x": {"metric": "token_f1", "child": 0.3, "samples": 4}}}))

    assert "## Benchmarks" not in render(gather(config, tmp_path, "r_20260101-000000", "org/m", [], "1"))
    write("eval_20260102-000000", "2026-01-02T00:00:00Z", 0.82)
    write("eval_20260101-000000", "2026-01-01T00:00:00Z", 0.11)
    (tmp_path / "evals" / "eval_broken").mkdir()
    (tmp_path / "evals" / "eval_broken" / "eval.json").write_text("{not json")
    card = render(gather(config, tmp_path, "r_20260101-000000", "org/m", [], "1"))
    assert "## Benchmarks" in card and "lm-evaluation-harness 0.4.13 (eval eval_20260102-000000)" in card
    assert "| gsm8k | exact_match | 0.41 | 0.5 | 82.0 % (60.0 % to 105.0 %) | 50 |" in card
    assert "| mine\\|x | token_f1 | 0.3 | – | – | 4 |" in card
    assert "secret-host" not in card and "fake" not in card
    assert card.index("## Benchmarks") < card.index("## Reproduce")
