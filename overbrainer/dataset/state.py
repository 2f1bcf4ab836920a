"""The dataset's saved figures (`.overbrainer/dataset.json`): what dataset/figures.py counted,
with the identity of the data files it was counted from (device, inode, size and modification
time to the nanosecond of subtopics.jsonl, questions.jsonl and answers.jsonl, and "missing" for
a file that is not there).

- `current(paths)`: the saved figures when every file is still the one they were taken from
  (a stat of three files, no read), else a new `scan` (one streaming pass), saved.
- A stage that appended saves its updated figures once its files are closed (`save`), or, when
  it cannot keep them exact, `forget`s them. A file changed behind our back (edited by hand,
  another tool, a crash between an append and the save) no longer matches: the next command
  scans again. So nothing a rerun decides rests on figures that do not match the files.
- The file is a cache: a missing, unreadable or unknown one is scanned anew, never an error.

The last split is kept the same way (`.overbrainer/split.json`): its settings (the configured
topics' names, `eval_ratio`, `seed`), the identity of the answers and questions it read and of
the train and eval files it wrote, and its counts. A split whose inputs, settings and outputs
are all the same again has nothing to write: `unchanged_split` gives the counts it would print.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

from overbrainer.support.atomic import atomic_write_bytes

from .figures import Figures, scan
from .paths import ProjectPaths
from .split import SplitResult

log = logging.getLogger(__name__)

FORMAT = 1


def _identity(path) -> list[int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def identities(paths: ProjectPaths) -> dict:
    return {"subtopics": _identity(paths.subtopics), "questions": _identity(paths.questions),
            "answers": _identity(paths.answers)}


def load(paths: ProjectPaths) -> Figures | None:
    """The saved figures, when they match the files; else None."""
    try:
        with open(paths.dataset_state, "rb") as f:
            data = json.loads(f.read())
        if data.get("format") != FORMAT or data.get("files") != identities(paths):
            return None
        return Figures.from_json(data["figures"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        log.debug("%s: not used (%s); the data files are counted again", paths.dataset_state, e)
        return None


def current(paths: ProjectPaths) -> Figures:
    """The figures of the data files as they are now (saved ones, or a scan saved)."""
    figures = load(paths)
    if figures is None:
        figures = scan(paths)
        save(paths, figures)
    return figures


def save(paths: ProjectPaths, figures: Figures) -> None:
    """Save `figures` as those of the files as they are now. A failure only logs: the next
    command counts again."""
    data = {"format": FORMAT, "files": identities(paths), "figures": figures.to_json()}
    try:
        atomic_write_bytes(paths.dataset_state, json.dumps(data, separators=(",", ":")).encode())
    except OSError as e:
        log.warning("cannot write %s: %s (the next command counts the data files again)",
                    paths.dataset_state, e.strerror)


def forget(paths: ProjectPaths) -> None:
    try:
        os.unlink(paths.dataset_state)
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("cannot remove %s: %s", paths.dataset_state, e.strerror)


def split_key(paths: ProjectPaths, topics, eval_ratio: float, seed: int) -> dict:
    """What a split's result depends on: its inputs' identity and its settings."""
    names = sorted(t if isinstance(t, str) else t.name for t in topics)
    return {"answers": _identity(paths.answers), "questions": _identity(paths.questions),
            "topics": names, "eval_ratio": float(eval_ratio), "seed": int(seed)}


def _outputs(paths: ProjectPaths) -> dict:
    return {"train": _identity(paths.train), "eval": _identity(paths.eval)}


def unchanged_split(paths: ProjectPaths, key: dict) -> SplitResult | None:
    """The counts of the last split when it read the same files with the same settings and its
    train and eval files are still the ones it wrote; else None."""
    try:
        with open(paths.split_state, "rb") as f:
            data = json.loads(f.read())
        if data.get("format") != FORMAT or data.get("key") != key or data.get("outputs") != _outputs(paths):
            return None
        if "kept_output_tokens" not in data["result"]:
            return None  # saved before the kept tokens were counted: split again, once
        return SplitResult(**data["result"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        log.debug("%s: not used (%s)", paths.split_state, e)
        return None


def save_split(paths: ProjectPaths, key: dict, result: SplitResult) -> None:
    data = {"format": FORMAT, "key": key, "outputs": _outputs(paths), "result": dataclasses.asdict(result)}
    try:
        atomic_write_bytes(paths.split_state, json.dumps(data, separators=(",", ":")).encode())
    except OSError as e:
        log.warning("cannot write %s: %s (the next split writes its files again)", paths.split_state, e.strerror)
