"""Read `overbrainer.toml` + `OVERBRAINER_*` variables into a validated Config (config/load.py
adds the logging of its warnings).

Precedence: environment > file > defaults. Every problem is listed at once in
`ConfigError("invalid configuration", problems)`; TOML syntax errors give line, column (of the key
of a repeated or conflicting one, which tomllib reports past its statement) and
tomllib's reason (without the character or key it may quote), type errors the key and the
expected type: a value is never echoed.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Mapping

from overbrainer.config import envmap
from overbrainer.config.build import build
from overbrainer.config.model import Config
from overbrainer.errors import ConfigError
from overbrainer.support.files import read_bytes

CONFIG_FILE = "overbrainer.toml"
# Patterns for a syntax error only, compiled then (re's cache; start-up time).
_AT = r"\(at line (\d+), column (\d+)\)"
# What tomllib may quote from the file: a character ('x') or a key (('a', 'b')).
_QUOTED = r"\((?:'[^']*'|\"[^\"]*\"|[^()])*\)|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_REWORDED = {
    "Cannot declare twice": "Cannot declare the same table or key twice",
    "Cannot mutate immutable namespace": "Cannot add to an inline table or array declared earlier",
    "Cannot redefine namespace": "Cannot redefine a table",
}
# tomllib reports these past the statement (or inline table pair) that causes them: the problem
# points at its key instead.
_PAST_THE_KEY = ("Cannot overwrite a value", "Cannot declare", "Cannot redefine namespace",
                 "Cannot mutate immutable namespace", "Duplicate inline table key")


def key_column(line: str, column: int) -> int:
    """The column (1-based) of the key whose statement ends before `column` on `line`: the last
    pair of the inline table still open there, else the line's first non-blank character."""
    opened: list[tuple[str, int]] = []  # the brackets open, each with where its pairs' last starts
    quote = None
    escaped = False
    for i, ch in enumerate(line[:column - 1]):
        if escaped:
            escaped = False
        elif quote is not None:
            escaped = ch == "\\" and quote == '"'
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            opened.append((ch, i + 1))
        elif ch in "}]" and opened:
            opened.pop()
        elif ch == "," and opened and opened[-1][0] == "{":
            opened[-1] = ("{", i + 1)
    tables = [start for kind, start in opened if kind == "{"]
    start = tables[-1] if tables else 0
    return start + len(line[start:]) - len(line[start:].lstrip(" \t")) + 1


def syntax_reason(message: str) -> str:
    """tomllib's reason without its position and without anything it quotes from the file."""
    reason = message.split(" (at ", 1)[0].strip()
    if not reason.startswith("Expected "):  # `Expected ']'` quotes TOML, not the file
        reason = " ".join(re.sub(_QUOTED, "", reason).split())
    reason = _REWORDED.get(reason, reason)
    return reason[:1].lower() + reason[1:]


def require_project(project_dir: str | os.PathLike[str]) -> Path:
    """The path of overbrainer.toml; ConfigError naming it when it is missing."""
    path = Path(project_dir) / CONFIG_FILE
    if not path.is_file():
        raise ConfigError(f"{path} not found: run `overbrainer init` or pass -C DIR")
    return path


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    data = read_bytes(path, missing=f"{path} not found: run `overbrainer init` or pass -C DIR",
                      error=ConfigError)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError("invalid configuration", [f"{CONFIG_FILE}: not UTF-8 (at line {line})"]) from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(_AT, str(e))
        if m:
            line, column = int(m.group(1)), int(m.group(2))
            if str(e).startswith(_PAST_THE_KEY):
                column = key_column(data.decode("utf-8").split("\n")[line - 1], column)
            where = f"at line {line}, column {column}"
        else:
            where = "at the end of the file" if "end of document" in str(e) else "(no position given)"
        problem = f"{CONFIG_FILE}: TOML syntax error {where}: {syntax_reason(str(e))}"
        raise ConfigError("invalid configuration", [problem]) from None


def parse_config(data: dict[str, Any], environ: Mapping[str, str]) -> Config:
    """Validate a parsed TOML dict with the environment laid over it."""
    problems = envmap.env_only_in_file(data)
    env = envmap.overlay(environ, problems)
    config = build(envmap.merge(data, env), environ, problems)
    if problems or config is None:
        raise ConfigError("invalid configuration", problems or ["the configuration is incomplete"])
    return config


def read_config(project_dir: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Config:
    """The configuration of the project, `environ` (default os.environ, .env already loaded)
    laid over overbrainer.toml, its warnings in `config.warnings` (not logged). Raises ConfigError
    listing every problem."""
    environ = os.environ if environ is None else environ
    return parse_config(read_toml(require_project(project_dir)), environ)
