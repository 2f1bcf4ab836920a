"""What every flow gets from the command that calls it.

The convention for every flow (pipeline stages, training runs, pods, and later export, compare,
push): `flow(session: Session, config, *, options...)`. `session.project_dir` is the project the
flow works in, `session.front` the front end it publishes to (its bus, its Interrupt, its
provisioning flag, its results through `report`). The command line builds one per command
(`AppContext.session()`); a library caller or a test builds one around an `Embedded` front end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overbrainer.front.frontend import Frontend


class Session:
    """The project directory and the front end of one command. (A plain class: a dataclass costs
    import time at start-up.)"""

    __slots__ = ("project_dir", "front")

    def __init__(self, project_dir: str | Path, front: "Frontend"):
        self.project_dir = Path(project_dir)
        self.front = front

    def report(self, text: str, data: dict | None = None) -> None:
        """A result: text on stdout, or `data` as one JSON object with --json."""
        self.front.report(text, data if data is not None else {"message": text})

    def __repr__(self) -> str:
        return f"Session({str(self.project_dir)!r}, {type(self.front).__name__})"
