"""What every stage works with: the configuration, the project paths, the bus, the interrupt
events, the command's spend cap, and the LLM clients, built lazily per role with one PriceBook
and one LlmSession (the providers' channels, circuit breakers and rate-limit pacers) shared by
the command, closed with the context (`close()`, or `with`): the next command in the same
process (the TUI) starts with fresh connections and closed breakers. The rate limits the
providers published are read from the project when it opens and kept when it closes
(dataset/rate_limits.py)."""

from __future__ import annotations

import logging
import shlex
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from overbrainer.config.model import Config, Pipeline, Role, Topic
from overbrainer.config.templates import Templates, load_templates
from overbrainer.dataset import rate_limits
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import ConfigError, Interrupted
from overbrainer.llm.client import LlmClient, connect
from overbrainer.llm.http import LlmSession
from overbrainer.llm.price_db import unpriced
from overbrainer.llm.prices import PriceBook
from overbrainer.support.budget import Budget
from overbrainer.support.threads import Signal

if TYPE_CHECKING:
    from overbrainer.front.bus import EventBus
    from overbrainer.front.interrupt import Interrupt

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted: the stage resumes on its next run"


class StageInterrupted(Interrupted):
    """The user's interrupt stopped a stage command. Its message names the stage and how to
    resume; it is worded for any interrupting signal, and printed as is (not as an error).
    `hint(project)` is the same message with the `-C DIR` the command was given."""

    def __init__(self, stage: str, command: str | None = None):
        self.stage = stage
        self.command = command or stage
        super().__init__(self.hint(None))

    def hint(self, project: str | None) -> str:
        where = f"-C {shlex.quote(project)} " if project else ""
        return (f"interrupted: {self.stage} stopped; rerun `overbrainer {where}{self.command}` "
                f"(or `overbrainer {where}run`) to resume")


class StageContext:
    """`interrupt` is an overbrainer.front.interrupt.Interrupt, a bare threading.Event, or None;
    `max_cost` (USD, `--max-cost`) overrides `[pipeline] max_cost_usd`."""

    def __init__(self, project_dir: str | Path, config: Config, *, bus: EventBus | None = None,
                 interrupt: Interrupt | threading.Event | None = None, prices: PriceBook | None = None,
                 max_cost: float | None = None):
        self.project_dir = Path(project_dir)
        self.paths = ProjectPaths(self.project_dir)
        self.config = config
        self.bus = bus
        # `abandon`: a second interrupt; the requests in flight are not waited for.
        self.stop_event: threading.Event
        self.abandon_event: threading.Event
        if interrupt is None:
            self.stop_event, self.abandon_event = Signal(), Signal()
        elif isinstance(interrupt, threading.Event):
            self.stop_event, self.abandon_event = interrupt, Signal()
        else:
            self.stop_event, self.abandon_event = interrupt.event, interrupt.abandon
        self._max_cost = max_cost
        self.budget = _budget(None, max_cost or config.pipeline.max_cost_usd)
        self._prices = prices
        self.llm = LlmSession()
        self.llm.known_limits = rate_limits.read(self.paths)  # the rate limits earlier commands learned
        self._clients: dict[str, LlmClient] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """The command is over: the rate limits its providers published are kept for the next
        (dataset/rate_limits.py), its providers' connections are closed."""
        try:
            rate_limits.record(self.paths, self.llm.learned_limits())
        finally:
            self.llm.close()

    def __enter__(self) -> "StageContext":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- configuration ---------------------------------------------------------------------

    def replace_config(self, config: Config) -> None:
        """A reloaded configuration (run, between stages): clients are rebuilt on next use,
        the price listing and the channels are kept (once per provider per command)."""
        with self._lock:
            self.config = config
            self._clients.clear()
        self.budget = _budget(self.budget, self._max_cost or config.pipeline.max_cost_usd)

    @property
    def pipeline(self) -> Pipeline:
        return self.config.pipeline

    def select_topics(self, name: str | None) -> list[Topic]:
        """All configured topics, or the one named by --topic (else `unknown topic`)."""
        topics = list(self.config.topics)
        if name is None:
            return topics
        return [self.config.topic(name)]

    # --- clients ---------------------------------------------------------------------------

    @property
    def prices(self) -> PriceBook:
        if self._prices is None:
            self._prices = PriceBook()
        return self._prices

    @overload
    def role(self, role_name: Literal["generator", "parent"]) -> Role: ...

    @overload
    def role(self, role_name: str) -> Role | None: ...

    def role(self, role_name: str) -> Role | None:
        return getattr(self.config.roles, role_name, None)

    def client(self, role_name: str) -> LlmClient:
        """The client of `roles.<role_name>` (connected on first use, once per command)."""
        with self._lock:
            client = self._clients.get(role_name)
            if client is not None:
                return client
        provider, role = self.config.provider_for(role_name)
        client = connect(provider, role, self.config.pipeline, llm=self.llm, prices=self.prices,
                         stop=self.stop_event, role_key=role_key(self.config, role_name))
        with self._lock:
            self._clients.setdefault(role_name, client)
            return self._clients[role_name]

    def connect(self, role_name: str) -> LlmClient:
        """The client of a role whose chats the spend cap bounds: with a cap set, its model's
        price must be known (ConfigError otherwise: no request could be bounded)."""
        client = self.client(role_name)
        if self.budget is not None and client.price is None:
            provider, _ = self.config.provider_for(role_name)
            raise ConfigError(unpriced(role_key(self.config, role_name), provider, client.model))
        return client

    def templates(self, *names: str) -> Templates:
        return load_templates(self.project_dir, list(names))

    # --- interrupt -------------------------------------------------------------------------

    def interrupted(self) -> bool:
        return self.stop_event.is_set()

    def check(self) -> None:
        if self.stop_event.is_set():
            raise Interrupted(INTERRUPTED)


def role_key(config: Config, role_name: str) -> str:
    """Where a role is configured: `roles.<name>`, the parent's for a judge that is not set."""
    if role_name == "judge" and config.roles.judge is None:
        return "roles.parent"
    return f"roles.{role_name}"


def _budget(budget: Budget | None, cap: float | None) -> Budget | None:
    """The command's spend cap (support/budget.py) for `cap`, keeping what `budget` counted."""
    if cap is None:
        return None
    if budget is None:
        return Budget(cap)
    budget.cap = float(cap)
    return budget
