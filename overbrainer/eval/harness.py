"""lm-evaluation-harness (`lm-eval`, the `eval` extra) run on one side of an eval: the child
(llama-server's OpenAI-compatible endpoint) or the parent (its provider's), both through lm-eval's
`local-chat-completions` model with `apply_chat_template`, the same tasks, limit, seeds and
generation kwargs (`arguments`: the same on this machine and in a remote eval's job).

The key: lm-eval's OpenAI models read it from `OPENAI_API_KEY` only. It is set in this process's
environment for the call and put back as it was afterwards, never passed in an argument or
written to a file; the child's call runs with that variable empty (no key of the user's
environment reaches llama-server). `HF_DATASETS_OFFLINE` / `HF_HUB_OFFLINE` are set the same way
for a set of local tasks (eval/tasks.TaskSet.offline).

lm-eval is imported here only, inside `evaluate` (`# lazy:`): no other command pays for it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from overbrainer.errors import ConfigError, OverbrainerError, UsageError
from overbrainer.eval.tasks import TaskSet

log = logging.getLogger(__name__)

MODEL = "local-chat-completions"
KEY_ENV = "OPENAI_API_KEY"
OFFLINE_ENV = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
QUIET_ENV = ("TQDM_DISABLE", "HF_DATASETS_DISABLE_PROGRESS_BARS")  # lm-eval's and datasets' bars
THINK_END = "</think>"
REQUEST_TIMEOUT = 600


@dataclass
class Side:
    """One model lm-eval asks: `url` is the chat completions endpoint (…/chat/completions)."""
    name: str  # child | parent
    url: str
    model: str
    concurrent: int = 1
    key: str | None = field(default=None, repr=False)

    seed: int = 1234  # lm-eval's default; the eval's seed, sent with every request

    def model_args(self) -> dict[str, Any]:
        return {"base_url": self.url, "model": self.model, "seed": int(self.seed),
                "num_concurrent": int(self.concurrent), "max_retries": 3, "timeout": REQUEST_TIMEOUT,
                "tokenizer_backend": None, "think_end_token": THINK_END}


@dataclass
class Settings:
    """What both sides share: the limit per task, the seed (every one of lm-eval's), the
    generation kwargs."""
    limit: int | None
    seed: int
    gen_kwargs: dict[str, Any]
    quiet: bool = False  # no progress bars on stderr (--json, or stderr not a terminal)

    def seeds(self) -> dict[str, Any]:
        return {"random_seed": self.seed, "numpy_random_seed": self.seed, "torch_random_seed": self.seed,
                "fewshot_random_seed": self.seed}


@contextmanager
def environment(key: str | None, offline: bool, quiet: bool = False) -> Iterator[None]:
    """`OPENAI_API_KEY` = `key` (empty without one) and, for local tasks, the offline variables
    (`quiet`: the progress bars' off switches), for the block only."""
    names = (KEY_ENV, *OFFLINE_ENV, *QUIET_ENV)
    saved = {name: os.environ.get(name) for name in names}
    os.environ[KEY_ENV] = key or ""
    for name in (OFFLINE_ENV if offline else ()) + (QUIET_ENV if quiet else ()):
        os.environ[name] = "1"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def harness() -> tuple[Any, Any]:
    """The `lm_eval` module and its TaskManager; ConfigError (exit 2) when the extra is missing."""
    try:
        import lm_eval  # lazy: the `eval` extra, for `overbrainer eval` only
        from lm_eval.tasks import TaskManager  # lazy: the same
    except ImportError as e:
        raise ConfigError(f"overbrainer eval needs lm-eval: pip install 'overbrainer[eval]' ({e})") from None
    return lm_eval, TaskManager


def version() -> str | None:
    try:
        return metadata.version("lm_eval")
    except metadata.PackageNotFoundError:
        return None


def check_tasks(manager: Any, tasks: TaskSet) -> None:
    """Every name of lm-eval's registry known (else UsageError, exit 2), and every task whose data
    is not local loadable (else OverbrainerError, exit 1: its data set could not be had, e.g. no
    network), before any model is asked anything."""
    known = set(manager.all_tasks)
    for name in tasks.registry:
        if name not in known:
            raise UsageError(f"unknown task `{name}`: not a task, group or tag of lm-eval {version() or ''}, "
                             "nor a task file (.yaml)".replace("  ", " "))
    for name in tasks.remote:
        try:
            manager.load([name])
        except Exception as e:  # noqa: BLE001 - whatever the harness or `datasets` raised
            raise OverbrainerError(f"task `{name}` cannot be loaded: {one_line(e)}") from None


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:300]


def task_manager(tasks: TaskSet, settings: Settings) -> Any:
    """lm-eval's TaskManager for `tasks` (its own index only when a task is named), the named
    tasks checked (check_tasks); reused by both sides."""
    with environment(None, tasks.offline, settings.quiet):
        _, manager_class = harness()
        manager = manager_class(include_path=list(tasks.include) or None, include_defaults=bool(tasks.registry))
        check_tasks(manager, tasks)
    return manager


def arguments(side: Side, names: list[str], settings: Settings) -> dict[str, Any]:
    """lm-eval's `simple_evaluate` keyword arguments for `side` on the tasks `names`, all but the
    task manager: what `evaluate` passes here, and what a remote eval's job gives its client
    (eval/scripts/eval_client.py, in eval_job.json), so both sides run the same settings."""
    return {"model": MODEL, "model_args": side.model_args(), "tasks": list(names), "limit": settings.limit,
            "apply_chat_template": True, "log_samples": True, "gen_kwargs": dict(settings.gen_kwargs),
            **settings.seeds()}


def evaluate(side: Side, tasks: TaskSet, settings: Settings, manager: Any) -> dict[str, Any]:
    """lm-eval's `simple_evaluate` output for `side`, its samples logged."""
    with environment(side.key, tasks.offline, settings.quiet):
        lm_eval, _ = harness()
        log.info("eval: lm-eval on the %s (%s), tasks %s", side.name, side.model, ", ".join(tasks.names))
        try:
            args = arguments(side, tasks.names, settings)
            out: dict[str, Any] = lm_eval.simple_evaluate(**args, task_manager=manager)
            return out
        except (OverbrainerError, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the harness's own failure, said in one line
            raise OverbrainerError(f"lm-eval failed on the {side.name}: {one_line(e)}") from None
