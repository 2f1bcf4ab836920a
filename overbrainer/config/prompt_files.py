"""The project's prompt overrides, `prompts/<name>.txt`, read as text without compiling them (no
Jinja2: `config check` finds an override it cannot read on its light path, config/templates.py
compiles them)."""

from __future__ import annotations

import os
from pathlib import Path

from overbrainer.errors import ConfigError

NAMES = ("subtopics", "questions", "answer_system", "judge", "grader")


def file_name(name: str) -> str:
    return name if name.endswith(".txt") else f"{name}.txt"


def read_override(project_dir: str | os.PathLike[str], name: str) -> str | None:
    """The text of `prompts/<name>.txt`, None when there is none; ConfigError (exit 2) when it
    cannot be read or is not UTF-8."""
    path = Path(project_dir) / "prompts" / file_name(name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"invalid template {file_name(name)}: cannot read {path}: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"invalid template {file_name(name)}: {path} is not UTF-8 text (line {line}); "
                          "save it as UTF-8") from None


def problems(project_dir: str | os.PathLike[str]) -> list[str]:
    """One problem per prompt override that cannot be read or is not UTF-8."""
    found = []
    for name in NAMES:
        try:
            read_override(project_dir, name)
        except ConfigError as e:
            found.append(str(e))
    return found
