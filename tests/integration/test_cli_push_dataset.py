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
    from overbrainer.dataset.accounting.history import read_history, totals

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
    from overbrainer.dataset.accounting.history import kept_share

    assert f"| Kept | {kept_share(read_history(made.dir)).text()} |" in card and " paid output tokens (" in card
    for name in ("subtopics", "questions", "answer_system"):
        digest = hashlib.sha256(builtin_source(name).encode()).hexdigest()
        assert f"| {name} | built-in | `{digest}` |" in card
    assert "- topic0 (" in card and "): All about topic0" in card
    assert 'load_dataset("alice/demo-data")' in card
    assert card.rstrip().endswith("<!-- overbrainer:card -->")
    yaml.safe_load(card.split("---\n")[1])  # plain YAML


def test_dry_run_writes_the_files_and_card_and_sends_nothing(made, fake_hub, cli):
    made.env.pop("OVERBRAINER_HF_TOKEN")  # a dry run needs no token
    r = cli(["-C", made.dir, "push", "--dataset", "--dry-run"], env=made.env)
    assert r.returncode == 0, r.stderr
    assert fake_hub.calls == []
    staged = made.dir / ".overbrainer" / "dataset" / "hub"
    train, eval_ = staged / TRAIN, staged / EVAL
    from overbrainer.support.fmt import size as fmt_size

    width = len(TRAIN)
    assert r.stdout.splitlines() == [
        "push: <you>/demo-data, private when created; nothing is sent (--dry-run)",
        f"{TRAIN.ljust(width)}  {fmt_size(train.stat().st_size)}",
        f"{EVAL.ljust(width)}  {fmt_size(eval_.stat().st_size)}",
        f"push: 2 files, {fmt_size(train.stat().st_size + eval_.stat().st_size)}, and the card README.md "
        f"(.overbrainer/dataset/hub/README.md)",
    ]
    assert parquet_rows(train.read_bytes()) == [as_read_back(x) for x in made.records("train")]
    card = (staged / "README.md").read_text()
    assert "# &lt;you&gt;/demo-data" in card and not (staged / "push.json").exists()
    r = cli(["--json", "-C", made.dir, "push", "--dataset", "--dry-run", "--repo", "org/data", "--public"],
            env=made.env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["repo"] == "org/data" and data["private"] is False and data["dry_run"] is True
    assert data["dataset"] == {"train": len(made.records("train")), "eval": len(made.records("eval"))}
    assert [f["path"] for f in data["files"]] == [TRAIN, EVAL] and fake_hub.calls == []


def test_a_missing_split_or_a_wrong_argument_is_a_usage_error(made, fake_hub, cli):
    (made.data / "eval.jsonl").unlink()
    r = cli(["-C", made.dir, "push", "--dataset", "--dry-run"], env=made.env)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ("error: data/eval.jsonl is missing: run `overbrainer split` (or `run`) "
                                         "first, then push the dataset")
    r = cli(["-C", made.dir, "push", "--dataset", "some_run_20261203-082306"], env=made.env)
    assert r.returncode == 2 and "give no RUN_ID" in r.stderr.splitlines()[-1]
    r = cli(["-C", made.dir, "push"], env=made.env)
    assert r.returncode == 2 and r.stderr.splitlines()[-1] == (
        "error: push needs a RUN_ID (or --dataset to push the train/eval split)")
    (made.data / "eval.jsonl").write_text("")
    (made.data / "train.jsonl").write_text("")
    r = cli(["-C", made.dir, "push", "--dataset"], env=made.env)
    assert r.returncode == 1 and r.stderr.splitlines()[-1] == "error: data/train.jsonl holds no example: nothing to push"
    assert fake_hub.calls == []


def test_the_repo_name_comes_from_the_settings(made, fake_hub, cli):
    toml = made.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace('[hub]\n', '[hub]\nrepo = "team/model"\n'))
    r = cli(["--json", "-C", made.dir, "push", "--dataset", "--dry-run"], env=made.env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["repo"] == "team/model-data"
    toml.write_text(toml.read_text().replace('[hub]\n', '[hub]\ndataset_repo = "team/shared-data"\n'))
    r = cli(["--json", "-C", made.dir, "push", "--dataset", "--dry-run"], env=made.env)
    assert json.loads(r.stdout)["repo"] == "team/shared-data"
    toml.write_text(toml.read_text().replace('dataset_repo = "team/shared-data"', 'dataset_repo = "nope"'))
    r = cli(["-C", made.dir, "push", "--dataset", "--dry-run"], env=made.env)
    assert r.returncode == 2 and "  hub.dataset_repo: must be exactly NAMESPACE/NAME" in r.stderr.splitlines()


def test_an_empty_eval_split_is_left_out(made, fake_hub, cli):
    (made.data / "eval.jsonl").write_text("")
    r = cli(["-C", made.dir, "push", "--dataset"], env=made.env)
    assert r.returncode == 0, r.stderr
    repo = fake_hub.datasets["alice/demo-data"]
    assert sorted(repo.files) == ["README.md", TRAIN]
    meta = front_matter(repo.files["README.md"].decode())
    assert meta["configs"] == [{"config_name": "default", "data_files": [{"split": "train", "path": TRAIN}]}]
    # The split's exclusions are no longer those of these files: the card says so.
    assert "| Left out | unknown (the data files changed since the last split) |" in repo.files["README.md"].decode()


def test_a_commit_cut_off_is_finished_by_pushing_again_without_sending_the_files_twice(made, fake_hub, cli):
    fake_hub.cut_commit()
    r = cli(["-C", made.dir, "push", "--dataset"], env=made.env)
    assert r.returncode == 1 and "the commit to alice/demo-data was cut off" in r.stderr.splitlines()[-1]
    assert fake_hub.datasets["alice/demo-data"].commits == []
    uploads = fake_hub.routes().count("upload")
    assert uploads == 2  # the two Parquet files, through LFS
    r = cli(["-C", made.dir, "push", "--dataset"], env=made.env)
    assert r.returncode == 0, r.stderr
    assert fake_hub.routes().count("upload") == uploads  # written again byte for byte: the Hub holds them
    assert sorted(fake_hub.datasets["alice/demo-data"].files) == ["README.md", EVAL, TRAIN]


def test_the_repos_own_readme_is_kept_unless_overwrite_card(made, fake_hub, cli):
    fake_hub.add_repo("alice/demo-data", files={"README.md": b"# mine\n"}, repo_type="dataset")
    r = cli(["-C", made.dir, "push", "--dataset"], env=made.env)
    assert r.returncode == 0, r.stderr
    assert "kept the repo's own README.md" in r.stderr and "create" not in fake_hub.routes()
    assert fake_hub.datasets["alice/demo-data"].files["README.md"] == b"# mine\n"
    r = cli(["-C", made.dir, "push", "--dataset", "--overwrite-card"], env=made.env)
    assert r.returncode == 0, r.stderr
    assert fake_hub.datasets["alice/demo-data"].files["README.md"].decode().startswith("---\nlicense: cc-by-4.0\n")


MARKERS = {
    "OVERBRAINER_PROVIDERS__FAKE__API_KEY": "sk-markerkey-provider-0001",
    "OVERBRAINER_RUNPOD__API_KEY": "rpa_markerkey_runpod_0002",
}


def test_no_key_reaches_a_file_sent_written_or_printed(made, fake_hub, cli, fake_provider):
    """Keys set in the environment (the provider's, Runpod's, the Hub token) appear in nothing
    the push sends, writes or prints."""
    made.env.update(MARKERS)
    dry = cli(["-C", made.dir, "push", "--dataset", "--dry-run"], env=made.env)
    r = cli(["-C", made.dir, "push", "--dataset"], env=made.env)
    assert dry.returncode == 0 and r.returncode == 0, dry.stderr + r.stderr
    secrets = [v.encode() for v in MARKERS.values()] + [fake_hub.token.encode()]
    sent = list(fake_hub.datasets["alice/demo-data"].files.values()) + [c.body for c in fake_hub.calls]
    written = [p.read_bytes() for p in (made.dir / ".overbrainer" / "dataset").rglob("*") if p.is_file()]
    printed = [x.encode() for x in (r.stdout, r.stderr, dry.stdout, dry.stderr)]
    for blob in sent + written + printed:
        assert not any(s in blob for s in secrets) and b"markerkey" not in blob
    assert all(c.headers.get("authorization") == f"Bearer {fake_hub.token}" for c in fake_hub.calls
               if c.route not in ("upload",))


def test_the_fake_hub_refuses_the_dataset_card_metadata_the_hub_refuses(fake_hub):
    """The fixture itself: a card whose metadata is wrong fails the commit, and nothing of it lands."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(endpoint=fake_hub.url, token=fake_hub.token)
    api.create_repo("alice/d", repo_type="dataset", private=True)
    for bad in ("license: my-own-license", "size_categories:\n- huge", "configs:\n- data_files: x.parquet",
                "configs:\n- config_name: default\n  data_files:\n  - split: my split\n    path: x.parquet"):
        card = f"---\n{bad}\n---\n# d\n".encode()
        with pytest.raises(HfHubHTTPError) as e:
            api.create_commit("alice/d", [CommitOperationAdd("README.md", card)], commit_message="m",
                              repo_type="dataset")
        assert e.value.response.status_code == 400 and "Invalid metadata in README.md" in str(e.value)
    assert fake_hub.datasets["alice/d"].files == {}
    ok = b"---\nlicense: mit\nsize_categories:\n- n<1K\n---\n# d\n"
    api.create_commit("alice/d", [CommitOperationAdd("README.md", ok)], commit_message="m", repo_type="dataset")
    assert fake_hub.datasets["alice/d"].files == {"README.md": ok}
    with pytest.raises(HfHubHTTPError):  # a dataset repo is not a model repo
        api.repo_info("alice/d", repo_type="model")
