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
topics' names, `eval_ratio`, `seed`, the gate's settings), the identity of the answers,
questions and gate verdicts it read and of
the train and eval files it wrote, and its counts. A split whose inputs, settings and outputs
are all the same again has nothing to write: `unchanged_split` gives the counts it would print.
And the last complete `gate` (`.overbrainer/gate.json`): the identity of answers.jsonl and
gate.jsonl after it, its settings and topics; a gate with the same again has nothing to judge.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

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


def split_key(paths: ProjectPaths, topics, eval_ratio: float, seed: int, decontaminate: dict | None = None,
              gate: dict | None = None) -> dict:
    """What a split's result depends on: its inputs' identity and its settings. `decontaminate`:
    its settings ({"ngram", "eval", "benchmarks": [[path, [fields]], ...]}); the benchmark files'
    identities are added. `gate`: the gate's current settings, check -> digest; gate.jsonl is
    then an input too."""
    names = sorted(t if isinstance(t, str) else t.name for t in topics)
    key: dict[str, Any] = {"answers": _identity(paths.answers), "questions": _identity(paths.questions),
           "topics": names, "eval_ratio": float(eval_ratio), "seed": int(seed)}
    if decontaminate is not None:
        files = [_identity(paths.root / path) for path, _ in decontaminate["benchmarks"]]
        key["decontaminate"] = dict(decontaminate, files=files)
    if gate:
        key["gate"] = {"file": _identity(paths.gate), "settings": dict(sorted(gate.items()))}
    return key


def last_split(paths: ProjectPaths) -> dict | None:
    """The saved record of the last split ({"key", "outputs", "result"}) when its train and eval
    files are still the ones it wrote; else None (the model card's decontamination facts)."""
    try:
        with open(paths.split_state, "rb") as f:
            data = json.loads(f.read())
        if data.get("format") != FORMAT or data.get("outputs") != _outputs(paths):
            return None
        return data
    except (OSError, ValueError):
        return None


def _outputs(paths: ProjectPaths) -> dict:
    return {"train": _identity(paths.train), "eval": _identity(paths.eval)}


def _cached(path, key: dict, outputs: dict | None = None) -> dict | None:
    """The saved state at `path` when its key (and outputs) are these; else None."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
        if data.get("format") != FORMAT or data.get("key") != key or data.get("outputs") != outputs:
            return None
        return data
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError) as e:
        log.debug("%s: not used (%s)", path, e)
        return None


def _save(path, data: dict, then: str) -> None:
    try:
        atomic_write_bytes(path, json.dumps({"format": FORMAT, **data}, separators=(",", ":")).encode())
    except OSError as e:
        log.warning("cannot write %s: %s (%s)", path, e.strerror, then)


def unchanged_split(paths: ProjectPaths, key: dict) -> SplitResult | None:
    """The counts of the last split when it read the same files with the same settings and its
    train and eval files are still the ones it wrote; else None."""
    data = _cached(paths.split_state, key, _outputs(paths))
    try:
        if data is None or "kept_output_tokens" not in data["result"]:
            return None  # none, or saved before the kept tokens were counted: split again, once
        return SplitResult(**data["result"])
    except (KeyError, TypeError, AttributeError) as e:
        log.debug("%s: not used (%s)", paths.split_state, e)
        return None


def decontamination_facts(paths: ProjectPaths) -> dict | None:
    """What the split that wrote the current train and eval files did to decontaminate them:
    {"ngram", "eval", "benchmarks": [paths], "contaminated": {source: n}}; None when unknown
    (no saved split, or train/eval changed since)."""
    data = last_split(paths)
    try:
        settings = data["key"]["decontaminate"]  # type: ignore[index]
        return {"ngram": int(settings["ngram"]), "eval": bool(settings["eval"]),
                "benchmarks": [str(path) for path, _ in settings["benchmarks"]],
                "contaminated": {str(k): int(v) for k, v in data["result"].get("contaminated", {}).items()}}  # type: ignore[index]
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


def save_split(paths: ProjectPaths, key: dict, result: SplitResult) -> None:
    _save(paths.split_state, {"key": key, "outputs": _outputs(paths), "result": dataclasses.asdict(result)},
          "the next split writes its files again")


def gate_key(paths: ProjectPaths, settings: dict, topics) -> dict:
    """What a `gate` execution depends on: answers.jsonl, gate.jsonl, the gate's settings (check
    -> digest) and the selected topics."""
    return {"answers": _identity(paths.answers), "gate": _identity(paths.gate),
            "settings": dict(sorted(settings.items())), "topics": sorted(topics)}


def unchanged_gate(paths: ProjectPaths, key: dict) -> int | None:
    """The answers judged by the last complete `gate` when nothing it depends on changed since
    (so there is nothing to judge); else None."""
    data = _cached(paths.gate_state, key)
    judged = None if data is None else data.get("judged")
    return judged if isinstance(judged, int) and not isinstance(judged, bool) else None


def save_gate(paths: ProjectPaths, key: dict, judged: int) -> None:
    _save(paths.gate_state, {"key": key, "outputs": None, "judged": judged}, "the next gate reads the answers again")
