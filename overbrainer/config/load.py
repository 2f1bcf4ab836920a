"""Load the project's configuration (config/read.py) and log its warnings (deprecations) once."""

from __future__ import annotations

import logging
import os
from typing import Mapping

from overbrainer.config.model import Config
from overbrainer.config.read import CONFIG_FILE, parse_config, read_config, read_toml, require_project, syntax_reason

log = logging.getLogger(__name__)

__all__ = ["CONFIG_FILE", "load_config", "log_warnings", "parse_config", "read_toml", "require_project",
           "syntax_reason"]


def log_warnings(config: Config) -> Config:
    for w in config.warnings:
        log.warning("%s", w)
    return config


def load_config(project_dir: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Config:
    """The configuration of the project, `environ` (default os.environ, .env already loaded)
    laid over overbrainer.toml, its warnings logged. Raises ConfigError listing every problem."""
    return log_warnings(read_config(project_dir, environ))
