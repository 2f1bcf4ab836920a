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

Packed for a remote eval (`pack`): the task files go into the eval's job folder (eval/job.py),
each task YAML with what it needs, its paths rewritten to stand in that folder.

- The default task (`overbrainer_eval`) goes into `task/`, as on this machine; any other task file
  into `tasks/<task>/`. Those folders are lm-eval's `include_path` on the target.
- Data files and modules are named by their path here, copied when the job's folder is written
  (jobs/side_job.py), never read into memory: the default task's data is the whole eval split.
- With a YAML go: the Python modules its `!function`s name (`<module>.py` beside it, as lm-eval
  reads them), the YAML its `include:` names (beside it or by its path; packed the same way, its
  name kept), and the local files of its `dataset_kwargs.data_files` (a path, a list of paths, or
  a split → path(s) mapping; a relative path is read from the working directory, as lm-eval does
  here). A data file is copied into the task's folder and named in the YAML by its path from the
  job's folder, where the client runs lm-eval. A value that is not a local file (a URL, a glob,
  `hf://…`) is left as written.
- A task whose `dataset_path` is a local folder is refused (UsageError, exit 2): its data is sent
  as `dataset_kwargs.data_files` only.

The YAML is read and written again with its tags (`!function …`) kept; its comments are not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from overbrainer.compare.plan import eval_questions, question_text
from overbrainer.errors import UsageError

SPLIT_TASK = "overbrainer_eval"
TASK_DIR = "task"
METRICS = "eval_metrics.py"
LOCAL_LOADERS = frozenset({"json", "csv", "parquet", "text", "arrow"})
TASKS_DIR = "tasks"
FUNCTION = "!function"


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


@dataclass(frozen=True)
class Tagged:
    """A YAML value under a tag of lm-eval's (`!function eval_metrics.token_f1`), kept as written."""
    tag: str
    value: Any


class TaggedLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no type information
    """YAML with its tags kept (Tagged)."""


class TaggedDumper(yaml.SafeDumper):  # type: ignore[misc]  # the same
    """YAML with Tagged values written under their tags."""


def _read_tagged(loader: Any, suffix: str, node: Any) -> Tagged:
    if isinstance(node, yaml.SequenceNode):
        return Tagged("!" + suffix, loader.construct_sequence(node, deep=True))
    if isinstance(node, yaml.MappingNode):
        return Tagged("!" + suffix, loader.construct_mapping(node, deep=True))
    return Tagged("!" + suffix, loader.construct_scalar(node))


def _write_tagged(dumper: Any, data: Tagged) -> Any:
    if isinstance(data.value, list):
        return dumper.represent_sequence(data.tag, data.value)
    if isinstance(data.value, dict):
        return dumper.represent_mapping(data.tag, data.value)
    return dumper.represent_scalar(data.tag, str(data.value))


TaggedLoader.add_multi_constructor("!", _read_tagged)
TaggedDumper.add_representer(Tagged, _write_tagged)


def read_task_file(path: Path) -> tuple[str, bool]:
    """(the task's name, whether its data set is local) of a task YAML; UsageError otherwise."""
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=TaggedLoader)  # noqa: S506 - a SafeLoader
    except FileNotFoundError:
        raise UsageError(f"task file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise UsageError(f"task file {path} is not readable YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("task"), str) or not doc["task"]:
        raise UsageError(f"task file {path} has no `task:` name")
    source = doc.get("dataset_path")
    local = isinstance(source, str) and (source in LOCAL_LOADERS or Path(source).is_dir())
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


def split_docs(project_dir: Path) -> list[dict[str, Any]]:
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
    text: str = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    return text + metrics


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


# --- packed for a remote eval's job ------------------------------------------------------------

@dataclass
class Packed:
    """The job's task files (path in the job folder → its text, or the file here it is a copy of)
    and lm-eval's include_path there."""
    files: dict[str, str | Path] = field(default_factory=dict)
    include: list[str] = field(default_factory=list)


