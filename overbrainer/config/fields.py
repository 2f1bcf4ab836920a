"""Typed, strict reading of one TOML table, collecting every problem instead of stopping.

Values that came from the environment are `EnvStr` (a str that remembers its variable): they
are coerced to the field's type, while file values must already have it. Problems name the key
(and the variable) and never the value.
"""

from __future__ import annotations

import builtins
import difflib
import math
from typing import Any, Callable, Iterable

_MISSING = object()

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class EnvStr(str):
    """A value from an OVERBRAINER_* variable; `var` names the variable."""

    var: str = ""


def env_str(value: str, var: str) -> EnvStr:
    s = EnvStr(value)
    s.var = var
    return s


def origin(value: Any) -> str | None:
    """The first environment variable a value (or anything inside it) came from."""
    if isinstance(value, EnvStr):
        return value.var
    if isinstance(value, dict):
        for v in value.values():
            o = origin(v)
            if o:
                return o
    return None


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
NAME_RULE = "^[a-z0-9_]+$"  # what problems say a name must match


def is_name(text: str) -> bool:
    """A name of a provider or a target: one or more of a-z, 0-9 and _ (NAME_RULE), nothing else,
    not even the trailing newline `re.match("^…$")` lets through. A set check, not a regex: no
    compile at start-up."""
    return bool(text) and _NAME_CHARS.issuperset(text)


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Table:
    """A view of the table at `path`; read keys with the typed getters, then call finish()."""

    def __init__(self, data: dict[str, Any], path: str, problems: list[str]):
        self.data = data
        self.path = path
        self.problems = problems
        self.used: set[str] = set()

    # --- reporting -------------------------------------------------------------------------

    def key(self, k: str) -> str:
        return join(self.path, k)

    def problem(self, k: str | None, message: str, value: Any = None) -> None:
        where = self.key(k) if k is not None else self.path
        src = origin(value)
        self.problems.append(f"{where}: {message}" + (f" (from {src})" if src else ""))

    def missing(self, k: str) -> None:
        self.problems.append(f"missing field `{self.key(k)}`")

    def finish(self) -> None:
        """Report every key that was not read as an unknown field."""
        for k, v in self.data.items():
            if k not in self.used:
                unknown(self.problems, self.key(k), v, known=self.used)

    # --- getters ---------------------------------------------------------------------------

    def raw(self, k: str, default: Any = None) -> Any:
        self.used.add(k)
        return self.data.get(k, default)

    def _get(self, k: str, required: bool) -> Any:
        self.used.add(k)
        if k not in self.data:
            if required:
                self.missing(k)
            return _MISSING
        return self.data[k]

    def str(self, k: str, default: Any = None, *, required: bool = False, nonempty: bool = False) -> Any:
        v = self._get(k, required)
        if v is _MISSING:
            return default
        if not isinstance(v, str):
            self.problem(k, "expected a string", v)
            return default
        if nonempty and not v.strip():
            self.problem(k, "must not be empty", v)
            return default
        return str(v)

    def int(self, k: builtins.str, default: Any = None, *, required: builtins.bool = False,
            min: int | None = None, max: int | None = None) -> Any:
        v = self._get(k, required)
        if v is _MISSING:
            return default
        n = _to_int(v)
        if n is None:
            self.problem(k, "expected an integer", v)
            return default
        if min is not None and n < min:
            self.problem(k, f"must be at least {min}", v)
            return default
        if max is not None and n > max:
            self.problem(k, f"must be at most {max}", v)
            return default
        return n

    def float(self, k: builtins.str, default: Any = None, *, required: builtins.bool = False,
              rule: tuple[Callable[[float], builtins.bool], builtins.str] | None = None) -> Any:
        v = self._get(k, required)
        if v is _MISSING:
            return default
        x = _to_float(v)
        if x is None:
            self.problem(k, "expected a number", v)
            return default
        if rule is not None and (math.isnan(x) or not rule[0](x)):
            self.problem(k, rule[1], v)
            return default
        return x

    def bool(self, k: builtins.str, default: Any = None, *, required: builtins.bool = False) -> Any:
        v = self._get(k, required)
        if v is _MISSING:
            return default
        if isinstance(v, bool):
            return v
        if isinstance(v, EnvStr):
            t = v.strip().lower()
            if t in _TRUE:
                return True
            if t in _FALSE:
                return False
        self.problem(k, "expected a boolean (true or false)", v)
        return default

    def choice(self, k: builtins.str, choices: tuple[builtins.str, ...], default: Any = None, *,
               required: builtins.bool = False) -> Any:
        v = self._get(k, required)
        if v is _MISSING:
            return default
        t = v.strip() if isinstance(v, EnvStr) else v
        if not isinstance(t, str) or t not in choices:
            self.problem(k, "expected one of " + ", ".join(choices), v)
            return default
        return str(t)

    def str_list_or_auto(self, k: builtins.str, default: Any = None, *, required: builtins.bool = False) -> Any:
        """A list of strings (array, or a comma-separated env string, items trimmed) or "auto"."""
        v = self._get(k, required)
        if v is _MISSING:
            return default
        if isinstance(v, str):
            t = v.strip()
            if t == "auto":
                return "auto"
            if isinstance(v, EnvStr):
                return [] if not t else [i.strip() for i in t.split(",")]
            self.problem(k, 'expected a list of strings or "auto"', v)
            return default
        if isinstance(v, list) and all(isinstance(i, str) for i in v):
            return [i.strip() for i in v]
        self.problem(k, 'expected a list of strings or "auto"', v)
        return default

    def table(self, k: builtins.str, *, required: builtins.bool = False) -> "Table | None":
        v = self._get(k, required)
        if v is _MISSING:
            return None
        if not isinstance(v, dict):
            self.problem(k, "expected a table", v)
            return None
        return Table(v, self.key(k), self.problems)

    def tables(self, k: builtins.str) -> dict[builtins.str, "Table"]:
        """A map of named sub-tables, e.g. [providers.<name>]."""
        t = self.table(k)
        if t is None:
            return {}
        out = {}
        for name, v in t.data.items():
            t.used.add(name)
            if not isinstance(v, dict):
                t.problem(name, "expected a table", v)
                continue
            out[name] = Table(v, t.key(name), self.problems)
        return out


