"""`overbrainer push --dataset` end to end: a project made by the real pipeline against the fake
provider (gate and decontamination on), its split pushed by the real CLI to the fake Hub's dataset
repos (tests/fixtures/hub.py); the Parquet files read back with pyarrow, the card's YAML and facts."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
import yaml

from tests.fixtures.hub_cards import front_matter
from tests.fixtures.provider import Answer

GOOD = ("ANSWER: The answer to this question is that the value depends on the input, and it is "
        "computed in two steps which are explained here with an example for the reader.")
GERMAN = ("ANSWER: Die Antwort auf diese Frage ist, dass der Wert von der Eingabe abhängt, und er wird "
          "in zwei Schritten berechnet, die hier mit einem Beispiel für den Leser erklärt werden.")
SETTINGS = ['[gate]', 'language = "en"', 'min_chars = 60', 'stop_after = 0', '',
            '[hub]', 'dataset_license = "cc-by-4.0"']
TRAIN = "data/train-00000-of-00001.parquet"
EVAL = "data/eval-00000-of-00001.parquet"


@pytest.fixture
def made(project, fake_provider, fake_hub, cli):
    """A project whose `run` wrote train and eval (one answer excluded, one gated), set to push to
    the fake Hub."""
    project.write(topics=2, subtopics=2, questions=3, reasoning=True, dialect="openrouter")
    text = (project.dir / "overbrainer.toml").read_text()
    (project.dir / "overbrainer.toml").write_text(text + "\n" + "\n".join(SETTINGS) + "\n")

    def responder(req):
        if "JSON array" in req.body["messages"][-1]["content"]:
            return None  # the default list
        return Answer(GOOD, reasoning="Let me think about the input first.")

    fake_provider.responder = responder
    fake_provider.dialect = "openrouter"  # its answers carry their cost
    fake_provider.models = {"deepseek/deepseek-r1": (1.0, 2.0), "qwen/qwen3-235b": (0.5, 1.0)}
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.script(Answer(""), Answer(GERMAN, reasoning="Hmm."))
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "1 excluded (empty 1), 1 gated (language 1)" in r.stdout, r.stdout
    project.env.update(OVERBRAINER_HF_TOKEN=fake_hub.token, OVERBRAINER_HUB__BASE_URL=fake_hub.url)
    return project


def parquet_rows(data: bytes) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(data)).to_pylist()


def as_read_back(record: dict) -> dict:
    """A JSONL record as Parquet gives it back: every message with its reasoning_content (null
    where the line has none)."""
    return {**record, "messages": [{"reasoning_content": None, **m} for m in record["messages"]]}


def test_push_dataset_sends_the_split_as_parquet_and_a_dataset_card(made, fake_hub, cli):
    r = cli(["-C", made.dir, "push", "--dataset"], env=made.env)
    assert r.returncode == 0, r.stderr
    repo = fake_hub.datasets["alice/demo-data"]
    assert "alice/demo-data" not in fake_hub.repos  # a dataset repo, not a model repo
    assert sorted(repo.files) == ["README.md", EVAL, TRAIN]
    assert repo.private is True and len(repo.commits) == 1
    assert repo.commits[0][1] == "Upload dataset with overbrainer 0.1.0"
    create = json.loads(next(c for c in fake_hub.calls if c.route == "create").body)
    assert (create["type"], create["visibility"]) == ("dataset", "private")
    train, eval_ = made.records("train"), made.records("eval")
    assert parquet_rows(repo.files[TRAIN]) == [as_read_back(x) for x in train]
    assert parquet_rows(repo.files[EVAL]) == [as_read_back(x) for x in eval_]
    assert any(m.get("reasoning_content") for x in train for m in x["messages"])
    oid = repo.commits[0][0]
    size = len(repo.files[TRAIN]) + len(repo.files[EVAL])
    from overbrainer.support.fmt import size as fmt_size

    assert r.stdout == f"push: {fake_hub.url}/datasets/alice/demo-data/commit/{oid} (3 files, {fmt_size(size)})\n"
    record = json.loads((made.dir / ".overbrainer" / "dataset" / "hub" / "push.json").read_text())
    assert record["state"] == "pushed" and record["commit"] == oid and record["repo"] == "alice/demo-data"
    card = repo.files["README.md"].decode()
    assert card == (made.dir / ".overbrainer" / "dataset" / "hub" / "README.md").read_text()
    assert fake_hub.token not in r.stdout + r.stderr + card


def test_the_dataset_card_states_models_prompts_counts_drops_cost_and_license(made, fake_hub, cli):
    from overbrainer.config.templates import builtin_source
    from overbrainer.dataset.history import read_history, totals

    assert cli(["-C", made.dir, "push", "--dataset"], env=made.env).returncode == 0
    card = fake_hub.datasets["alice/demo-data"].files["README.md"].decode()
    meta = front_matter(card)
    n_train, n_eval = len(made.records("train")), len(made.records("eval"))
    assert meta == {"license": "cc-by-4.0", "task_categories": ["text-generation"],
                    "tags": ["overbrainer", "distillation", "synthetic"], "size_categories": ["n<1K"],
                    "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": TRAIN},
                                                                          {"split": "eval", "path": EVAL}]}]}
    assert "| Generator | qwen/qwen3-235b |" in card and "| Parent | deepseek/deepseek-r1 |" in card
    assert f"| Examples | {n_train} train, {n_eval} eval |" in card
    assert "| Excluded (unusable answers) | 1 (empty 1) |" in card
    assert "| Left out by the quality gate | 1 (language 1) |" in card
    assert "| Orphaned (topic or question no longer configured) | 0 |" in card
    assert "| Decontamination | 13-gram overlap with the eval split: 0 examples left out |" in card
    _, total = totals(read_history(made.dir))
    assert str(total.cost).startswith("$") and total.cost.kind == "known"
    assert f"| Cost | {total.cost} (tokens {total.input_tokens} in, {total.output_tokens} out, every stage) |" in card
    assert "| License | cc-by-4.0 |" in card
    for name in ("subtopics", "questions", "answer_system"):
        digest = hashlib.sha256(builtin_source(name).encode()).hexdigest()
        assert f"| {name} | built-in | `{digest}` |" in card
    assert "- topic0 (" in card and "): All about topic0" in card
    assert 'load_dataset("alice/demo-data")' in card
    assert card.rstrip().endswith("<!-- overbrainer:card -->")
    yaml.safe_load(card.split("---\n")[1])  # plain YAML
