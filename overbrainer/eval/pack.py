"""The task files of an eval packed into a remote eval's job folder (eval/job.py): each task
YAML with what it needs, its paths rewritten to stand in that folder.

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

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from overbrainer.errors import UsageError
from overbrainer.eval.tasks import SPLIT_TASK, TASK_DIR, TaskSet

TASKS_DIR = "tasks"
FUNCTION = "!function"


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
