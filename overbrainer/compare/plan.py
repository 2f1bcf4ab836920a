"""The plan of a compare: which run (and GGUF), which eval questions, and `setup.json`.

- Run: `--run`, else the newest run holding a GGUF: an `export.json` (in `runs/<id>/`,
  `runs/<id>/exports/*/` or `runs/<id>/compares/*/`) that names a file which still exists; the
  newest by `created` wins. The run must be shippable (runs/retrieve.shippable: ended succeeded
  or stopped, its results home): `--run` names one or fails, and the newest that is wins. When
  none holds a GGUF (`NoGguf`), the newest run that succeeded: the compare exports it first, in
  its own job.
- Questions: the first `--limit N` usable records of the project's `data/eval.jsonl`, in file
  order. Usable: a user message and an assistant answer. `messages` is everything before the first
  assistant message; `parent` the last assistant content, reasoning stripped; the parent's billed
  tokens come from `meta`.
- `runs/<run>/compares/compare_YYYYMMDD-HHMMSS/setup.json` is written before the child is asked
  anything; `--rejudge` reads only that file, never `eval.jsonl`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from overbrainer.compare.answers import strip_reasoning
from overbrainer.config.model import Config
from overbrainer.dataset.jsonl import json_lines
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.export.deliver import RECORD, ExportRecord
from overbrainer.jobs import ids
from overbrainer.jobs.run_record import SUCCEEDED, RunPlace
from overbrainer.runs.retrieve import shippable
from overbrainer.support import fmt
from overbrainer.support.record_file import RecordFile

log = logging.getLogger(__name__)

SETUP = "setup.json"
SETUP_JSON = RecordFile("compare setup")
COMPARES = "compares"


@dataclass
class Gguf:
    """The GGUF a run's export delivered, from its `export.json`."""
    run: str
    file: str  # relative to the run directory
    sha256: str | None
    quantize: str | None
    llama_cpp: str | None
    created: str


def runs_dir(project_dir: Path) -> Path:
    return ProjectPaths(project_dir).runs


def _export_files(run_dir: Path) -> list[Path]:
    found = [run_dir / RECORD]
    for folder in ("exports", COMPARES):  # a compare that exported first keeps its export.json
        if (run_dir / folder).is_dir():
            found += sorted((run_dir / folder).glob(f"*/{RECORD}"))
    return [p for p in found if p.is_file()]


def run_gguf(run_dir: Path) -> Gguf | None:
    """The newest GGUF of one run whose file still exists, or None."""
    best: Gguf | None = None
    for path in _export_files(run_dir):
        try:
            doc = ExportRecord.load(path)
        except OverbrainerError as e:
            log.warning("compare: ignoring %s", e)
            continue
        file = doc.file
        if not file or Path(file).is_absolute() or ".." in Path(file).parts:
            continue
        if not (run_dir / file).is_file():
            continue
        found = Gguf(run_dir.name, file, doc.sha256, doc.quantize, doc.llama_cpp, doc.created)
        if best is None or found.created > best.created:
            best = found
    return best


def pick_run(project_dir: Path, run_id: str | None, done: str = "compared") -> Gguf:
    """The run to compare (or evaluate: `done` words the errors) and its GGUF (errors as the
    command words them)."""
    root = runs_dir(project_dir)
    if run_id is not None:
        place = RunPlace(root, run_id)
        if not place.record_path.is_file():
            raise OverbrainerError(f"no run `{run_id}` in runs/")
        gguf = run_gguf(place.dir)
        if gguf is None:
            raise NoGguf(run_id)
        shippable(place, done)
        return gguf
    found = [g for d in (sorted(root.iterdir()) if root.is_dir() else [])
             if d.is_dir() and not d.name.startswith(".") and ids.is_valid(d.name)
             for g in [run_gguf(d)] if g is not None]
    if not found:
        raise NoGguf(None)
    refused: OverbrainerError | None = None
    for gguf in sorted(found, key=lambda g: g.created, reverse=True):
        try:
            shippable(RunPlace(root, gguf.run), done)
        except OverbrainerError as e:
            log.warning("skipping run %s: %s", gguf.run, e)
            refused = refused or e
            continue
        return gguf
    raise refused or NoGguf(None)  # every run holding a GGUF refused: the newest one's reason


class NoGguf(OverbrainerError):
    """The run (`run_id`), or every run (None), has no GGUF: the compare exports one first."""

    def __init__(self, run_id: str | None):
        super().__init__(f"run {run_id} has no GGUF" if run_id else "no run has a GGUF")
        self.run_id = run_id