def unknown(problems: list[str], dotted: str, value: Any, known: Iterable[str] = ()) -> None:
    """`unknown field `a.b``, with where it came from and the nearest known key of its table."""
    src = origin(value)
    text = f"unknown field `{dotted}`" + (f" (from {src})" if src else "")
    name = dotted.rsplit(".", 1)[-1]
    near = difflib.get_close_matches(name.lower(), sorted(known), n=1, cutoff=0.6)
    problems.append(text + (f": did you mean `{near[0]}`?" if near else ""))


def misnamed(t: Table, name: str, what: str, declared: Iterable[str], required: str) -> bool:
    """A table made by environment variables alone, without its `required` key, whose name is near
    a declared one (`OVERBRAINER_PROVIDERS__OPENAII__API_KEY` beside [providers.openai]): a typo of
    that name, reported as one problem (`unknown provider `openaii` (from …): did you mean
    `openai`?`) in place of the missing key. False (nothing reported) otherwise."""
    if required in t.data or not t.data or not all(isinstance(v, EnvStr) for v in t.data.values()):
        return False
    near = difflib.get_close_matches(name, sorted(n for n in declared if n != name), n=1, cutoff=0.6)
    if not near:
        return False
    t.used.update(t.data)
    t.problems.append(f"unknown {what} `{name}` (from {origin(t.data)}): did you mean `{near[0]}`?")
    return True


def _to_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, EnvStr):
        t = v.strip()
        if t and (t.lstrip("+-").isdigit()):
            return int(t)
    return None


def _to_float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, EnvStr):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def coerce_scalar(v: str) -> Any:
    """Text from the environment as a free-form value: true/false, integers and decimals."""
    t = v.strip()
    if t in ("true", "false"):
        return t == "true"
    if t.lstrip("+-").isdigit():
        return int(t)
    try:
        x = float(t)
    except ValueError:
        return str(v)
    return x if math.isfinite(x) else str(v)
