"""Prompt templates: Jinja2 with StrictUndefined and no autoescaping.

`<project>/prompts/<name>.txt` overrides the built-in default of the same name. A broken
template fails when it is loaded (`invalid template <name>`; an override that is not UTF-8 is a
configuration error, exit 2, that `config check` finds: config/prompt_files.py), a missing variable when it is
rendered (`cannot render template <name>`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from typing import Any, Iterable

from jinja2 import StrictUndefined, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from overbrainer.config.prompt_files import NAMES, read_override
from overbrainer.config.prompt_files import file_name as _file_name
from overbrainer.errors import OverbrainerError


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
        source, origin = read_override(project_dir, file_name), f"prompts/{file_name}"
        if source is None:
            source, origin = builtin_source(file_name), "built-in"
        try:
            compiled[key] = env.from_string(source)
        except TemplateSyntaxError as e:
            raise OverbrainerError(
                f"invalid template {file_name} ({origin}, line {e.lineno}): {_short(e)}") from None
        sources[key], origins[key] = source, origin
    return Templates(compiled, sources, origins)
