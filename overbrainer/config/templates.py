"""Prompt templates: Jinja2 with StrictUndefined and no autoescaping.

`<project>/prompts/<name>.txt` overrides the built-in default of the same name. A broken
template fails when it is loaded (`invalid template <name>`), a missing variable when it is
rendered (`cannot render template <name>`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from jinja2 import StrictUndefined, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from overbrainer.errors import OverbrainerError

NAMES = ("subtopics", "questions", "answer_system", "judge", "grader")


def _file_name(name: str) -> str:
    return name if name.endswith(".txt") else f"{name}.txt"


def _key(name: str) -> str:
    return name[:-4] if name.endswith(".txt") else name


def builtin_source(name: str) -> str:
    """The text of the built-in template `name` (with or without `.txt`)."""
    ref = resources.files("overbrainer.config") / "templates" / "prompts" / _file_name(name)
    try:
        return ref.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OverbrainerError(f"unknown template {_file_name(name)}") from None


def _environment() -> SandboxedEnvironment:
    return SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


@dataclass
class Templates:
    """Compiled templates by name (`subtopics`, `questions`, ...), each with its source and origin."""

    _compiled: dict[str, Any]
    _sources: dict[str, str]
    _origins: dict[str, str]

    def render(self, name: str, **variables: Any) -> str:
        key = _key(name)
        if key not in self._compiled:
            raise OverbrainerError(f"template {_file_name(name)} was not loaded")
        try:
            return str(self._compiled[key].render(**variables))
        except Exception as e:  # noqa: BLE001 - jinja raises many kinds
            raise OverbrainerError(f"cannot render template {_file_name(name)}: {_short(e)}") from None

    def source(self, name: str) -> str:
        """The template text (the judge's verdict file key hashes it)."""
        return self._sources[_key(name)]

    def origin(self, name: str) -> str:
        """Where it came from: `prompts/<name>.txt` or `built-in`."""
        return self._origins[_key(name)]


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def load_templates(project_dir: str | os.PathLike[str], names: Iterable[str] = NAMES) -> Templates:
    """Load and compile `names`: `prompts/<name>.txt` of the project if present, else built-in."""
    env = _environment()
    compiled: dict[str, Any] = {}
    sources: dict[str, str] = {}
    origins: dict[str, str] = {}
    for name in names:
        key, file_name = _key(name), _file_name(name)
        override = Path(project_dir) / "prompts" / file_name
        try:
            source = override.read_text(encoding="utf-8")
            origin = f"prompts/{file_name}"
        except FileNotFoundError:
            source, origin = builtin_source(file_name), "built-in"
        except (OSError, UnicodeDecodeError) as e:
            reason = e.strerror if isinstance(e, OSError) else "not UTF-8"
            raise OverbrainerError(f"invalid template {file_name}: cannot read {override}: {reason}") from None
        try:
            compiled[key] = env.from_string(source)
        except TemplateSyntaxError as e:
            raise OverbrainerError(
                f"invalid template {file_name} ({origin}, line {e.lineno}): {_short(e)}") from None
        sources[key], origins[key] = source, origin
    return Templates(compiled, sources, origins)
