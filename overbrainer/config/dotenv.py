"""`<project>/.env`: loaded into the process environment at start-up (shell variables win).

Parsed by python-dotenv (`KEY=value` lines, optional `export `, `#` comments, inline after
whitespace for unquoted values, single and double quotes, multi-line quoted values, `${VAR}` and
`${VAR:-default}`; its README is the reference). What this module adds or decides where
python-dotenv leaves a choice:

- a line python-dotenv cannot parse is a ConfigError (exit 2) naming the line number and never
  its content (it usually holds a secret), where python-dotenv warns and skips the line; the
  number is that of the line itself, not of the blank lines before it (python-dotenv's warning
  counts from those). A file that is not UTF-8 is named as such, with its line;
- `${VAR}` looks in the shell first, then at the keys above it in .env, as python-dotenv's
  `load_dotenv` does (the shell wins for a reference as for a key); `dotenv_values` would look at
  .env first, and would read `os.environ` where a reload must see the environment without the keys
  the previous .env set;
- as in python-dotenv: a repeated key keeps its last value; a key without `=` sets nothing;
  `${VAR}` expands in single-quoted values too; `\\$` is no escape; `${VAR:-default}` takes the
  default only when VAR is unset (not when it is empty); a UTF-8 BOM is ignored.
"""

from __future__ import annotations

import io
import os
import re
from collections import ChainMap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, MutableMapping

from overbrainer.errors import ConfigError


def _error(line: int) -> ConfigError:
    return ConfigError(f"cannot parse .env (syntax error at line {line})")


def _line_of(original: str, line: int) -> int:
    """The number of the first line of `original` (a binding's text from `line` on) that is not blank."""
    blank = original[:len(original) - len(original.lstrip())]
    return line + len(re.findall(r"\r\n|\n|\r", blank))


def parse(text: str, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The (key, value) pairs of a .env text, in order, a repeated key with its last value."""
    # lazy: python-dotenv only when the project has a .env (start-up time)
    from dotenv.parser import parse_stream
    from dotenv.variables import parse_variables

    environ = os.environ if environ is None else environ
    out: dict[str, str] = {}
    lookup = ChainMap(dict(environ), out)  # the shell first, then the keys above
    for binding in parse_stream(io.StringIO(text.removeprefix("\ufeff"))):
        if binding.error:
            raise _error(_line_of(binding.original.string, binding.original.line))
        if binding.key is not None and binding.value is not None:
            out[binding.key] = "".join(atom.resolve(lookup) for atom in parse_variables(binding.value))
    return list(out.items())


def read(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Parse the file at `path`; a missing file is empty."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"cannot read {path}: it is not UTF-8 text (line {line}); save it as UTF-8") from None
    return parse(text, environ)


def _stamp_of(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def stamp(project_dir: str | os.PathLike[str]) -> tuple[object, ...]:
    """What `run` compares between stages: mtime and size of overbrainer.toml and .env."""
    return (_stamp_of(Path(project_dir) / "overbrainer.toml"), _stamp_of(Path(project_dir) / ".env"))


@dataclass
class DotenvState:
    """What `.env` did to the environment, so that `run` can reload it between stages."""

    project_dir: Path
    keys: set[str] = field(default_factory=set)  # the keys .env (not the shell) provided
    loaded_stamp: tuple[object, ...] = ()

    @property
    def path(self) -> Path:
        return self.project_dir / ".env"

    def changed(self) -> bool:
        """Whether overbrainer.toml or .env changed (mtime or size) since the last (re)load."""
        return stamp(self.project_dir) != self.loaded_stamp

    def reload(self, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
        """Re-read .env: the new environment is the process's minus the keys .env set before,
        plus what .env holds now (shell exports still win). Applied to `environ` (default
        os.environ) and returned. Raises ConfigError (nothing changed) on a syntax error."""
        environ = os.environ if environ is None else environ
        new_stamp = stamp(self.project_dir)
        base = {k: v for k, v in environ.items() if k not in self.keys}
        pairs = read(self.path, base)
        added = {k: v for k, v in pairs if k not in base}
        for k in self.keys - added.keys():
            environ.pop(k, None)
        environ.update(added)
        self.keys = set(added)
        self.loaded_stamp = new_stamp
        return {**base, **added}


def load_project_env(project_dir: str | os.PathLike[str],
                     environ: MutableMapping[str, str] | None = None) -> DotenvState:
    """Load `<project_dir>/.env` into `environ` (default os.environ); the shell wins."""
    environ = os.environ if environ is None else environ
    state = DotenvState(Path(project_dir))
    state.loaded_stamp = stamp(state.project_dir)
    for k, v in read(state.path, environ):
        if k not in environ:
            environ[k] = v
            state.keys.add(k)
    return state
