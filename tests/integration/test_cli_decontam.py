"""Decontamination end to end (docs/stages.md#decontamination): the real CLI on the fake provider.
A project whose questions include copies of benchmark items (a JSONL and a Parquet file) and of
eval questions: the split leaves out the benchmark copies and drops from train every copy of an
eval question, and nothing else; the summary, --json, history and the model card count them;
a missing benchmark file is a configuration error before anything is paid."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from overbrainer.dataset.quality.decontam import units
from tests.fixtures.timescale import scaled_env

RUN_ENV = scaled_env(0.05)
PIPELINE = {"eval_ratio": 0.25}
LINE = re.compile(r"^split: (\d+) train, (\d+) eval, 0 excluded, (\d+) contaminated \((.*)\), 0 orphaned$")


def _question(ex: dict) -> str:
    return next(m["content"] for m in ex["messages"] if m["role"] == "user")


def _inject_copies(project, eval_examples: list[dict]) -> dict[str, str]:
    """For each eval example, a question and an answer that copy its question (case, spacing and
    punctuation changed), under a new ID. Returns {copy ID: original ID}. The fake provider's
    replies and the IDs are deterministic, so is which copies land in eval."""
    pairs = {}
    with open(project.data / "questions.jsonl", "a") as qf, open(project.data / "answers.jsonl", "a") as af:
        for ex in eval_examples:
            new_id = hashlib.md5(f"copy of {ex['id']}".encode()).hexdigest()  # deterministic, like every ID here
            text = "  " + _question(ex).upper().replace(" ", "  ") + " ?!"
            q = next(q for q in project.records("questions") if q["id"] == ex["id"])
            qf.write(json.dumps(dict(q, id=new_id, text=text), separators=(",", ":")) + "\n")
            messages = [dict(m, content=text) if m["role"] == "user" else m for m in ex["messages"]]
            af.write(json.dumps(dict(ex, id=new_id, messages=messages), separators=(",", ":")) + "\n")
            pairs[new_id] = ex["id"]
    return pairs


def test_copies_of_benchmark_items_and_of_eval_questions_are_left_out(project, fake_provider, cli, fake_axolotl):
    pa = pytest.importorskip("pyarrow")  # the `test` extra installs it
    import pyarrow.parquet as pq

    project.write(topics=1, subtopics=2, questions=8, pipeline=PIPELINE)
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2] == "split: 12 train, 4 eval, 0 excluded, 0 orphaned"  # nothing to leave out
    train, eval_ = project.records("train"), project.records("eval")
    # Benchmark items that some generated questions copy: two in a JSONL file, one in Parquet.
    (project.dir / "bench").mkdir()
    (project.dir / "bench" / "items.jsonl").write_text("".join(
        json.dumps({"id": i, "question": _question(ex).lower(), "answer": "42"}) + "\n"
        for i, ex in enumerate(train[:2])))
    pq.write_table(pa.table({"problem": [_question(train[2])], "level": [3]}), project.dir / "bench" / "more.parquet")
    in_bench = {ex["id"] for ex in train[:3]}
    pairs = _inject_copies(project, eval_)
    partner = {**pairs, **{v: k for k, v in pairs.items()}}

    project.write(topics=1, subtopics=2, questions=8, training=fake_axolotl.venv,
                  pipeline={**PIPELINE, "decontaminate": ["bench/items.jsonl", "bench/more.parquet"]})
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert r.returncode == 0, r.stderr
    m = LINE.match(r.stdout.strip())
    assert m, r.stdout
    n_train, n_eval, n_contaminated = map(int, m.groups()[:3])
    by_source = dict((k, int(v)) for k, v in (part.rsplit(" ", 1) for part in m.group(4).split(", ")))
    assert by_source["items.jsonl"] == 2 and by_source["more.parquet"] == 1
    assert n_contaminated == sum(by_source.values())

    train, eval_ = project.records("train"), project.records("eval")
    assert (len(train), len(eval_)) == (n_train, n_eval)
    kept = {ex["id"] for ex in train + eval_}
    every = {a["id"] for a in project.records("answers")}
    dropped = every - kept - in_bench
    assert not in_bench & kept
    # No train question overlaps an eval question; every copy of an eval question left train,
    # and only those: each dropped one is half of a pair whose other half is in eval.
    eval_units = set().union(*(units(_question(ex)) for ex in eval_))
    assert not any(units(_question(ex)) & eval_units for ex in train)
    eval_ids = {ex["id"] for ex in eval_}
    assert dropped and all(partner.get(i) in eval_ids for i in dropped)
    assert by_source["eval"] == len(dropped)
    assert all(partner[i] not in eval_ids for i in kept - eval_ids if i in partner)

    # --json and history count them; a second split with nothing changed prints the same.
    r = cli(["--json", "-C", project.dir, "split"], env=project.env)
    data = json.loads(r.stdout)
    assert data["contaminated"] == n_contaminated and data["contaminated_by_source"] == by_source
    split = project.history()[-1]["split"]
    assert {k: v for k, v in split.items() if k != "kept_output_tokens"} == {
        "train": n_train, "eval": n_eval, "orphaned": 0, "contaminated": n_contaminated}
    assert "train.jsonl and eval.jsonl are up to date" in r.stderr  # the saved split: nothing read
    # A changed benchmark file (its identity is in the split's key) splits again.
    with open(project.dir / "bench" / "items.jsonl", "a") as f:
        single = next(ex for ex in train if ex["id"] not in partner)  # a question without a copy
        f.write(json.dumps({"question": _question(single)}) + "\n")
    r = cli(["--json", "-C", project.dir, "split"], env=project.env)
    assert "up to date" not in r.stderr
    data = json.loads(r.stdout)
    assert data["contaminated_by_source"]["items.jsonl"] == 3 and data["contaminated_by_source"]["more.parquet"] == 1
    assert data["contaminated"] == sum(data["contaminated_by_source"].values())

    # The model card states it.
    env = {**project.env, **RUN_ENV}
    r = cli(["-C", project.dir, "train"], env=env)
    assert r.returncode == 0, r.stderr
    (rid,) = [p.name for p in (project.dir / "runs").iterdir() if not p.name.startswith(".")]
    r = cli(["-C", project.dir, "push", rid, "--dry-run"], env=env)
    assert r.returncode == 0, r.stderr
    card = (project.dir / "runs" / rid / "hub" / "README.md").read_text()
    by_source = ", ".join(f"{k} {v}" for k, v in data["contaminated_by_source"].items())
    assert (f"| Decontamination | 13-gram overlap with the eval split, items.jsonl, more.parquet: "
            f"{data['contaminated']} examples left out ({by_source}) |") in card


def test_a_benchmark_that_cannot_be_read_stops_run_before_any_request(project, fake_provider, cli):
    project.write(topics=1, subtopics=1, questions=2, pipeline={"decontaminate": ["bench/gone.jsonl"]})
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 2
    assert "pipeline.decontaminate: bench/gone.jsonl: no such file" in r.stderr
    assert fake_provider.chat_requests() == []
    (project.dir / "bench").mkdir()
    (project.dir / "bench" / "gone.jsonl").write_text('{"q": "fine"}\n{oops\n')
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert r.returncode == 2 and "pipeline.decontaminate: bench/gone.jsonl: line 2 is not a JSON record" in r.stderr


def test_config_check_lists_the_benchmarks_that_cannot_be_read(project, fake_provider, cli):
    project.write(topics=1, subtopics=1, questions=2,
                  pipeline={"decontaminate": ["bench/ok.jsonl", "bench/gone.jsonl"], "decontaminate_ngram": 8})
    (project.dir / "bench").mkdir()
    (project.dir / "bench" / "ok.jsonl").write_text('{"q": "fine"}\n')
    r = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert r.returncode == 2
    assert "decontaminate: [bench/ok.jsonl, bench/gone.jsonl], decontaminate_ngram: 8" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == "error: pipeline.decontaminate: bench/gone.jsonl: no such file"
    (project.dir / "bench" / "gone.jsonl").write_text("")
    assert cli(["-C", project.dir, "config", "check"], env=project.env).returncode == 0
