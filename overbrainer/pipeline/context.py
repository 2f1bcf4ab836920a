"""What every stage works with: the configuration, the project paths, the bus, the interrupt
event, and the LLM clients, built lazily per role with one PriceBook shared by the command."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import Interrupted

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted: the stage resumes on its next run"


class StageInterrupted(Interrupted):
    """The user's interrupt stopped a stage command. Its message names the stage and how to
    resume; it is worded for any interrupting signal, and printed as is (not as an error)."""

    def __init__(self, stage: str, command: str | None = None):
        super().__init__(f"interrupted: {stage} stopped; rerun `overbrainer {command or stage}` "
                         "(or `run`) to resume")
        self.stage = stage


class StageContext:
    """`interrupt` is an overbrainer.front.interrupt.Interrupt, a bare threading.Event, or None."""

    def __init__(self, project_dir, config, *, bus=None, interrupt=None, prices=None):
        self.project_dir = Path(project_dir)
        self.paths = ProjectPaths(self.project_dir)
        self.config = config
        self.bus = bus
        if interrupt is None:
            self.stop_event = threading.Event()
        elif isinstance(interrupt, threading.Event):
            self.stop_event = interrupt
        else:
            self.stop_event = interrupt.event
        self._prices = prices
        self._clients: dict[str, object] = {}
        self._lock = threading.Lock()

    # --- configuration ---------------------------------------------------------------------

    def replace_config(self, config) -> None:
        """A reloaded configuration (run, between stages): clients are rebuilt on next use,
        the price listing is kept (prices are listed once per provider per command)."""
        with self._lock:
            self.config = config
            self._clients.clear()

    @property
    def pipeline(self):
        return self.config.pipeline

    def select_topics(self, name: str | None) -> list:
        """All configured topics, or the one named by --topic (else `unknown topic`)."""
        topics = list(self.config.topics)
        if name is None:
            return topics
        return [self.config.topic(name)]

    # --- clients ---------------------------------------------------------------------------

    @property
    def prices(self):
        if self._prices is None:
            from overbrainer.llm.prices import PriceBook

            self._prices = PriceBook()
        return self._prices

    def role(self, role_name: str):
        return getattr(self.config.roles, role_name, None)

    def client(self, role_name: str):
        """The client of `roles.<role_name>` (connected on first use, once per command)."""
        with self._lock:
            client = self._clients.get(role_name)
            if client is not None:
                return client
        from overbrainer.llm.client import connect

        provider, role = self.config.provider_for(role_name)
        client = connect(provider, role, self.config.pipeline, prices=self.prices, stop=self.stop_event)
        with self._lock:
            self._clients.setdefault(role_name, client)
            return self._clients[role_name]

    def templates(self, *names: str):
        from overbrainer.config.templates import load_templates

        return load_templates(self.project_dir, list(names))

    # --- interrupt -------------------------------------------------------------------------

    def interrupted(self) -> bool:
        return self.stop_event.is_set()

    def check(self) -> None:
        if self.stop_event.is_set():
            raise Interrupted(INTERRUPTED)