def newest_exportable(project_dir: Path) -> str | None:
    """The newest run that succeeded (by its record's `created`), or None."""
    root = runs_dir(project_dir)
    found = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if d.name.startswith(".") or not ids.is_valid(d.name) or not (d / "run.json").is_file():
            continue
        try:
            record = RunPlace(root, d.name).load()
        except OverbrainerError:
            continue
        if record.state == SUCCEEDED:
            found.append((record.created, d.name))
    return max(found)[1] if found else None


def _content(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def question_of(record: Any) -> dict | None:
    """A setup question from one eval record, or None when the record is not usable."""
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        return None
    messages = [m for m in record["messages"] if isinstance(m, dict)]
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), None)
    if first is None:
        return None
    prompt = [{"role": m.get("role"), "content": _content(m)} for m in messages[:first]
              if m.get("role") in ("system", "user")]
    if not any(m["role"] == "user" and m["content"].strip() for m in prompt):
        return None
    answers = [m for m in messages if m.get("role") == "assistant"]
    meta = record.get("meta") if isinstance(record.get("meta"), dict) else {}
    return {"id": str(record.get("id") or ""), "topic": str(record.get("topic") or ""),
            "messages": prompt, "parent": strip_reasoning(_content(answers[-1])),
            "parent_input_tokens": meta.get("input_tokens"),
            "parent_output_tokens": meta.get("output_tokens")}


def eval_questions(project_dir: Path, limit: int | None) -> list[dict]:
    path = ProjectPaths(project_dir).eval
    out: list[dict] = []
    for _, record in json_lines(path, lenient=True):
        q = question_of(record)
        if q is None or not q["id"]:
            continue
        out.append(q)
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise OverbrainerError("data/eval.jsonl has no usable question (a user message and an assistant "
                               "answer): run `overbrainer split` first")
    return out


def training_shape(run_dir: Path) -> tuple[str | None, int]:
    """(base_model, sequence_len) from the run's axolotl.yaml (0: the model's own context)."""
    path = run_dir / "axolotl.yaml"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, 0
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        raise OverbrainerError(f"cannot read {path}: not a YAML mapping") from None
    doc = doc if isinstance(doc, dict) else {}
    length = doc.get("sequence_len")
    base = doc.get("base_model")
    return (base if isinstance(base, str) else None), (length if isinstance(length, int) and length > 0 else 0)


def make_setup(project_dir: Path, config: Config, gguf: Gguf, compare_id: str, limit: int | None) -> dict:
    """The content of `setup.json` for a new compare of `gguf`'s run."""
    run_dir = runs_dir(project_dir) / gguf.run
    base_model, context = training_shape(run_dir)
    return {
        "run": gguf.run, "compare": compare_id, "gguf": gguf.file, "gguf_sha256": gguf.sha256,
        "quantize": gguf.quantize, "llama_cpp": gguf.llama_cpp, "base_model": base_model,
        "context": context, "seed": config.pipeline.seed, "created": fmt.stamp(),
        "questions": eval_questions(project_dir, limit),
    }


def write_setup(compare_dir: Path, setup: dict) -> Path:
    path = Path(compare_dir) / SETUP
    SETUP_JSON.write(path, setup)
    return path


def find_compare(project_dir: Path, compare_id: str, run_id: str | None) -> Path:
    """The directory of compare `compare_id`, in `--run`'s run or in any run."""
    ids.validate(compare_id)
    root = runs_dir(project_dir)
    runs = [RunPlace(root, run_id).dir] if run_id else sorted(p for p in root.glob("*") if p.is_dir())
    for run_dir in runs:
        candidate = run_dir / COMPARES / compare_id
        if (candidate / SETUP).is_file():
            return candidate
    where = f"run {run_id}" if run_id else "any run"
    raise ConfigError(f"no compare `{compare_id}` in {where} (runs/<run>/compares/{compare_id}/setup.json)")


def load_setup(compare_dir: Path) -> dict:
    """setup.json's content: `run`, `compare`, `seed` and `questions` (each with an `id` and its
    `messages`) checked; errors name the file and a position or a field."""
    path = Path(compare_dir) / SETUP
    doc = SETUP_JSON.read(path, missing=f"{path} is missing")
    f = SETUP_JSON.fields(doc, path)
    for key, kind in (("run", str), ("compare", str), ("seed", int), ("questions", list)):
        if not isinstance(doc.get(key), kind) or isinstance(doc.get(key), bool):
            raise f.bad(key)
    for i, q in enumerate(doc["questions"]):
        if not isinstance(q, dict) or not isinstance(q.get("id"), str) or not isinstance(q.get("messages"), list):
            raise f.bad(f"questions[{i}]")
    return doc


def question_text(question: dict) -> str:
    """The last user message of a setup question (what the judge is shown)."""
    for m in reversed(question.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            return str(m.get("content") or "")
    return ""
