"""answers in batch mode against the fake batch APIs (tests/fixtures/batch_*.py), in-process:
submit then collect, the records byte for byte those of an online run, half the cost, items
resubmitted once, the spend cap reserved at submission, a crash's batch found again."""

from __future__ import annotations

import json
import shutil

import pytest

from overbrainer.errors import ConfigError, ItemsFailed
from tests.fixtures.project import Project

PARENT = "deepseek/deepseek-r1"
PROTOCOLS = [("openai", "openai"), ("anthropic", None)]


def _prepared(project, fake_provider, protocol="openai", dialect="openai", **pipeline):
    model = "claude-sonnet-4-5" if protocol == "anthropic" else PARENT
    project.write(topics=1, subtopics=2, questions=3, protocol=protocol, dialect=dialect, parent_model=model,
                  generator_model=model, pipeline={"concurrency": 1, **pipeline})
    fake_provider.models = {model: (2.0, 8.0)}
    texts, _, err = project.stage("questions")
    assert err is None, texts
    fake_provider.batches.shuffle = False
    return model


def _batch(project, tmp_path, name="batch", **pipeline):
    other = Project(tmp_path / name, project.url)
    shutil.copytree(project.dir, other.dir)
    toml = other.dir / "overbrainer.toml"
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in {"mode": "batch", **pipeline}.items())
    toml.write_text(toml.read_text().replace("[pipeline]\n", "[pipeline]\n" + extra, 1))
    other.env = dict(project.env)
    return other


@pytest.mark.parametrize("protocol,dialect", PROTOCOLS)
def test_submit_then_collect_matches_online(project, fake_provider, tmp_path, protocol, dialect):
    _prepared(project, fake_provider, protocol, dialect)
    batch = _batch(project, tmp_path)
    texts, online, err = project.stage("answers")
    assert err is None, texts
    texts, datas, err = batch.stage("answers")
    assert err is None, texts
    assert "6 question(s) submitted" in texts[0] and "pending in 1 batch(es)" in texts[0], texts
    assert datas[0]["mode"] == "batch" and datas[0]["pending"] == 6 and not batch.records("answers")
    assert fake_provider.batches.created == 1
    texts, datas, err = batch.stage("answers")
    assert err is None, texts
    assert datas[0]["done"] + datas[0]["excluded"] == 6 and datas[0]["pending"] == 0, texts
    assert (batch.data / "answers.jsonl").read_bytes() == (project.data / "answers.jsonl").read_bytes()
    assert datas[0]["cost"] == pytest.approx(online[0]["cost"] * 0.5)
    assert fake_provider.batches.created == 1
