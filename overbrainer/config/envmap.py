"""`OVERBRAINER_A__B__C=value` → the key path a.b.c, merged over overbrainer.toml.

Path segments are lower-cased to match TOML keys. Values stay text (`EnvStr`) and are coerced by
the reader to the field's type; secrets keep their exact text. A variable that names no key is
reported by the reader as an `unknown field`.
"""

from __future__ import annotations

from typing import Any, Mapping

from overbrainer.config.fields import env_str

PREFIX = "OVERBRAINER_"

# Variables read outside the configuration schema: never treated as keys.
EXEMPT = frozenset({"OVERBRAINER_LOG",
                    "OVERBRAINER_SSH_CLIENT",  # read by nothing: a warning says so (build_train.targets)
                    "OVERBRAINER_LLAMA_CPP_DIR"})  # default llama_cpp_dir of targets (export.llama_cpp)

# Keys that only the environment may set (dotted, `*` = any name).
ENV_ONLY = (
    "providers.*.base_url",
    "providers.*.api_key",
    "targets.*.host",
    "runpod.api_key",
    "runpod.base_url",
    "hub.base_url",
    "hf_token",
    "log",
)


def env_var_for(dotted: str) -> str:
    """`providers.local.base_url` → `OVERBRAINER_PROVIDERS__LOCAL__BASE_URL`."""
    return PREFIX + "__".join(p.upper() for p in dotted.split("."))


def overlay(environ: Mapping[str, str], problems: list[str]) -> dict[str, Any]:
    """The nested dict of every OVERBRAINER_* key variable (empty values count as unset)."""
    out: dict[str, Any] = {}
    for name in sorted(environ):
        if not name.startswith(PREFIX) or name in EXEMPT:
            continue
        value = environ[name]
        parts = [p.lower() for p in name[len(PREFIX):].split("__")]
        if not all(parts):
            problems.append(f"{name}: unknown field (levels are joined by `__`)")
            continue
        if value == "":
            continue
        node = out
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                if nxt is not None:
                    problems.append(f"{name}: conflicts with {nxt.var}")
                    break
                nxt = node[p] = {}
            node = nxt
        else:
            if isinstance(node.get(parts[-1]), dict):
                problems.append(f"{name}: `{'.'.join(parts)}` is a table, not a value")
                continue
            node[parts[-1]] = env_str(value, name)
    return out


def merge(file: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """A new dict: `file` with `env` laid over it, table by table (env wins)."""
    out = dict(file)
    for k, v in env.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def env_only_in_file(data: dict[str, Any]) -> list[str]:
    """One problem per env-only key present in the file (the value is never shown)."""
    found: list[str] = []

    def walk(node: Any, pattern: list[str], path: list[str]) -> None:
        if not pattern:
            found.append(".".join(path))
            return
        if not isinstance(node, dict):
            return
        head, rest = pattern[0], pattern[1:]
        keys = list(node) if head == "*" else ([head] if head in node else [])
        for k in keys:
            walk(node[k], rest, path + [k])

    for pattern in ENV_ONLY:
        walk(data, pattern.split("."), [])
    return [f"{key}: must be set through env, not in overbrainer.toml" for key in found]
