"""What every flow gets from the command that calls it.

The convention for every flow (pipeline stages, training runs, pods, export, compare, eval, push):
`flow(session: Session, *, options...)`. The session holds the command's parts, and a flow takes
them from it rather than beside it:

- `session.project_dir`: the project the flow works in;
- `session.front`: the front end it publishes to (its bus, its provisioning flag, its results
  through `report`);
- `session.config`: the configuration the command read (`with_config(config)`: the same session
  on another one, e.g. reloaded between `run`'s stages and its training);
- `session.interrupt`: the Interrupt of the flow running, from its front end, while the flow's
  `with session.interruptible():` block runs (Ctrl-C, SIGTERM and SIGHUP caught on the command
  line; the caller's detach Event when embedded). A flow opens one where it catches signals, and
  what it calls takes it from the session.

The command line builds one per command (`AppContext.session(config)`); a library caller or a test
builds one around an `Embedded` front end.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from overbrainer.config.model import Config
    from overbrainer.front.frontend import Frontend
    from overbrainer.front.interrupt import Interrupt


class Session:
    """The project directory, the front end and the configuration of one command, and the
    Interrupt of its flow while one runs. (A plain class: a dataclass costs import time at
    start-up.)"""

    __slots__ = ("project_dir", "front", "_config", "_interrupts")

    def __init__(self, project_dir: str | Path, front: Frontend, config: Config | None = None):
        self.project_dir = Path(project_dir)
        self.front = front
        self._config = config
        self._interrupts: list[Interrupt] = []

    @property
    def config(self) -> Config:
        """The command's configuration (a flow that reads none, `history` or `runs rm`, is given
        a session without one)."""
        if self._config is None:
            raise RuntimeError("this session has no configuration: the command read none")
        return self._config

    def with_config(self, config: Config) -> Session:
        """This command's session on `config` (the same project and front end)."""
        return Session(self.project_dir, self.front, config)

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[Interrupt]:
        """The front end's Interrupt for the block (`session.interrupt` meanwhile): caught from
        here on, restored when the block ends."""
        interrupt = self.front.interrupt()
        self._interrupts.append(interrupt)
        try:
            yield interrupt
        finally:
            self._interrupts.remove(interrupt)
            interrupt.restore()

    @property
    def interrupt(self) -> Interrupt:
        """The Interrupt of the innermost `interruptible()` block running."""
        if not self._interrupts:
            raise RuntimeError("no flow of this session is interruptible now")
        return self._interrupts[-1]

    def report(self, text: str, data: dict[str, Any] | None = None) -> None:
        """A result: text on stdout, or `data` as one JSON object with --json."""
        self.front.report(text, data if data is not None else {"message": text})

    def __repr__(self) -> str:
        return f"Session({str(self.project_dir)!r}, {type(self.front).__name__})"
