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
"""

from __future__ import annotations

import json
import logging
import os

from overbrainer.support.atomic import atomic_write_bytes

from .figures import Figures, scan
from .paths import ProjectPaths

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
