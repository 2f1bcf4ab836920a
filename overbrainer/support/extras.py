"""The optional dependencies (setup.cfg's extras), each needed by one command or one setting only:
`pip install overbrainer` installs what `run` needs, and a command whose extra is missing stops
before it does anything, with one line saying how to install it (ConfigError, exit 2)."""

from __future__ import annotations

from importlib.util import find_spec

from overbrainer.errors import ConfigError

# Each extra, and the top-level package that tells whether it is installed.
PACKAGES = {
    "tui": "textual",  # `overbrainer tui` (with rich)
    "hub": "huggingface_hub",  # `push`, `[hub] after_training` (with hf_xet and httpx2)
    "metrics": "prometheus_client",  # `[metrics] listen` and `textfile`
    "parquet": "pyarrow",  # Parquet benchmark files, `push --dataset`
    "eval": "lm_eval",  # `overbrainer eval`
    "gate": "jsonschema",  # `[gate] json_schema`
}


def installed(extra: str) -> bool:
    """Whether the package of `extra` can be imported (found without importing it)."""
    try:
        return find_spec(PACKAGES[extra]) is not None
    except (ImportError, ValueError):
        return False


def needs(what: str, extra: str) -> str:
    """`<what> needs the <extra> extra: pip install 'overbrainer[<extra>]'`."""
    return f"{what} needs the {extra} extra: pip install 'overbrainer[{extra}]'"


def require(extra: str, what: str) -> None:
    """ConfigError (exit 2) saying how to install `extra` when it is not installed."""
    if not installed(extra):
        raise ConfigError(needs(what, extra))
