"""The project's prompt overrides, `prompts/<name>.txt`, read as text without compiling them (no
Jinja2: `config check` loads it only for a project whose prompts differ from the built-in ones,
`overrides`; config/templates.py compiles and checks them)."""

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


def overrides(project_dir: str | os.PathLike[str]) -> list[str]:
    """The names of the prompts the project changed: `prompts/<name>.txt` exists and differs from
    the built-in default (`init` writes the defaults: they need no check); one that cannot be
    read counts as changed."""
    changed = []
    for name in NAMES:
        try:
            text = read_override(project_dir, name)
        except ConfigError:
            text = ""
        if text is not None and text != builtin_source(name):
            changed.append(name)
    return changed


def builtin_source(name: str) -> str | None:
    """The text of the built-in template `name` (with or without `.txt`), None when there is none.
    Read beside this module (the package's data files are installed with it)."""
    try:
        return (Path(__file__).parent / "templates" / "prompts" / file_name(name)).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
