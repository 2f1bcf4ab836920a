"""`overbrainer init [DIR]`: a new project that loads as it is. Never overwrites, never asks.

Writes overbrainer.toml, .env.example, prompts/{subtopics,questions,answer_system,judge,grader}.txt and
.overbrainer/version, and creates .gitignore or appends only its missing lines. When any file it
would write exists, it refuses before writing anything.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from overbrainer.config.prompt_files import NAMES
from overbrainer.config.templates import builtin_source
from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.support.atomic import atomic_write_text

PROJECT_FORMAT = 1
GITIGNORE_LINES = (".env", "/data/", "/runs/", "/.overbrainer/")


@dataclass
class InitResult:
    project_dir: Path
    created: list[str] = field(default_factory=list)  # paths relative to project_dir
    gitignore: str = "created"  # created | updated | unchanged


def _template(name: str) -> str:
    return (resources.files("overbrainer.config") / "templates" / name).read_text(encoding="utf-8")


def project_name(project_dir: Path) -> str:
    """A project name from the directory name: lowercase letters, digits and _."""
    name = re.sub(r"[^a-z0-9_]+", "_", project_dir.resolve().name.lower()).strip("_")
    return name or "my_project"


def planned_files(project_dir: Path) -> dict[str, str]:
    """Relative path -> content of every file init writes (the .gitignore aside)."""
    files = {
        "overbrainer.toml": _template("overbrainer.toml").replace("__PROJECT_NAME__", project_name(project_dir)),
        ".env.example": _template("env.example"),
    }
    for name in NAMES:
        files[f"prompts/{name}.txt"] = builtin_source(name)
    files[".overbrainer/version"] = f"{PROJECT_FORMAT}\n"
    return files


def _merged_gitignore(existing: str | None) -> str | None:
    """The new .gitignore text, or None when nothing is missing."""
    if existing is None:
        return "".join(line + "\n" for line in GITIGNORE_LINES)
    present = {line.strip() for line in existing.splitlines()}
    missing = [line for line in GITIGNORE_LINES if line not in present]
    if not missing:
        return None
    prefix = existing if not existing or existing.endswith("\n") else existing + "\n"
    return prefix + "".join(line + "\n" for line in missing)


def init_project(project_dir: str | os.PathLike[str]) -> InitResult:
    """Create the project in `project_dir` (made if needed). ConfigError (exit 2) if a file exists."""
    project_dir = Path(project_dir)
    if project_dir.exists() and not project_dir.is_dir():
        raise ConfigError(f"{project_dir} already exists and is not a directory")
    files = planned_files(project_dir)
    for rel in files:
        path = project_dir / rel
        if path.exists() or path.is_symlink():
            raise ConfigError(f"{path} already exists: `init` never overwrites a project")
        parent = path.parent
        if parent != project_dir and (parent.is_symlink() or (parent.exists() and not parent.is_dir())):
            raise ConfigError(f"{parent} already exists and is not a directory")
    gitignore = project_dir / ".gitignore"
    try:
        existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else None
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) else "not UTF-8"
        raise OverbrainerError(f"cannot read {gitignore}: {reason}") from None
    new_gitignore = _merged_gitignore(existing)

    result = InitResult(project_dir)
    written: list[str] = []
    try:
        project_dir.mkdir(parents=True, exist_ok=True)
        # overbrainer.toml last: a project only counts as one once everything else is there.
        for rel in sorted(files, key=lambda r: r == "overbrainer.toml"):
            atomic_write_text(project_dir / rel, files[rel])
            written.append(rel)
        if new_gitignore is not None:
            atomic_write_text(gitignore, new_gitignore)
    except OSError as e:
        # Take back what was written, so that `init` can simply run again once it is fixed.
        for rel in written:
            try:
                (project_dir / rel).unlink()
            except OSError:
                pass
        raise OverbrainerError(f"cannot create the project in {project_dir}: {e.strerror}") from None
    result.created = list(files)
    result.gitignore = "created" if existing is None else ("unchanged" if new_gitignore is None else "updated")
    return result
