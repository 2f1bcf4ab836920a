"""The metrics of one command: a subscriber on every bus its front end opens, the `/metrics`
server (`[metrics] listen`) and the textfile (`[metrics] textfile`).

`serving(project_dir, config, front)` is what cli/ wraps around a locking command: the counters
are seeded from history.jsonl, then each bus gets a subscriber thread that applies its events
to the tally. The textfile is rewritten (atomically) when a stage finishes, when a training job
ends, when a bus closes (the end of a stage command, of `run`'s stages, of a training run) and
when the command ends. A failed bind or write only warns: metrics never stop a command.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.registry import CollectorRegistry

from overbrainer import __version__
from overbrainer.dataset.accounting.history import read_history
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError
from overbrainer.front.events import JobStatus, Lagged, RunWatched, StageFinished, StageStarted
from overbrainer.jobs.records import spend_by_run
from overbrainer.metrics.families import TallyCollector
from overbrainer.metrics.server import MetricsServer
from overbrainer.metrics.tally import Tally
from overbrainer.support.atomic import atomic_write_bytes

if TYPE_CHECKING:
    from overbrainer.front.bus import EventBus, Subscription

log = logging.getLogger(__name__)

STOP_GRACE = 2.0  # seconds the subscribers get to apply what their buses still hold


def textfile_path(project_dir: Path, text: str | None) -> Path | None:
    """`[metrics] textfile`: `~` expanded, a relative path taken from the project directory."""
    return None if text is None else Path(project_dir) / os.path.expanduser(text)


def _history(project_dir: Path) -> list:
    try:
        return read_history(project_dir)
    except OverbrainerError as e:
        log.warning("metrics: %s; the counters start from this command", e)
        return []


class Exporter:
    def __init__(self, project_dir: Path, project: str, settings) -> None:
        self.project_dir = Path(project_dir)
        self.settings = settings
        self.tally = Tally()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(TallyCollector(self.tally, project, __version__,
                                              lambda: spend_by_run(ProjectPaths(self.project_dir).runs)))
        self.textfile = textfile_path(self.project_dir, settings.textfile)
        self.server: "MetricsServer | None" = None
        self._lock = threading.Lock()
        self._buses: weakref.WeakSet = weakref.WeakSet()
        self._consumers: list[tuple["Subscription", threading.Thread]] = []
        self._stopped = False
        self._write_lock = threading.Lock()
        self._write_warned = False

    def start(self) -> "Exporter":
        self.tally.seed(_history(self.project_dir))
        if self.settings.listen is not None:
            self.server = serve(self.settings.host, self.settings.port, self.render)
        return self

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition the scraper asked for (`Accept`): OpenMetrics or the text format."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type

    # --- the buses ------------------------------------------------------------------------------

    def watch(self, bus: "EventBus") -> None:
        """Subscribe to `bus` (once per bus) and apply its events on a thread of its own."""
        with self._lock:
            if self._stopped or bus in self._buses:
                return
            self._buses.add(bus)
            sub = bus.subscribe()
            thread = threading.Thread(target=self._consume, args=(sub,), name="overbrainer-metrics", daemon=True)
            self._consumers.append((sub, thread))
        thread.start()

    def _consume(self, sub: "Subscription") -> None:
        stages: set[str] = set()
        runs: set[str] = set()
        lost = False
        for event in sub:
            try:
                self.tally.apply(event)
            except Exception:  # noqa: BLE001 - a metrics bug must not stop the command's metrics
                log.debug("metrics: cannot count %s", type(event).__name__, exc_info=True)
            if isinstance(event, StageStarted):
                stages.add(event.stage)
            elif isinstance(event, RunWatched) and event.job is None:
                runs.add(event.run_id)
            elif isinstance(event, Lagged):
                lost = True
            if isinstance(event, StageFinished) or (isinstance(event, JobStatus) and event.status != "running"):
                self.write_textfile()
        # A stage stopped midway (or events lost): its history line, written by now, says the rest.
        if self.tally.bus_ended(stages, runs) or lost:
            self.tally.reconcile(_history(self.project_dir))
        self.write_textfile()

    # --- the textfile ---------------------------------------------------------------------------

    def write_textfile(self) -> None:
        """Rewrite the textfile (temp file, fsync, rename: node_exporter never reads half of it)."""
        if self.textfile is None:
            return
        with self._write_lock:
            try:
                atomic_write_bytes(self.textfile, generate_latest(self.registry))
            except Exception as e:  # noqa: BLE001 - a full disk or a bug: the command goes on
                level = logging.DEBUG if self._write_warned else logging.WARNING
                self._write_warned = True
                log.log(level, "metrics: cannot write %s: %s", self.textfile, getattr(e, "strerror", None) or e)

    def stop(self, grace: float = STOP_GRACE) -> None:
        """The command ends: the subscribers apply what is left, the textfile is written a last
        time, the server closes."""
        with self._lock:
            self._stopped = True
            consumers = list(self._consumers)
        deadline = time.monotonic() + grace
        for sub, thread in consumers:
            sub.close(drain=True)  # a bus the command left open (an embedding caller's) ends here
            thread.join(max(0.0, deadline - time.monotonic()))
        self.write_textfile()
        if self.server is not None:
            self.server.close()


def serve(host: str, port: int, render) -> "MetricsServer | None":
    """The started server, or None (a warning) when the address cannot be bound."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        server = MetricsServer(host, port, render).start()
    except OSError as e:
        log.warning("metrics: cannot listen on %s: %s; the command goes on without them", shown, e.strerror or e)
        return None
    if not ipaddress.ip_address(host).is_loopback:
        log.warning("metrics on %s have no authentication: whoever reaches the address reads them", server.url)
    log.info("metrics at %s", server.url)
    return server


@contextlib.contextmanager
def serving(project_dir: Path, config, front) -> Iterator[Exporter]:
    """The metrics of a locking command, from its start to its end (`[metrics]` is set)."""
    exporter = Exporter(project_dir, config.project.name, config.metrics).start()
    front.watch_buses(exporter.watch)
    try:
        yield exporter
    finally:
        exporter.stop()
