"""`<project>/.env`: loaded into the process environment at start-up (shell variables win).

Syntax (python-dotenv style): `KEY=value` lines, optional `export `, `#` comments (inline after
whitespace for unquoted values), single quotes literal, double quotes with `\\n \\t \\" \\\\ \\$`
escapes; `${VAR}` and `${VAR:-default}` expand in unquoted and double-quoted values (shell first,
then earlier .env keys). The first occurrence of a repeated key wins; a UTF-8 BOM is ignored.
A syntax error names the line number and never its content (it usually holds a secret); so
does a file that is not UTF-8 (named as such).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, MutableMapping

from overbrainer.errors import ConfigError

# Patterns compiled on first use (re's cache): a project without .env never pays (start-up time).
_KEY = r"[A-Za-z_][A-Za-z0-9_.]*"
_EXPAND = r"\$\{([A-Za-z_][A-Za-z0-9_.]*)(?::-([^}]*))?\}"
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "\x00"}


def _error(line: int) -> ConfigError:
    return ConfigError(f"cannot parse .env (syntax error at line {line})")


def _expand(value: str, lookup: Mapping[str, str], earlier: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        v = lookup.get(name)
        if v is None:
            v = earlier.get(name)
        if not v and default is not None:
            return str(default)
        return v or ""

    return re.sub(_EXPAND, sub, value).replace("\x00", "$")


def parse(text: str, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The (key, value) pairs of a .env text, in order, repeats dropped (first wins)."""
    environ = os.environ if environ is None else environ
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        start = i + 1
        line = lines[i].rstrip("\r")
        i += 1
        s = line.lstrip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("export ") or s.startswith("export\t"):
            s = s[7:].lstrip()
        m = re.match(_KEY, s)
        if not m:
            raise _error(start)
        key = m.group(0)
        rest = s[m.end():].lstrip(" \t")
        if not rest.startswith("="):
            raise _error(start)
        rest = rest[1:].lstrip(" \t")
        if rest.startswith("'"):
            body = rest[1:]
            while "'" not in body:
                if i >= len(lines):
                    raise _error(start)
                body += "\n" + lines[i].rstrip("\r")
                i += 1
            end = body.index("'")
            value, tail = body[:end], body[end + 1:]
            expand = False
        elif rest.startswith('"'):
            value, tail, i = _double_quoted(rest[1:], lines, i, start)
            expand = True
        else:
            value, tail, expand = re.split(r"\s#", rest, maxsplit=1)[0].strip(), "", True
        tail = tail.strip()
        if tail and not tail.startswith("#"):
            raise _error(start)
        if expand:
            value = _expand(value, environ, out)
        if key not in out:
            out[key] = value
    return list(out.items())


def _double_quoted(body: str, lines: list[str], i: int, start: int) -> tuple[str, str, int]:
    chars: list[str] = []
    while True:
        j = 0
        while j < len(body):
            c = body[j]
            if c == "\\" and j + 1 < len(body):
                nxt = body[j + 1]
                chars.append(_ESCAPES.get(nxt, "\\" + nxt))
                j += 2
                continue
            if c == '"':
                return "".join(chars), body[j + 1:], i
            chars.append(c)
            j += 1
        if i >= len(lines):
            raise _error(start)
        chars.append("\n")
        body = lines[i].rstrip("\r")
        i += 1


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
