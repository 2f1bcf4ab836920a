"""What every command shares: the project directory, the output mode, the front end, and
opening the project in order: the project check, .env, the lock, then the configuration."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, Iterator

import click

from overbrainer.config.dotenv import load_project_env
from overbrainer.config.read import read_config
from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.front.results import write_result
from overbrainer.support.files import path_text

if TYPE_CHECKING:
    from pathlib import Path

PROJECT_FORMAT = 1
# Commands that only read and report: their log handler is set up when they first log, and they
# catch no stop signal (cli/stops.py) unless they call start_work() (start-up time: `import
# logging` alone costs a tenth of a bare interpreter); every other command starts work at once.
READ_ONLY = frozenset({"config"})


class AppContext:
    """What every command gets: the project folder, the output mode, the front end, the config."""

    def __init__(self, project_dir: str | os.PathLike, json_mode: bool = False, command: str | None = None):
        # The project folder as text: what `config check` runs never imports pathlib (start-up
        # time); `project_dir` is the Path the flows take.
        self.root = path_text(project_dir)
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

    @property
    def project_dir(self) -> Path:
        from pathlib import Path  # lazy: `config check` runs without pathlib

        return Path(self.root)

    def start_work(self) -> None:
        """What a command that runs work needs first: the log handler, SIGTERM and SIGHUP
        handled like Ctrl-C, and the worker threads' memory settings (support/address_space.py:
        before any other thread starts, or glibc keeps its default arena count)."""
        # lazy: commands that run work only (`import signal`, ctypes), not `--help` or `config check`
        from overbrainer.cli.stops import catch_stop_signals
        from overbrainer.support import address_space

        address_space.fit()
        catch_stop_signals()
        self.start_logging()

    def start_logging(self) -> None:
        """Install the log handler (front/logs.py), once; a command of READ_ONLY calls this
        before its first log line (a flow, a secret's resolution, a configuration warning)."""
        if not self._logging:
            from overbrainer.front.logs import setup_logging  # lazy: logging, once something is logged

            setup_logging(json=self.json_mode)
            self._logging = True

    # --- front end -------------------------------------------------------------------------

    @property
    def front(self):
        if self._front is None:
            from overbrainer.front.frontend import Cli  # lazy: the bus and renderers, for flows only

            self.start_logging()
            self._front = Cli(json=self.json_mode)
        return self._front

    def use_front(self, front) -> None:
        """Run this command's flows on `front` instead of the command line's (`tui`: an
        `Embedded` front end; what watches the front end, the metrics exporter, sees its bus)."""
        self._front = front

    def session(self):
        """The Session every flow takes: this project directory and this command's front end."""
        from overbrainer.front.session import Session  # lazy: flows only, not `config check`

        return Session(self.project_dir, self.front)

    def post_train(self) -> tuple:
        """What plugs into the training flows this command calls (runs/post_train.py):
        `[export] after_training`'s export, which runs inside the training job."""
        from overbrainer.export.in_job import InJobExport  # lazy: training commands only

        return (InJobExport(),)

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
            self._dotenv = load_project_env(self.root)
        return self._dotenv

    def require_project(self) -> None:
        if not os.path.isdir(self.root):
            what = "is not a directory" if os.path.exists(self.root) else "does not exist"
            raise ConfigError(f"project directory {self.root} {what} (-C DIR)")
        toml = path_text(self.root, "overbrainer.toml")
        if not os.path.isfile(toml):
            raise ConfigError(f"{toml} not found: run `overbrainer init` or pass -C DIR")
        version = path_text(self.root, ".overbrainer", "version")
        try:
            with open(version) as f:
                text = f.read().strip()
        except FileNotFoundError:
            return  # projects from before the version file are format 1
        except OSError as e:
            raise OverbrainerError(f"cannot read {version}: {e.strerror}") from e
        if not text.isdigit():
            raise OverbrainerError(f"{version} is not a project format number")
        if int(text) > PROJECT_FORMAT:
            raise OverbrainerError(
                f"{self.root} uses project format {text}, newer than this overbrainer knows "
                f"({PROJECT_FORMAT}): upgrade overbrainer"
            )

    def load_config(self):
        """The configuration (after .env), its warnings logged."""
        self.load_env()
        config = read_config(self.root)
        if config.warnings:
            from overbrainer.config.load import log_warnings  # lazy: logging, for warnings only

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
        from overbrainer.support.lock import ProjectLock  # lazy: fcntl, for commands that write only

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
        from overbrainer.metrics.exporter import serving  # lazy: prometheus_client, when [metrics] asks for it

        return serving(self.project_dir, config, self.front)


def app(ctx: click.Context | None = None) -> AppContext:
    ctx = ctx or click.get_current_context()
    found = ctx.find_object(AppContext)
    assert found is not None, "the root command sets the AppContext"
    return found


pass_app = click.make_pass_decorator(AppContext)
