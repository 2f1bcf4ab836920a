"""The task files of a remote eval packed into its job's folder (eval/tasks.pack): the default
task into `task/`, a user's into `tasks/<task>/` with its data files, its `!function` modules and
its `include:`, every path rewritten to stand in the job's folder, the tags kept; a local
`dataset_path` folder refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from overbrainer.errors import UsageError
from overbrainer.eval.tasks import Tagged, TaggedLoader, TaskSet, pack, plan_tasks
from tests.fixtures.compare import write_eval


def load(text: str) -> dict:
    return yaml.load(text, Loader=TaggedLoader)  # noqa: S506 - a SafeLoader


def test_a_users_task_goes_with_its_data_modules_and_include(tmp_path, monkeypatch):
    src, other, cwd = tmp_path / "src", tmp_path / "other", tmp_path / "cwd"
    for d in (src, other, cwd):
        d.mkdir()
    monkeypatch.chdir(cwd)  # relative data paths are read from the working directory
    (src / "test.jsonl").write_text('{"q": "a"}\n')
    (other / "test.jsonl").write_text('{"q": "b"}\n')  # the same name: numbered
    (cwd / "train.jsonl").write_text('{"q": "c"}\n')
    (src / "utils.py").write_text("def score(refs, preds): return 1\n")
    (src / "unused.py").write_text("")
    (src / "base.yaml").write_text("output_type: generate_until\ninclude: colours.yaml\n")  # a cycle ends
    (src / "colours.yaml").write_text(
        "include: base.yaml\ntask: colours\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: [{src / 'test.jsonl'}, {other / 'test.jsonl'}]\n    train: train.jsonl\n"
        "    validation: https://example.org/v.jsonl\n"
        "metric_list:\n  - metric: !function utils.score\n    aggregation: mean\n")
    tasks = TaskSet()
    tasks.add_file("colours", src / "colours.yaml", True)
    packed = pack(tasks)
    assert packed.include == ["tasks/colours"]
    assert sorted(packed.files) == ["tasks/colours/base.yaml", "tasks/colours/colours.yaml",
                                    "tasks/colours/test.jsonl", "tasks/colours/test_2.jsonl",
                                    "tasks/colours/train.jsonl", "tasks/colours/utils.py"]
    assert Path(packed.files["tasks/colours/test_2.jsonl"]).read_bytes() == b'{"q": "b"}\n'
    doc = load(packed.files["tasks/colours/colours.yaml"])
    assert doc["include"] == "base.yaml" and load(packed.files["tasks/colours/base.yaml"])["include"] == "colours.yaml"
    assert doc["dataset_kwargs"]["data_files"] == {
        "test": ["tasks/colours/test.jsonl", "tasks/colours/test_2.jsonl"], "train": "tasks/colours/train.jsonl",
        "validation": "https://example.org/v.jsonl"}
    assert doc["metric_list"][0]["metric"] == Tagged("!function", "utils.score")
    assert "metric: !function 'utils.score'" in packed.files["tasks/colours/colours.yaml"]  # lm-eval reads it


def test_the_default_task_goes_into_task_with_its_metric(project, tmp_path):
    write_eval(project.data, 2)
    tasks = plan_tasks(None, project.dir, tmp_path / "staging")
    packed = pack(tasks)
    assert packed.include == ["task"]
    assert sorted(packed.files) == ["task/eval_metrics.py", "task/overbrainer_eval.jsonl", "task/overbrainer_eval.yaml"]
    doc = load(packed.files["task/overbrainer_eval.yaml"])
    assert doc["dataset_kwargs"]["data_files"] == {"test": "task/overbrainer_eval.jsonl"}
    assert doc["metric_list"][0]["metric"] == Tagged("!function", "eval_metrics.token_f1")
    lines = Path(packed.files["task/overbrainer_eval.jsonl"]).read_text().splitlines()
    assert len(lines) == 2 and set(json.loads(lines[0])) == {"id", "question", "answer"}


def test_a_local_dataset_folder_is_not_sent(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "t.yaml").write_text(f"task: t\ndataset_path: {tmp_path / 'data'}\n")
    tasks = TaskSet()
    tasks.add_file("t", tmp_path / "t.yaml", True)
    with pytest.raises(UsageError, match="is a local folder, which is not sent to a remote target"):
        pack(tasks)