def folder_of(task: str) -> str:
    """The task's folder in the job: `task` for the default task, else `tasks/<task>`."""
    if task == SPLIT_TASK:
        return TASK_DIR
    return f"{TASKS_DIR}/{re.sub(r'[^A-Za-z0-9_.-]', '_', task) or 'task'}"


def pack(tasks: TaskSet, cwd: Path | None = None) -> Packed:
    """Every task file of `tasks` (named tasks need none), packed; `cwd`: where relative data
    paths are read from (the working directory)."""
    packed = Packed()
    for task, yaml_path in tasks.files.items():
        folder = folder_of(task)
        _Folder(packed, folder, Path(cwd or Path.cwd())).add_yaml(Path(yaml_path))
        if folder not in packed.include:
            packed.include.append(folder)
    return packed


@dataclass
class _Folder:
    """One task's folder of the job being filled: which file of this machine is which file there."""
    packed: Packed
    folder: str
    cwd: Path
    placed: dict[Path, str] = field(default_factory=dict)  # source -> its name in the folder

    def place(self, source: Path, content: str | Path) -> str:
        """`source` put into the folder (once; a name already taken gets a number) as `content`
        (a text, or the file to copy); its name there."""
        source = source.resolve()
        if source in self.placed:
            return self.placed[source]
        taken = set(self.placed.values())
        name, n = source.name, 1
        while name in taken:
            n += 1
            name = f"{source.stem}_{n}{source.suffix}"
        self.placed[source] = name
        self.packed.files[f"{self.folder}/{name}"] = content
        return name

    def local(self, value: str) -> Path:
        """A path of the task file as this machine reads it (relative: from the working directory)."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.cwd / path

    def add_yaml(self, path: Path) -> str:
        path = path.resolve()
        if path in self.placed:
            return self.placed[path]
        try:
            doc = yaml.load(path.read_text(encoding="utf-8"), Loader=TaggedLoader)  # noqa: S506 - a SafeLoader
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise UsageError(f"task file {path} cannot be sent to the target: {str(e).splitlines()[0]}") from None
        name = self.place(path, "")  # its name first: an include that comes back to it ends here
        if isinstance(doc, dict):
            self.rewrite(doc, path)
        self.packed.files[f"{self.folder}/{name}"] = yaml.dump(doc, Dumper=TaggedDumper, sort_keys=False,
                                                               allow_unicode=True)
        return name

    def rewrite(self, doc: dict[str, Any], path: Path) -> None:
        source = doc.get("dataset_path")
        if isinstance(source, str) and self.local(source).is_dir():
            raise UsageError(f"task file {path}: its dataset_path {source} is a local folder, which is not sent to "
                             "a remote target: name its files in dataset_kwargs.data_files")
        for module in sorted(_functions(doc)):
            py = path.parent / f"{module}.py"
            if py.is_file():
                self.place(py, py)
        included = doc.get("include")
        if isinstance(included, str):
            target = Path(included) if Path(included).is_absolute() else path.parent / included
            if target.is_file():
                doc["include"] = self.add_yaml(target)
        kwargs = doc.get("dataset_kwargs")
        if isinstance(kwargs, dict) and "data_files" in kwargs:
            kwargs["data_files"] = self.data_files(kwargs["data_files"])

    def data_files(self, value: Any) -> Any:
        """`data_files` with each local file sent and named by its path from the job's folder."""
        if isinstance(value, dict):
            return {k: self.data_files(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.data_files(v) for v in value]
        if not isinstance(value, str):
            return value
        local = self.local(value)
        if "://" in value or not local.is_file():
            return value
        return f"{self.folder}/{self.place(local, local)}"


def _functions(value: Any) -> set[str]:
    """The modules named by the `!function module.name` values anywhere in `value`."""
    if isinstance(value, Tagged):
        if value.tag == FUNCTION and isinstance(value.value, str) and "." in value.value:
            return {value.value.rsplit(".", 1)[0]}
        return _functions(value.value)
    if isinstance(value, dict):
        return {m for v in value.values() for m in _functions(v)}
    if isinstance(value, list):
        return {m for v in value for m in _functions(v)}
    return set()
