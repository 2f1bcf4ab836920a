"""Prompt templates: Jinja2 with StrictUndefined and no autoescaping.

`<project>/prompts/<name>.txt` overrides the built-in default of the same name. A broken
template fails when it is loaded (`invalid template <name>`), a missing variable when it is
rendered (`cannot render template <name>`): both configuration errors (exit 2), naming the file
and line. `problems(project_dir)` finds them before anything is sent (`config check`, and `run`
before its first stage): each override is compiled, every name it reads must be one its stage
provides (`VARIABLES`, in any branch of the template), and it is rendered with sample values,
the optional ones set and unset. An override that is not UTF-8 is found without Jinja2
(config/prompt_files.py).
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from typing import Any, Iterable

from jinja2 import StrictUndefined, TemplateSyntaxError, meta, nodes
from jinja2.sandbox import SandboxedEnvironment

from overbrainer.config import prompt_files
from overbrainer.config.prompt_files import NAMES, overrides, read_override
from overbrainer.config.prompt_files import file_name as _file_name
from overbrainer.errors import ConfigError, OverbrainerError

# What each template is rendered with, by whom: the stage's variables, with sample values (the
# optional ones are also rendered unset: `_EMPTY`).
VARIABLES: dict[str, tuple[str, dict[str, Any]]] = {
    "subtopics": ("the subtopics stage", {"topic": "Topic", "description": "About the topic", "count": 3,
                                           "existing": ["A subtopic"]}),
    "questions": ("the questions stage", {"topic": "Topic", "description": "About the topic",
                                           "subtopic": "Subtopic", "count": 3, "accepted": ["A question?"]}),
    "answer_system": ("the answers stage", {"topic": "Topic", "description": "About the topic"}),
    "grader": ("the gate's grader", {"topic": "Topic", "subtopic": "Subtopic", "question": "A question?",
                                     "answer": "An answer."}),
    "judge": ("compare's judge", {"question": "A question?", "answer_a": "One answer.", "answer_b": "Another."}),
}
_EMPTY: dict[str, Any] = {"description": None, "existing": [], "accepted": []}


def _key(name: str) -> str:
    return name[:-4] if name.endswith(".txt") else name


def builtin_source(name: str) -> str:
    """The text of the built-in template `name` (with or without `.txt`)."""
    source = prompt_files.builtin_source(name)
    if source is None:
        raise OverbrainerError(f"unknown template {_file_name(name)}")
    return source


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
            raise ConfigError(f"cannot render template {_file_name(name)} ({self._origins[key]}"
                              f"{_line(e)}): {_short(e)}") from None

    def source(self, name: str) -> str:
        """The template text (the judge's verdict file key hashes it)."""
        return self._sources[_key(name)]

    def origin(self, name: str) -> str:
        """Where it came from: `prompts/<name>.txt` or `built-in`."""
        return self._origins[_key(name)]


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _line(e: BaseException) -> str:
    """`, line N`: the template's line a rendering error came from (Jinja2 puts the template's
    frames in the traceback under its name, `<template>`), or nothing."""
    found = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == "<template>"]
    return f", line {found[-1]}" if found else ""


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
            raise ConfigError(f"invalid template {file_name} ({origin}, line {e.lineno}): {_short(e)}") from None
        sources[key], origins[key] = source, origin
    return Templates(compiled, sources, origins)


def problems(project_dir: str | os.PathLike[str]) -> list[str]:
    """One problem per prompt override that cannot be used: it cannot be read, has a syntax
    error, reads a name its stage does not provide (in any branch), or fails to render with
    sample values. Built-in templates, and overrides equal to them, are not checked (the tests
    do)."""
    found = []
    for name in overrides(project_dir):
        try:
            templates = load_templates(project_dir, [name])
            who, sample = VARIABLES[name]
            _undeclared(templates, name, who, sample)
            for variables in (sample, {**sample, **{k: v for k, v in _EMPTY.items() if k in sample}}):
                templates.render(name, **variables)
        except ConfigError as e:
            found.append(str(e))
    return found


def refuse_broken(project_dir: str | os.PathLike[str]) -> None:
    """ConfigError (exit 2) naming the first unusable prompt override (`run`, before its first
    stage: a typo in the grader's prompt must not wait for the answers to be paid)."""
    found = problems(project_dir)
    if found:
        raise ConfigError(found[0])


def _undeclared(templates: Templates, name: str, who: str, sample: dict[str, Any]) -> None:
    """ConfigError naming the first name the template reads that its stage does not provide,
    and its line, even in a branch the samples do not take."""
    ast = _environment().parse(templates.source(name))
    unknown = meta.find_undeclared_variables(ast) - set(sample)
    if not unknown:
        return
    first = min((n.lineno, n.name) for n in ast.find_all(nodes.Name) if n.name in unknown)
    raise ConfigError(f"cannot render template {_file_name(name)} ({templates.origin(name)}, line {first[0]}): "
                      f"`{first[1]}` is undefined: {who} provides {', '.join(sample)}")
