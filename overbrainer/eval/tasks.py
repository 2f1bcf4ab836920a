"""The tasks of an `overbrainer eval`: lm-eval's own (by name), the user's local ones (a task YAML
and its data), and by default the project's eval split as a generated local task.

- `--tasks` takes names and paths, comma-separated or repeated. A value ending in `.yaml`/`.yml`
  is a task file: its folder joins lm-eval's `include_path` and its `task:` is the name asked for.
  Anything else is a name from lm-eval's registry (a task, group or tag).
- Without `--tasks`: `overbrainer_eval`, written into `<eval dir>/task/`: `overbrainer_eval.jsonl`
  (`{id, question, answer}`: the last user message of each usable record of data/eval.jsonl, as
  compare picks them, and the parent's answer with its reasoning stripped), the YAML
  (`generate_until`, the question as the user message, the parent's answer as the reference,
  metrics `token_f1` then `exact_match`) and `eval_metrics.py` (the token F1, eval/scripts/).
- Offline: when no task is a name and every task file's `dataset_path` is a local loader
  (`json`, `csv`, `parquet`, `text`, `arrow`) or a folder, the harness runs with
  `HF_DATASETS_OFFLINE=1` and `HF_HUB_OFFLINE=1`, and without lm-eval's own task index.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from overbrainer.compare.plan import eval_questions, question_text
from overbrainer.errors import UsageError

SPLIT_TASK = "overbrainer_eval"
TASK_DIR = "task"
METRICS = "eval_metrics.py"
LOCAL_LOADERS = frozenset({"json", "csv", "parquet", "text", "arrow"})


@dataclass
class TaskSet:
    names: list[str] = field(default_factory=list)  # what lm-eval is asked for, in order
    include: list[str] = field(default_factory=list)  # folders of task files (lm-eval's include_path)
    registry: list[str] = field(default_factory=list)  # the names from lm-eval's own registry
    remote: list[str] = field(default_factory=list)  # the tasks whose data may need the network
    offline: bool = True
    files: dict[str, str] = field(default_factory=dict)  # task name -> its YAML

    def add_file(self, name: str, path: Path, local: bool) -> None:
        folder = str(Path(path).resolve().parent)
        if folder not in self.include:
            self.include.append(folder)
        self.names.append(name)
        self.files[name] = str(path)
        self.offline = self.offline and local
        if not local:
            self.remote.append(name)


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no type information
    """YAML with lm-eval's tags (`!function …`) read as nothing: only `task` and `dataset_path` matter."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def read_task_file(path: Path) -> tuple[str, bool]:
    """(the task's name, whether its data set is local) of a task YAML; UsageError otherwise."""
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a SafeLoader
    except FileNotFoundError:
        raise UsageError(f"task file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise UsageError(f"task file {path} is not readable YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("task"), str) or not doc["task"]:
        raise UsageError(f"task file {path} has no `task:` name")
    source = doc.get("dataset_path")
    local = source in LOCAL_LOADERS or (isinstance(source, str) and Path(source).is_dir())
    return doc["task"], local


def plan_tasks(specs: list[str] | None, project_dir: Path, eval_dir: Path) -> TaskSet:
    """The tasks of `--tasks` (None or empty: the eval split's generated task)."""
    tasks = TaskSet()
    values = [v.strip() for spec in specs or [] for v in spec.split(",") if v.strip()]
    if not values:
        path = write_split_task(project_dir, Path(eval_dir) / TASK_DIR)
        tasks.add_file(SPLIT_TASK, path, True)
        return tasks
    for value in values:
        if value.endswith((".yaml", ".yml")):
            path = Path(value).expanduser().resolve()  # relative: to the working directory
            name, local = read_task_file(path)
            tasks.add_file(name, path, local)
        elif value not in tasks.names:
            tasks.names.append(value)
            tasks.registry.append(value)
            tasks.remote.append(value)
            tasks.offline = False
    return tasks


def split_docs(project_dir: Path) -> list[dict]:
    """The documents of the eval split's task: `{id, question, answer}` per usable record."""
    return [{"id": q["id"], "question": question_text(q), "answer": q["parent"]}
            for q in eval_questions(project_dir, None)]


def split_yaml(data: Path) -> str:
    doc = {
        "task": SPLIT_TASK, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test", "output_type": "generate_until", "doc_to_text": "{{question}}",
        "doc_to_target": "{{answer}}", "generation_kwargs": {"until": [], "do_sample": False},
        "metadata": {"version": 1},
    }
    metrics = ("metric_list:\n"
               "  - metric: !function eval_metrics.token_f1\n    aggregation: mean\n    higher_is_better: true\n"
               "  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n"
               "    ignore_case: true\n    ignore_punctuation: true\n")
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True) + metrics


def write_split_task(project_dir: Path, task_dir: Path) -> Path:
    """The eval split as an lm-eval task in `task_dir`; returns its YAML's path."""
    task_dir.mkdir(parents=True, exist_ok=True)
    data = task_dir / f"{SPLIT_TASK}.jsonl"
    data.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in split_docs(project_dir)),
                    encoding="utf-8")
    metrics = resources.files("overbrainer.eval").joinpath("scripts", METRICS).read_text(encoding="utf-8")
    (task_dir / METRICS).write_text(metrics, encoding="utf-8")
    path = task_dir / f"{SPLIT_TASK}.yaml"
    path.write_text(split_yaml(data.resolve()), encoding="utf-8")
    return path
