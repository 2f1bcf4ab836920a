"""What every command shares: the project directory, the output mode, the front end, and
opening the project in order: the project check, .env, the lock, then the configuration."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from overbrainer.cli.stops import catch_stop_signals
from overbrainer.config.dotenv import load_project_env
from overbrainer.config.load import log_warnings
from overbrainer.config.model import Config
from overbrainer.config.read import read_config
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.front.logs import setup_logging
from overbrainer.front.results import write_result
from overbrainer.front.session import Session
from overbrainer.support import address_space, extras
from overbrainer.support.lock import ProjectLock

PROJECT_FORMAT = 1
# Commands that only read and report: their log handler is set up when they first log, and they
# catch no stop signal (cli/stops.py: nothing to resume, a signal simply ends them) unless they
# call start_work(); every other command starts work at once.
READ_ONLY = frozenset({"config"})


class AppContext:
    """What every command gets: the project folder, the output mode, the front end, the config."""

    def __init__(self, project_dir: str | os.PathLike, json_mode: bool = False, command: str | None = None):
        self.project_dir = Path(project_dir)
        self.json_mode = json_mode
        self.command = command
        self._front: Any = None
        self._dotenv: Any = None
        self._env_error: BaseException | None = None
        self._extra: dict = {}
        self._logging = False

    @classmethod
    def start(cls, project_dir: str, *, json_mode: bool, command: str | None) -> "AppContext":
        app = cls(project_dir, json_mode=json_mode, command=command)
        if command != "init":
            # .env comes first, so that OVERBRAINER_LOG set there applies to the logs. An error
            # is kept and raised when the command needs the environment (`--help` still works).
            try:
                app.load_env()
            except Exception as e:  # noqa: BLE001 - re-raised by load_env()
                app._env_error = e
        if command not in READ_ONLY:
            app.start_work()
        elif os.environ.get("OVERBRAINER_LOG"):
            app.start_logging()  # its own mistakes are logged at once
        return app

    def start_work(self) -> None:
        """What a command that runs work needs first: the log handler, SIGTERM and SIGHUP
        handled like Ctrl-C, and the worker threads' memory settings (support/address_space.py:
        before any other thread starts, or glibc keeps its default arena count)."""
        address_space.fit()
        catch_stop_signals()
        self.start_logging()

    def start_logging(self) -> None:
        """Install the log handler (front/logs.py), once; a command of READ_ONLY calls this
        before its first log line (a flow, a secret's resolution, a configuration warning)."""
        if not self._logging:
            setup_logging(json=self.json_mode)
            self._logging = True

    # --- front end -------------------------------------------------------------------------

    @property
    def front(self):
        if self._front is None:
            # lazy: the flows' front end (the bus, its events, the renderers): `config check` uses none
            from overbrainer.front.frontend import Cli

            self.start_logging()
            self._front = Cli(json=self.json_mode)
        return self._front

    def use_front(self, front) -> None:
        """Run this command's flows on `front` instead of the command line's (`tui`: an
        `Embedded` front end; what watches the front end, the metrics exporter, sees its bus)."""
        self._front = front

    def session(self, config: Config | None = None) -> Session:
        """The Session every flow takes: this project directory, this command's front end and
        `config`, the configuration it read (None: the command reads none)."""
        return Session(self.project_dir, self.front, config)

    def report(self, text: str, data: dict | None = None) -> None:
        """A result line: text on stdout, or the dict as one JSON object with --json. Through the
        front end once a flow has made one; before that (a command that only reports, such as
        `config check`), written directly, so that no bus or renderer is loaded."""
        data = data if data is not None else {"message": text}
        if self._front is None:
            write_result(text, data, as_json=self.json_mode)
        else:
            self.front.report(text, data)

    # --- project ---------------------------------------------------------------------------

    def load_env(self):
        """Load <project>/.env once (shell variables win). Returns the DotenvState."""
        if self._env_error is not None:
            raise self._env_error
        if self._dotenv is None:
            self._dotenv = load_project_env(self.project_dir)
        return self._dotenv

    def require_project(self) -> None:
        if not self.project_dir.is_dir():
            what = "is not a directory" if self.project_dir.exists() else "does not exist"
            raise ConfigError(f"project directory {self.project_dir} {what} (-C DIR)")
        toml = self.project_dir / "overbrainer.toml"
        if not toml.is_file():
            raise ConfigError(f"{toml} not found: run `overbrainer init` or pass -C DIR")
        version = ProjectPaths(self.project_dir).state / "version"
        try:
            text = version.read_text().strip()
        except FileNotFoundError:
            return  # projects from before the version file are format 1
        except OSError as e:
            raise OverbrainerError(f"cannot read {version}: {e.strerror}") from e
        if not text.isdigit():
            raise OverbrainerError(f"{version} is not a project format number")
        if int(text) > PROJECT_FORMAT:
            raise OverbrainerError(
                f"{self.project_dir} uses project format {text}, newer than this overbrainer knows "
                f"({PROJECT_FORMAT}): upgrade overbrainer"
            )

    def load_config(self):
        """The configuration (after .env), its warnings logged."""
        self.load_env()
        config = read_config(self.project_dir)
        if config.warnings:
            self.start_logging()
            log_warnings(config)
        return config

    @contextlib.contextmanager
    def open_project(self, *, write: bool) -> Iterator[Any]:
        """Check overbrainer.toml exists, take the lock (writers), then load the config.

        A locked project is refused even when its configuration is invalid, and nothing is
        created before overbrainer.toml is known to exist. A writer with `[metrics]` set has
        its metrics served and written while it holds the lock (docs/metrics.md).
        """
        self.require_project()
        if not write:
            yield self.load_config()
            return
        with ProjectLock(self.project_dir, command=self.command_name()):
            config = self.load_config()
            with self.metrics(config):
                yield config

    @staticmethod
    def command_name() -> str | None:
        """What this process runs, as the project lock names it for a second command
        (`overbrainer train attach`): the command's path, never its arguments."""
        ctx = click.get_current_context(silent=True)
        return ctx.command_path if ctx is not None else None

    def metrics(self, config) -> contextlib.AbstractContextManager:
        """The command's metrics while the block runs (the project lock held), when `[metrics]`
        is set; nothing otherwise."""
        if not config.metrics.enabled:
            return contextlib.nullcontext()
        extras.require("metrics", "[metrics]")
        from overbrainer.metrics.exporter import serving  # lazy: prometheus_client (the `metrics` extra)

        return serving(self.project_dir, config, self.front)


def app(ctx: click.Context | None = None) -> AppContext:
    """The command's AppContext, made (AppContext.start) by the first command that asks for it,
    from the root group's options (-C, --json) and the name of the command it runs: `--help`
    and a usage error never make one."""
    root = (ctx or click.get_current_context()).find_root()
    if not isinstance(root.obj, AppContext):
        root.obj = AppContext.start(root.params["project_dir"], json_mode=root.params["json_mode"],
                                    command=root.invoked_subcommand)
    return root.obj


# What a command may raise on purpose: cli/main.py turns each into its line and exit code.
_EXPECTED = (OverbrainerError, click.ClickException, click.exceptions.Exit, click.exceptions.Abort,
             BrokenPipeError)


def pass_app(f: Callable[..., Any]) -> Callable[..., Any]:
    """A command's decorator: the command gets the AppContext (`app()`) as its first argument.
    Anything else it raises is an internal error: its traceback goes to the command's log (at
    debug level: OVERBRAINER_LOG=debug), before cli/main.py prints its one line."""
    def with_app(*args: Any, **kwargs: Any) -> Any:
        try:
            return click.get_current_context().invoke(f, app(), *args, **kwargs)
        except _EXPECTED:
            raise
        except Exception:
            logging.getLogger("overbrainer").debug("internal error", exc_info=True)
            raise

    return functools.update_wrapper(with_app, f)
