"""What `run` decides about training from the runs' fingerprints (runs/fingerprint.py), and what the
probe counts as a listed model (checks/probe.listed): pure rules, no process."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from overbrainer.checks.probe import listed
from overbrainer.config.model import Training
from overbrainer.errors import OverbrainerError
from overbrainer.jobs.run_record import RunPlace, RunRecord, list_runs
from overbrainer.runs.fingerprint import fingerprint, verdict

TRAINING = Training(target="local", base_model="Qwen/Qwen3-4B", adapter="qlora")


def _data(tmp_path, train="a\n", evals: str | None = "b\n"):
    data = tmp_path / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "train.jsonl").write_text(train)
    if evals is None:
        (data / "eval.jsonl").unlink(missing_ok=True)
    else:
        (data / "eval.jsonl").write_text(evals)
    return data


def _run(runs, n: int, state: str, fp, **kw) -> RunRecord:
    rid = f"demo_20260101-00000{n}"
    (runs / rid).mkdir(parents=True)
    record = RunRecord(id=rid, target="local", created=f"2026-01-01T00:00:0{n}Z", remote_dir=str(runs / rid),
                       state=state, fingerprint=fp.to_json() if fp else None, **kw)
    RunPlace(runs, record.id).save(record)
    return record


def test_the_fingerprint_covers_the_data_and_the_settings_that_shape_the_model(tmp_path):
    base = fingerprint(_data(tmp_path), TRAINING)
    assert base == fingerprint(_data(tmp_path), TRAINING)
    # where it runs, how often it reports, where it pushes: the same model
    assert base == fingerprint(_data(tmp_path), replace(TRAINING, target="gpu", evals_per_epoch=1,
                                                        saves_per_epoch=3, hub_model_id="me/x"))
    others = [fingerprint(_data(tmp_path, train="a2\n"), TRAINING),
              fingerprint(_data(tmp_path, evals=None), TRAINING),
              fingerprint(_data(tmp_path), replace(TRAINING, epochs=1)),
              fingerprint(_data(tmp_path), replace(TRAINING, axolotl_extra={"chat_template": "qwen3"}))]
    assert len({base.sha256, *(f.sha256 for f in others)}) == 5
    assert others[0].eval == base.eval and others[0].train != base.train
    assert others[2].settings != base.settings and others[2].train == base.train


def test_run_trains_only_when_no_run_on_the_fingerprint_succeeded_runs_or_failed(tmp_path):
    runs = tmp_path / "runs"
    fp = fingerprint(_data(tmp_path), TRAINING)
    other = fingerprint(_data(tmp_path / "x", train="z\n", evals=None), replace(TRAINING, epochs=1))
    assert verdict(runs, fp).kind == "train" and verdict(runs, fp).run is None
    _run(runs, 1, "succeeded", other)
    _run(runs, 2, "succeeded", None)  # before fingerprints: matches nothing
    found = verdict(runs, fp)
    assert found.kind == "train" and found.run.id.endswith("1")
    assert found.reason() == ("data/train.jsonl, data/eval.jsonl and the [training] settings changed since run "
                              "demo_20260101-000001")
    _run(runs, 3, "preparing", fp)  # its `train` was killed: counts for nothing
    assert verdict(runs, fp).kind == "train"
    failed = _run(runs, 4, "failed", fp, message="boom")
    assert verdict(runs, fp).kind == "failed" and verdict(runs, fp).run.id == failed.id
    _run(runs, 5, "running", fp)
    assert verdict(runs, fp).kind == "running"
    done = _run(runs, 6, "succeeded", fp)
    _run(runs, 7, "failed", fp)  # a later failure does not undo a success on the same data
    found = verdict(runs, fp)
    assert (found.kind, found.run.id, found.line()) == ("done", done.id, f"train: up to date with run {done.id}")


def test_run_json_keeps_the_fingerprint_and_names_a_bad_one(tmp_path):
    runs = tmp_path / "runs"
    fp = fingerprint(_data(tmp_path), TRAINING)
    record = _run(runs, 1, "succeeded", fp)
    path = runs / record.id / "run.json"
    data = json.loads(path.read_text())
    assert data["fingerprint"] == fp.to_json()
    data["fingerprint"] = ["not", "an", "object"]
    path.write_text(json.dumps(data))
    with pytest.raises(OverbrainerError, match="field fingerprint"):
        RunPlace(runs, record.id).load()
    assert list_runs(runs) == []


def test_what_the_probe_counts_as_a_listed_model():
    ids = {"claude-sonnet-4-5-20250929", "qwen3:latest", "deepseek/deepseek-r1", "gpt-4o"}
    assert listed("gpt-4o", ids)
    assert listed("claude-sonnet-4-5", ids)  # an Anthropic alias of a dated id
    assert listed("qwen3", ids)  # Ollama's :latest
    assert listed("deepseek/deepseek-r1:nitro", ids)  # an OpenRouter variant
    assert not listed("gpt-4", ids)  # a prefix is not a model
    assert not listed("claude-sonnet-4", ids)
    assert not listed("deepseek/deepseek-r2:nitro", ids)
