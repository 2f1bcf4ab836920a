"""The `/metrics` endpoint: a small threaded HTTP/1.1 server (the standard library's).

`GET /metrics` answers 200 with the exposition format the scraper asks for (OpenMetrics for
Prometheus, the text format for curl); any other path or method answers 404 `not found`; a
failure to render answers 500. At most `LIMIT` connections at once (more are closed at once), a
request's header must arrive within `HEADER_TIMEOUT` seconds, a failed accept pauses 100 ms, and
nothing is looked up in DNS. The body is prometheus_client's (metrics/exporter.render: its
`choose_encoder` and registry).

Why not prometheus_client's own server (`start_http_server`, a wsgiref server around
`make_wsgi_app`)? Its lifecycle would fit (a daemon thread, `shutdown()` at the command's end,
OSError on a taken port, any bind address), but not the rest: its `server_bind` asks DNS for the
address's full name (`socket.getfqdn`), which waits for the resolver's timeout on a server without
DNS; it sets no header timeout and no limit, so every idle connection holds a thread for the rest
of a command that may run for hours; a failure to render prints a traceback on stderr (wsgiref's
`log_exception`), which is this tool's log stream (JSON lines under `--json`); and it serves the
metrics on every path. `start_http_server` takes no server or handler class that could change
these; `make_wsgi_app` alone would replace only `_Handler` here, and bring wsgiref's traceback.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

log = logging.getLogger(__name__)

LIMIT = 32
HEADER_TIMEOUT = 10.0
ACCEPT_PAUSE = 0.1
PATH = "/metrics"

# render(accept header or None) -> (body, content type)
Render = Callable[[str | None], tuple[bytes, str]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = HEADER_TIMEOUT
    server: "MetricsServer"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path.split("?", 1)[0] != PATH:
            return self._not_found()
        try:
            body, content_type = self.server.render(self.headers.get("Accept"))
        except Exception:  # noqa: BLE001 - a rendering bug answers 500, it never stops the command
            log.debug("metrics: cannot render", exc_info=True)
            return self._send(500, b"cannot render the metrics\n", "text/plain; charset=utf-8")
        self._send(200, body, content_type)

    def __getattr__(self, name: str):
        if name.startswith("do_"):  # every other method: 404, as for an unknown path
            return self._not_found
        raise AttributeError(name)

    def _not_found(self) -> None:
        self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if status != 200:  # a request body we did not read must not pass for the next request
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        log.debug("metrics: %s %s", self.address_string(), format % args)


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, host: str, port: int, render: Render, *, limit: int = LIMIT):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.render = render
        self._slots = threading.BoundedSemaphore(limit)
        self._thread: threading.Thread | None = None
        super().__init__((host, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for the host's full name: not on a server without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def get_request(self):
        try:
            return super().get_request()
        except OSError:
            time.sleep(ACCEPT_PAUSE)  # out of file descriptors, say: do not spin
            raise

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{PATH}"

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # over the limit: closed at once
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def start(self) -> "MetricsServer":
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="overbrainer-metrics-http", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self.shutdown()
            self._thread.join(2)
        self.server_close()
